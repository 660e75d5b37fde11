// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <string>

namespace nlockd::cmd {

// The daemon's pid file (pid_file / --pid-file): created, or taken over from a process that
// died without removing it, with this process's id and a newline, and locked (flock) for as
// long as the object lives, so that a second nlockd given the same file refuses to start
// rather than overwrite it. Removed when destroyed (emptied instead when its directory does
// not let this user remove it). The descriptor is close-on-exec: a command run by ha_on_active
// does not hold the lock.
class PidFile {
 public:
  // Throws Error (kFailed) when the file cannot be opened or written, or when another process
  // holds it (the message names its pid).
  explicit PidFile(std::string path);
  ~PidFile();
  PidFile(const PidFile&) = delete;
  PidFile& operator=(const PidFile&) = delete;

 private:
  std::string path_;
  int fd_ = -1;
};

}  // namespace nlockd::cmd
