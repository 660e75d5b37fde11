// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include <sys/types.h>

namespace nlockd::testutil {

// A child process started with posix_spawn, its stderr (and stdout, merged) read through a pipe
// so that tests can wait for a log line instead of sleeping. Killed with SIGKILL if still
// running when destroyed.
class Subprocess {
 public:
  explicit Subprocess(std::vector<std::string> argv);
  ~Subprocess();
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  // Reads output until a line matches; returns the match, or nullopt at EOF or timeout.
  std::optional<std::smatch> WaitForLine(const std::regex& pattern,
                                         std::chrono::milliseconds timeout);
  // True when any line read so far matches (even one an earlier wait passed over), else waits
  // as WaitForLine does. For events whose order against other lines is not fixed, such as a
  // registration logged by the io thread while the main thread logs "listening".
  bool LoggedOrWaitFor(const std::regex& pattern,
                       std::chrono::milliseconds timeout = std::chrono::seconds(20));
  // As WaitForLine, but the lines it reads stay unread for the next WaitForLine: for a line
  // logged at no fixed point among those a test waits for next (the admin server's, which
  // comes up beside the restart notification).
  std::optional<std::smatch> PeekForLine(const std::regex& pattern,
                                         std::chrono::milliseconds timeout);
  // Sends a signal and waits for the exit; returns the exit status (128+signal if killed), or
  // nullopt if it did not exit within the timeout.
  std::optional<int> Stop(int signal, std::chrono::milliseconds timeout);
  // Waits for the exit without signalling.
  std::optional<int> Wait(std::chrono::milliseconds timeout);
  // Everything read so far.
  const std::string& output() const { return output_; }
  pid_t pid() const { return pid_; }

 private:
  bool ReadSome(std::chrono::milliseconds timeout);

  pid_t pid_ = -1;
  int out_fd_ = -1;
  std::string output_;
  size_t scanned_ = 0;
  std::optional<int> exit_status_;
  std::string last_line_;
};

// Runs a command to completion; returns (exit status, merged output).
std::pair<int, std::string> RunCommand(
    const std::vector<std::string>& argv,
    std::chrono::milliseconds timeout = std::chrono::seconds(30));

}  // namespace nlockd::testutil
