// SPDX-License-Identifier: Apache-2.0
#include "base/logging.hpp"

#include <cstdlib>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <sys/stat.h>

namespace nlockd {
namespace {

TEST(ParseLogLevel, KnowsSpdlogNamesAndWarningAlias) {
  EXPECT_EQ(ParseLogLevel("debug"), spdlog::level::debug);
  EXPECT_EQ(ParseLogLevel("warn"), spdlog::level::warn);
  EXPECT_EQ(ParseLogLevel("warning"), spdlog::level::warn);
  EXPECT_EQ(ParseLogLevel("off"), spdlog::level::off);
  EXPECT_EQ(ParseLogLevel("loud"), std::nullopt);
  EXPECT_EQ(LogLevelName(spdlog::level::warn), "warn");
  EXPECT_EQ(ParseLogLevel(LogLevelName(spdlog::level::critical)), spdlog::level::critical);
}

TEST(LogValue, QuotesOnlyWhatLogfmtNeedsQuoted) {
  EXPECT_EQ(LogValue("client-1.example"), "client-1.example");
  EXPECT_EQ(LogValue("host/with space"), "\"host/with space\"");
  EXPECT_EQ(LogValue("a=b"), "\"a=b\"");
  EXPECT_EQ(LogValue("say \"hi\""), "\"say \\\"hi\\\"\"");
  EXPECT_EQ(LogValue(""), "\"\"");
  EXPECT_EQ(LogValue("line\nbreak\x01"), "\"line\\nbreak\\x01\"");
  EXPECT_EQ(LogValue("back\\slash"), "\"back\\\\slash\"");
}

TEST(DetectLogFormat, JournalOnlyWhenStderrIsTheNamedStream) {
  unsetenv("JOURNAL_STREAM");
  EXPECT_EQ(DetectLogFormat(), LogFormat::kTimestamped);
  setenv("JOURNAL_STREAM", "1:2", 1);
  EXPECT_EQ(DetectLogFormat(), LogFormat::kTimestamped);
  struct stat info {};
  ASSERT_EQ(fstat(2, &info), 0);
  setenv("JOURNAL_STREAM",
         (std::to_string(info.st_dev) + ":" + std::to_string(info.st_ino)).c_str(), 1);
  EXPECT_EQ(DetectLogFormat(), LogFormat::kJournal);
  unsetenv("JOURNAL_STREAM");
}

TEST(MakeLogger, JournalFormatHasPriorityPrefixAndNoTimestamp) {
  std::ostringstream out;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out);
  auto logger = MakeLogger(sink, spdlog::level::debug, LogFormat::kJournal);
  logger->warn("nsm notify failed mon_name={}", LogValue("a b"));
  logger->info("x");
  logger->error("y");
  logger->debug("z");
  logger->flush();
  EXPECT_EQ(out.str(),
            "<4>level=warning msg=\"nsm notify failed\" mon_name=\"a b\"\n<6>level=info msg=x\n"
            "<3>level=error msg=y\n<7>level=debug msg=z\n");

  std::ostringstream plain;
  auto timestamped = MakeLogger(std::make_shared<spdlog::sinks::ostream_sink_mt>(plain),
                                spdlog::level::info, LogFormat::kTimestamped);
  timestamped->info("x");
  timestamped->flush();
  EXPECT_NE(plain.str().find("T"), std::string::npos);
  EXPECT_NE(plain.str().find(" level=info msg=x\n"), std::string::npos);
  EXPECT_NE(plain.str()[0], '<');
}

// Every line parses as logfmt: the free words of the message become msg=, the fields stay.
TEST(MakeLogger, TheMessageIsAMsgField) {
  std::ostringstream out;
  auto logger = MakeLogger(std::make_shared<spdlog::sinks::ostream_sink_mt>(out),
                           spdlog::level::info, LogFormat::kJournal);
  logger->info("nlockd listening address={} port={}", "127.0.0.1", 4045);
  logger->info("store {} opened (previous run {})", "postgresql://h/db?sslmode=require", "clean");
  logger->info("nlockd received signal 15; shutting down");
  logger->info("count={} total={}", 1, 2);
  logger->info("say \"hi\" to={}", LogValue("a b"));
  logger->flush();
  EXPECT_EQ(out.str(),
            "<6>level=info msg=\"nlockd listening\" address=127.0.0.1 port=4045\n"
            "<6>level=info msg=\"store postgresql://h/db?sslmode=require opened (previous run "
            "clean)\"\n"
            "<6>level=info msg=\"nlockd received signal 15; shutting down\"\n"
            "<6>level=info count=1 total=2\n"
            "<6>level=info msg=\"say \\\"hi\\\"\" to=\"a b\"\n");
}

}  // namespace
}  // namespace nlockd
