// SPDX-License-Identifier: Apache-2.0
#include "admin/process_metrics.hpp"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include <gtest/gtest.h>
#include <prometheus/metric_family.h>

#include "testutil/temp_dir.hpp"

namespace nlockd::admin {
namespace {

std::map<std::string, double> Values(const std::vector<prometheus::MetricFamily>& families) {
  std::map<std::string, double> out;
  for (const auto& family : families) {
    const auto& sample = family.metric.at(0);
    out[family.name] =
        family.type == prometheus::MetricType::Counter ? sample.counter.value : sample.gauge.value;
  }
  return out;
}

// A /proc/PID/stat line whose command name holds a space and a parenthesis.
constexpr const char* kStat =
    "4242 (nlockd (x) y) S 1 4242 4242 0 -1 4194560 1500 0 0 0 250 150 0 0 20 0 9 0 "
    "123400 987654321 2048 18446744073709551615 1 1 0 0 0 0 0 4096 0 0 0 0 17 1 0 0 0 0 0\n";

TEST(ProcessMetrics, ParsesStatWithAnAwkwardCommandName) {
  auto stat = ParseProcessStat(kStat, 100, 4096);
  ASSERT_TRUE(stat.has_value());
  EXPECT_DOUBLE_EQ(stat->cpu_seconds, 4.0);  // (250 + 150) ticks at 100 Hz
  EXPECT_DOUBLE_EQ(stat->virtual_memory_bytes, 987654321);
  EXPECT_DOUBLE_EQ(stat->resident_memory_bytes, 2048.0 * 4096);
  EXPECT_DOUBLE_EQ(stat->start_ticks, 123400);
  EXPECT_FALSE(ParseProcessStat("4242 (nlockd) S 1 2 3", 100, 4096).has_value());
}

TEST(ProcessMetrics, ParsesBootTimeAndTheOpenFilesLimit) {
  EXPECT_EQ(ParseBootTime("cpu  1 2 3\nintr 5\nbtime 1700000000\nprocesses 9\n"), 1700000000);
  EXPECT_FALSE(ParseBootTime("cpu 1 2 3\n").has_value());
  const char* limits =
      "Limit                     Soft Limit           Hard Limit           Units     \n"
      "Max cpu time              unlimited            unlimited            seconds   \n"
      "Max open files            65536                524288               files     \n";
  EXPECT_EQ(ParseMaxOpenFiles(limits), 65536);
  EXPECT_FALSE(
      ParseMaxOpenFiles("Max open files            unlimited            unlimited    files\n"));
}

TEST(ProcessMetrics, ReadsEveryMetricFromAProcTree) {
  testutil::TempDir proc("proc");
  const std::filesystem::path root = proc.path();
  std::filesystem::create_directories(root / "self" / "fd");
  std::ofstream(root / "self" / "stat") << kStat;
  std::ofstream(root / "stat") << "btime 1700000000\n";
  std::ofstream(root / "self" / "limits") << "Max open files            1024  4096  files\n";
  for (const char* fd : {"0", "1", "2"}) std::ofstream(root / "self" / "fd" / fd) << "";
  auto values = Values(ProcessMetrics(root.string()).Collect());
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  EXPECT_DOUBLE_EQ(values.at("process_cpu_seconds_total"), 400 / ticks);
  EXPECT_DOUBLE_EQ(values.at("process_start_time_seconds"), 1700000000 + 123400 / ticks);
  EXPECT_DOUBLE_EQ(values.at("process_virtual_memory_bytes"), 987654321);
  EXPECT_GT(values.at("process_resident_memory_bytes"), 0);
  EXPECT_EQ(values.at("process_open_fds"), 3);
  EXPECT_EQ(values.at("process_max_fds"), 1024);
}

TEST(ProcessMetrics, ReadsThisProcess) {
  auto values = Values(ProcessMetrics().Collect());
  ASSERT_EQ(values.size(), 6u);
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  // Started in the last hour (the test binary), before now.
  EXPECT_LE(values.at("process_start_time_seconds"), now + 1);
  EXPECT_GT(values.at("process_start_time_seconds"), now - 3600);
  EXPECT_GE(values.at("process_open_fds"), 3);
  EXPECT_GT(values.at("process_resident_memory_bytes"), 1 << 20);
  std::string text = ProcessMetrics().Serialize();
  EXPECT_NE(text.find("# TYPE process_cpu_seconds_total counter\n"), std::string::npos) << text;
}

}  // namespace
}  // namespace nlockd::admin
