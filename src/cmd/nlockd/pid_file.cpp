// SPDX-License-Identifier: Apache-2.0
#include "cmd/nlockd/pid_file.hpp"

#include <cerrno>
#include <cstring>
#include <string>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include "base/error.hpp"

namespace nlockd::cmd {
namespace {

[[noreturn]] void Fail(const std::string& path, const std::string& what) {
  throw Error(ErrorKind::kFailed, "pid file " + path + ": " + what);
}

}  // namespace

PidFile::PidFile(std::string path) : path_(std::move(path)) {
  fd_ = open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) Fail(path_, std::strerror(errno));
  if (flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    char held[32] = {};
    ssize_t n = pread(fd_, held, sizeof held - 1, 0);
    std::string holder = n > 0 ? std::string(held, static_cast<size_t>(n)) : "";
    while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' ')) holder.pop_back();
    close(fd_);
    fd_ = -1;
    if (error == EWOULDBLOCK) {
      Fail(path_, "held by another running nlockd" +
                      (holder.empty() ? std::string() : " (pid " + holder + ")"));
    }
    Fail(path_, std::strerror(error));
  }
  const std::string text = std::to_string(getpid()) + "\n";
  if (ftruncate(fd_, 0) != 0 ||
      pwrite(fd_, text.data(), text.size(), 0) != static_cast<ssize_t>(text.size())) {
    const int error = errno;
    close(fd_);
    fd_ = -1;
    Fail(path_, std::strerror(error));
  }
}

PidFile::~PidFile() {
  if (fd_ < 0) return;
  // Removed while still locked, so that a new nlockd never sees this process's file unlocked.
  if (unlink(path_.c_str()) != 0) {
    [[maybe_unused]] int ignored = ftruncate(fd_, 0);
  }
  close(fd_);
}

}  // namespace nlockd::cmd
