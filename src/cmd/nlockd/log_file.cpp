// SPDX-License-Identifier: Apache-2.0
#include "cmd/nlockd/log_file.hpp"

#include <cerrno>
#include <cstring>

#include "base/error.hpp"

namespace nlockd::cmd {
namespace {

std::FILE* OpenForAppend(const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "ae");  // "e": close-on-exec
  if (file == nullptr) {
    throw Error(ErrorKind::kFailed, "log file " + path + ": " + std::strerror(errno));
  }
  return file;
}

}  // namespace

ReopenableFileSink::ReopenableFileSink(std::string path)
    : path_(std::move(path)), file_(OpenForAppend(path_)) {}

ReopenableFileSink::~ReopenableFileSink() {
  if (file_ != nullptr) std::fclose(file_);
}

void ReopenableFileSink::Reopen() {
  std::FILE* file = OpenForAppend(path_);
  std::lock_guard lock(mutex_);
  std::fclose(file_);
  file_ = file;
}

void ReopenableFileSink::sink_it_(const spdlog::details::log_msg& msg) {
  spdlog::memory_buf_t formatted;
  formatter_->format(msg, formatted);
  std::fwrite(formatted.data(), 1, formatted.size(), file_);
  // Each line reaches the file at once, as on standard error (tail -f, a crash).
  std::fflush(file_);
}

void ReopenableFileSink::flush_() { std::fflush(file_); }

}  // namespace nlockd::cmd
