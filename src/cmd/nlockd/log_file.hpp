// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdio>
#include <mutex>
#include <string>

#include <spdlog/sinks/base_sink.h>

namespace nlockd::cmd {

// A log sink appending to a file (log_file / --log-file) that Reopen() opens again by its
// name: logrotate renames the file and sends SIGUSR1, and the lines after it go to a new file
// of the old name. Thread-safe (spdlog's sink mutex).
class ReopenableFileSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  // Throws Error (kFailed) when the file cannot be opened for appending.
  explicit ReopenableFileSink(std::string path);
  ~ReopenableFileSink() override;
  ReopenableFileSink(const ReopenableFileSink&) = delete;
  ReopenableFileSink& operator=(const ReopenableFileSink&) = delete;

  // Opens the file by its name again; on failure keeps writing to the one open, and throws
  // Error (kFailed).
  void Reopen();
  const std::string& path() const { return path_; }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override;
  void flush_() override;

 private:
  const std::string path_;
  std::FILE* file_ = nullptr;  // guarded by the sink's mutex
};

}  // namespace nlockd::cmd
