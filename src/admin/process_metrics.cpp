// SPDX-License-Identifier: Apache-2.0
#include "admin/process_metrics.hpp"

#include <charconv>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <utility>

#include <prometheus/metric_family.h>
#include <prometheus/text_serializer.h>
#include <unistd.h>

namespace nlockd::admin {
namespace {

std::optional<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::optional<double> ToNumber(std::string_view text) {
  double value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

std::vector<std::string_view> Words(std::string_view text) {
  std::vector<std::string_view> words;
  size_t start = 0;
  while (start < text.size()) {
    size_t begin = text.find_first_not_of(" \t\n", start);
    if (begin == std::string_view::npos) break;
    size_t end = text.find_first_of(" \t\n", begin);
    if (end == std::string_view::npos) end = text.size();
    words.push_back(text.substr(begin, end - begin));
    start = end;
  }
  return words;
}

prometheus::MetricFamily Family(std::string name, std::string help, prometheus::MetricType type,
                                double value) {
  prometheus::ClientMetric sample;
  if (type == prometheus::MetricType::Counter) {
    sample.counter.value = value;
  } else {
    sample.gauge.value = value;
  }
  return prometheus::MetricFamily{std::move(name), std::move(help), type, {sample}};
}

}  // namespace

std::optional<ProcessStat> ParseProcessStat(std::string_view text, double ticks_per_second,
                                            double page_size) {
  // "PID (COMM) STATE ...": the fields after the command name, from field 3 (state) on.
  size_t close = text.rfind(')');
  if (close == std::string_view::npos) return std::nullopt;
  std::vector<std::string_view> fields = Words(text.substr(close + 1));
  // proc(5) numbers the fields from 1: utime 14, stime 15, starttime 22, vsize 23, rss 24.
  auto field = [&fields](size_t number) -> std::optional<double> {
    if (number - 3 >= fields.size()) return std::nullopt;
    return ToNumber(fields[number - 3]);
  };
  auto utime = field(14);
  auto stime = field(15);
  auto start = field(22);
  auto vsize = field(23);
  auto rss = field(24);
  if (!utime || !stime || !start || !vsize || !rss) return std::nullopt;
  return ProcessStat{(*utime + *stime) / ticks_per_second, *vsize, *rss * page_size, *start};
}

std::optional<double> ParseBootTime(std::string_view text) {
  std::vector<std::string_view> words = Words(text);
  for (size_t i = 0; i + 1 < words.size(); ++i) {
    if (words[i] == "btime") return ToNumber(words[i + 1]);
  }
  return std::nullopt;
}

std::optional<double> ParseMaxOpenFiles(std::string_view text) {
  constexpr std::string_view kName = "Max open files";
  size_t at = text.find(kName);
  if (at == std::string_view::npos) return std::nullopt;
  size_t end = text.find('\n', at);
  std::vector<std::string_view> words =
      Words(text.substr(at + kName.size(), end == std::string_view::npos ? end : end - at));
  if (words.empty()) return std::nullopt;
  return ToNumber(words[0]);  // "unlimited" is not a number
}

ProcessMetrics::ProcessMetrics(std::string proc) : proc_(std::move(proc)) {}

std::vector<prometheus::MetricFamily> ProcessMetrics::Collect() const {
  using prometheus::MetricType;
  std::vector<prometheus::MetricFamily> families;
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  const double page = static_cast<double>(sysconf(_SC_PAGESIZE));
  std::optional<ProcessStat> stat;
  if (auto text = ReadFile(proc_ + "/self/stat")) stat = ParseProcessStat(*text, ticks, page);
  if (stat) {
    families.push_back(Family("process_cpu_seconds_total",
                              "Total user and system CPU time spent in seconds.",
                              MetricType::Counter, stat->cpu_seconds));
    families.push_back(Family("process_resident_memory_bytes", "Resident memory size in bytes.",
                              MetricType::Gauge, stat->resident_memory_bytes));
    families.push_back(Family("process_virtual_memory_bytes", "Virtual memory size in bytes.",
                              MetricType::Gauge, stat->virtual_memory_bytes));
    std::optional<double> boot;
    if (auto text = ReadFile(proc_ + "/stat")) boot = ParseBootTime(*text);
    if (boot) {
      families.push_back(Family("process_start_time_seconds",
                                "Start time of the process since unix epoch in seconds.",
                                MetricType::Gauge, *boot + stat->start_ticks / ticks));
    }
  }
  std::error_code ec;
  double open = 0;
  for (std::filesystem::directory_iterator it(proc_ + "/self/fd", ec), end; !ec && it != end;
       it.increment(ec)) {
    ++open;
  }
  if (!ec) {
    families.push_back(
        Family("process_open_fds", "Number of open file descriptors.", MetricType::Gauge, open));
  }
  std::optional<double> max_fds;
  if (auto text = ReadFile(proc_ + "/self/limits")) max_fds = ParseMaxOpenFiles(*text);
  if (max_fds) {
    families.push_back(Family("process_max_fds", "Maximum number of open file descriptors.",
                              MetricType::Gauge, *max_fds));
  }
  return families;
}

std::string ProcessMetrics::Serialize() const {
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, Collect());
  return out.str();
}

}  // namespace nlockd::admin
