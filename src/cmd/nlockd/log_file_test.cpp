// SPDX-License-Identifier: Apache-2.0
#include "cmd/nlockd/log_file.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include "base/error.hpp"
#include "base/logging.hpp"

namespace nlockd::cmd {
namespace {

std::string Read(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

TEST(ReopenableFileSink, ReopenAfterARenameWritesToANewFileOfTheName) {
  char dir[] = "/tmp/nlockd-logfile-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/nlockd.log";
  auto sink = std::make_shared<ReopenableFileSink>(path);
  auto logger = MakeLogger(sink, spdlog::level::info, LogFormat::kJournal);
  logger->info("first line={}", 1);
  // What logrotate does: rename, then signal (the daemon calls Reopen on SIGUSR1).
  std::filesystem::rename(path, path + ".1");
  logger->info("second line={}", 2);
  sink->Reopen();
  logger->info("third line={}", 3);
  // Every line reached its file at once, without a flush: two in the old file, one in the new.
  const std::string old_file = Read(path + ".1");
  const std::string new_file = Read(path);
  EXPECT_EQ(std::count(old_file.begin(), old_file.end(), '\n'), 2) << old_file;
  EXPECT_NE(old_file.find("first line=1\n"), std::string::npos) << old_file;
  EXPECT_NE(old_file.find("second line=2\n"), std::string::npos) << old_file;
  EXPECT_EQ(std::count(new_file.begin(), new_file.end(), '\n'), 1) << new_file;
  EXPECT_NE(new_file.find("third line=3\n"), std::string::npos) << new_file;

  std::filesystem::remove_all(dir);  // Gone: Reopen fails, the old file stays in use.
  EXPECT_THROW(sink->Reopen(), Error);
  logger->info("fourth");
  EXPECT_THROW(ReopenableFileSink(std::string(dir) + "/x.log"), Error);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace nlockd::cmd
