// SPDX-License-Identifier: Apache-2.0
#include "cmd/nlockd/pid_file.hpp"

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/error.hpp"

namespace nlockd::cmd {
namespace {

std::string Read(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

class PidFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/nlockd-pidfile-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    path_ = dir_ + "/nlockd.pid";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
  std::string path_;
};

TEST_F(PidFileTest, HoldsThisProcessIdAndIsRemovedAtTheEnd) {
  {
    PidFile pid_file(path_);
    EXPECT_EQ(Read(path_), std::to_string(getpid()) + "\n");
  }
  EXPECT_FALSE(std::filesystem::exists(path_));
}

TEST_F(PidFileTest, ASecondHolderIsRefusedNamingTheFirst) {
  PidFile first(path_);
  // Another process, as a second nlockd would be (flock locks belong to the open file, so a
  // second open in this process would be refused too, but a child shows the real case).
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    try {
      PidFile second(path_);
      _exit(1);
    } catch (const Error& e) {
      std::string message = e.what();
      bool named = message.find("held by another running nlockd (pid " + std::to_string(getppid()) +
                                ")") != std::string::npos;
      _exit(named ? 0 : 2);
    }
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(Read(path_), std::to_string(getpid()) + "\n");
}

TEST_F(PidFileTest, AStaleFileOfADeadProcessIsTakenOver) {
  std::ofstream(path_) << "999999999\nrest of an old longer file\n";
  PidFile pid_file(path_);
  EXPECT_EQ(Read(path_), std::to_string(getpid()) + "\n");
}

TEST_F(PidFileTest, AFileThatCannotBeCreatedIsAnError) {
  EXPECT_THROW(PidFile(dir_ + "/missing/nlockd.pid"), Error);
}

}  // namespace
}  // namespace nlockd::cmd
