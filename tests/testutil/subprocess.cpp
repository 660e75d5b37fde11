// SPDX-License-Identifier: Apache-2.0
#include "testutil/subprocess.hpp"

#include <stdexcept>
#include <thread>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace nlockd::testutil {

Subprocess::Subprocess(std::vector<std::string> argv) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDERR_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  std::vector<char*> args;
  for (auto& arg : argv) args.push_back(arg.data());
  args.push_back(nullptr);
  int rc = posix_spawnp(&pid_, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  out_fd_ = fds[0];
  if (rc != 0) {
    close(out_fd_);
    throw std::runtime_error("cannot start " + argv[0]);
  }
}

Subprocess::~Subprocess() {
  if (!exit_status_ && pid_ > 0) {
    kill(pid_, SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
  }
  if (out_fd_ >= 0) close(out_fd_);
}

bool Subprocess::ReadSome(std::chrono::milliseconds timeout) {
  pollfd pfd{out_fd_, POLLIN, 0};
  int ready = poll(&pfd, 1, static_cast<int>(timeout.count()));
  if (ready <= 0) return false;
  char buffer[4096];
  ssize_t n = read(out_fd_, buffer, sizeof buffer);
  if (n <= 0) return false;
  output_.append(buffer, static_cast<size_t>(n));
  return true;
}

std::optional<std::smatch> Subprocess::WaitForLine(const std::regex& pattern,
                                                   std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    size_t newline;
    while ((newline = output_.find('\n', scanned_)) != std::string::npos) {
      last_line_ = output_.substr(scanned_, newline - scanned_);
      scanned_ = newline + 1;
      std::smatch match;
      if (std::regex_search(last_line_, match, pattern)) return match;
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return std::nullopt;
    if (!ReadSome(left)) {
      if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
      pollfd pfd{out_fd_, POLLIN, 0};
      if (poll(&pfd, 1, 0) > 0 && (pfd.revents & POLLHUP) && !(pfd.revents & POLLIN)) {
        return std::nullopt;  // EOF: the process closed its output.
      }
    }
  }
}

std::optional<std::smatch> Subprocess::PeekForLine(const std::regex& pattern,
                                                   std::chrono::milliseconds timeout) {
  const size_t place = scanned_;
  auto match = WaitForLine(pattern, timeout);
  scanned_ = place;
  return match;
}

bool Subprocess::LoggedOrWaitFor(const std::regex& pattern, std::chrono::milliseconds timeout) {
  return std::regex_search(output_.substr(0, scanned_), pattern) ||
         WaitForLine(pattern, timeout).has_value();
}

std::optional<int> Subprocess::Wait(std::chrono::milliseconds timeout) {
  if (exit_status_) return exit_status_;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    int status = 0;
    pid_t done = waitpid(pid_, &status, WNOHANG);
    if (done == pid_) {
      exit_status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      while (ReadSome(std::chrono::milliseconds(0))) {
      }
      return exit_status_;
    }
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    // Drain output meanwhile so that the child never blocks on a full pipe.
    ReadSome(std::chrono::milliseconds(10));
  }
}

std::optional<int> Subprocess::Stop(int signal, std::chrono::milliseconds timeout) {
  if (!exit_status_) kill(pid_, signal);
  return Wait(timeout);
}

std::pair<int, std::string> RunCommand(const std::vector<std::string>& argv,
                                       std::chrono::milliseconds timeout) {
  Subprocess process(argv);
  auto status = process.Wait(timeout);
  if (!status) return {-1, process.output() + "\n(timed out)"};
  return {*status, process.output()};
}

}  // namespace nlockd::testutil
