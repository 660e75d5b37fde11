// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <string>

namespace nlockd::store {

// Makes this process the only one that uses a SQLite store: an exclusive open-file-description
// lock (fcntl F_OFD_SETLK) on the file `lock_path` (the database path + ".lock"), which holds the
// holder's PID as text. The kernel drops the lock when its descriptor closes, so a crashed or
// killed holder never leaves the store locked; a stale PID in the file means nothing by itself.
// Being a lock of the open file description, a second holder in the same process conflicts
// too. Thread-compatible.
class FileHolder {
 public:
  // Takes the lock, creating the file (mode 0644) and its parent directories if needed. Throws
  // nlockd::Error(kFailed) naming the holder's PID when another descriptor holds it, or the file
  // when it cannot be used. `what` names the store in messages ("SQLite database
  // /var/lib/nlockd/nlockd.db").
  FileHolder(std::string lock_path, const std::string& what);
  // Releases the lock (the file stays: unlinking it could split two later holders).
  ~FileHolder();
  FileHolder(const FileHolder&) = delete;
  FileHolder& operator=(const FileHolder&) = delete;

  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
};

}  // namespace nlockd::store
