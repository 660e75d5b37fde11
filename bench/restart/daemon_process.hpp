// SPDX-License-Identifier: Apache-2.0
#pragma once

// nlockd started by a benchmark, its log lines timestamped as they arrive (the restart and HA
// takeover benches measure from them).
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <regex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench/restart/sim_hosts.hpp"

namespace nlockd::bench {

// nlockd as a child process; its log (stderr) read on a thread that timestamps the lines the
// bench waits for.
class Daemon {
 public:
  explicit Daemon(const std::vector<std::string>& argv) {
    int pipe_fds[2];
    if (::pipe(pipe_fds) != 0) throw std::runtime_error("pipe");
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDERR_FILENO);
    posix_spawn_file_actions_addclose(&actions, pipe_fds[0]);
    std::vector<char*> args;
    for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
    args.push_back(nullptr);
    exec_ = Clock::now();
    if (posix_spawn(&pid_, args[0], &actions, nullptr, args.data(), environ) != 0) {
      throw std::runtime_error("cannot start " + argv[0]);
    }
    posix_spawn_file_actions_destroy(&actions);
    ::close(pipe_fds[1]);
    reader_ = std::thread([this, fd = pipe_fds[0]] { Read(fd); });
  }
  ~Daemon() {
    Kill(SIGKILL);
    reader_.join();
  }
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  // Sends `signal` and reaps the process; its wait status (that of the earlier end if it was
  // already reaped).
  int Kill(int signal) {
    if (pid_ <= 0) return status_;
    ::kill(pid_, signal);
    ::waitpid(pid_, &status_, 0);
    pid_ = -1;
    return status_;
  }
  Clock::time_point exec() const { return exec_; }

  // When a line matching `pattern` was read (the first such line), and the line; waits up to
  // `timeout`.
  std::optional<std::pair<Clock::time_point, std::string>> Wait(const std::string& pattern,
                                                                std::chrono::seconds timeout) {
    const std::regex re(pattern);
    std::unique_lock lock(mutex_);
    std::optional<std::pair<Clock::time_point, std::string>> found;
    changed_.wait_for(lock, timeout, [&] {
      for (const auto& [at, line] : lines_) {
        if (std::regex_search(line, re)) {
          found.emplace(at, line);
          return true;
        }
      }
      return eof_;
    });
    return found;
  }
  std::string Log() {
    std::lock_guard lock(mutex_);
    std::string out;
    for (const auto& line : lines_) out += line.second + "\n";
    return out;
  }

 private:
  void Read(int fd) {
    std::string pending;
    char buffer[4096];
    for (ssize_t n; (n = ::read(fd, buffer, sizeof buffer)) > 0;) {
      const Clock::time_point at = Clock::now();
      pending.append(buffer, static_cast<size_t>(n));
      std::lock_guard lock(mutex_);
      for (size_t end; (end = pending.find('\n')) != std::string::npos;) {
        lines_.emplace_back(at, pending.substr(0, end));
        pending.erase(0, end + 1);
      }
      changed_.notify_all();
    }
    ::close(fd);
    std::lock_guard lock(mutex_);
    eof_ = true;
    changed_.notify_all();
  }

  pid_t pid_ = -1;
  int status_ = 0;
  Clock::time_point exec_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<std::pair<Clock::time_point, std::string>> lines_;
  bool eof_ = false;
  std::thread reader_;
};

}  // namespace nlockd::bench
