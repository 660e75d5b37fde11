// SPDX-License-Identifier: Apache-2.0
#include "store/sqlite/file_holder.hpp"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string_view>
#include <system_error>
#include <utility>

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include "base/error.hpp"

namespace nlockd::store {
namespace {

// The PID text a holder wrote, trimmed; "" when unreadable. A PID is at most 7 digits on Linux.
std::string ReadHolderPid(int fd) {
  char buffer[32] = {};
  const ssize_t n = pread(fd, buffer, sizeof buffer - 1, 0);
  if (n <= 0) return "";
  std::string_view text(buffer, static_cast<size_t>(n));
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  return std::string(text);
}

// Whole-file write lock of the open file description.
struct flock WholeFile(short type) {
  struct flock lock {};
  lock.l_type = type;
  lock.l_whence = SEEK_SET;
  lock.l_start = 0;
  lock.l_len = 0;
  return lock;
}

}  // namespace

FileHolder::FileHolder(std::string lock_path, const std::string& what)
    : path_(std::move(lock_path)) {
  // A first start: the store's directory may not exist yet.
  if (const std::filesystem::path parent = std::filesystem::path(path_).parent_path();
      !parent.empty()) {
    std::error_code error;
    std::filesystem::create_directories(parent, error);
    if (error) {
      throw Error(ErrorKind::kFailed, fmt::format("{}: cannot create directory {}: {}", what,
                                                  parent.string(), error.message()));
    }
  }
  fd_ = open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    throw Error(ErrorKind::kFailed, fmt::format("{}: cannot open its lock file {}: {}", what, path_,
                                                std::strerror(errno)));
  }
  struct flock lock = WholeFile(F_WRLCK);
  if (fcntl(fd_, F_OFD_SETLK, &lock) != 0) {
    const int error = errno;
    std::string holder = (error == EAGAIN || error == EACCES) ? ReadHolderPid(fd_) : "";
    close(fd_);
    fd_ = -1;
    if (error != EAGAIN && error != EACCES) {
      throw Error(ErrorKind::kFailed,
                  fmt::format("{}: cannot lock {}: {}", what, path_, std::strerror(error)));
    }
    throw Error(ErrorKind::kFailed,
                fmt::format("{} is in use by another nlockd (pid {}, holding {}); a store "
                            "serves one process at a time: stop that one, or give this one its "
                            "own --store",
                            what, holder.empty() ? "unknown" : holder, path_));
  }
  // Ours now: record who holds it. A failure here leaves the lock valid, only the name unknown.
  const std::string pid = fmt::format("{}\n", getpid());
  if (ftruncate(fd_, 0) != 0 ||
      pwrite(fd_, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
    const int error = errno;
    close(fd_);
    fd_ = -1;
    throw Error(ErrorKind::kFailed, fmt::format("{}: cannot write its lock file {}: {}", what,
                                                path_, std::strerror(error)));
  }
}

FileHolder::~FileHolder() {
  if (fd_ >= 0) close(fd_);
}

}  // namespace nlockd::store
