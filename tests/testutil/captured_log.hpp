// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <memory>
#include <sstream>
#include <string>

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

namespace nlockd::testutil {

// Sends what the code under test logs (through spdlog's default logger) to a string while it
// lives, formatted by `pattern`; the previous logger comes back at destruction.
class CapturedLog {
 public:
  explicit CapturedLog(const std::string& pattern = "%v")
      : previous_(spdlog::default_logger()),
        logger_(std::make_shared<spdlog::logger>(
            "captured", std::make_shared<spdlog::sinks::ostream_sink_mt>(out_))) {
    logger_->set_pattern(pattern);
    spdlog::set_default_logger(logger_);
  }
  ~CapturedLog() { spdlog::set_default_logger(previous_); }
  CapturedLog(const CapturedLog&) = delete;
  CapturedLog& operator=(const CapturedLog&) = delete;

  // What was logged so far. Flushes first: the sink is synchronous, but spdlog may buffer.
  std::string text() {
    logger_->flush();
    return out_.str();
  }
  // How many times `needle` occurs in what was logged.
  size_t Count(const std::string& needle) {
    const std::string logged = text();
    size_t count = 0;
    for (size_t at = logged.find(needle); at != std::string::npos;
         at = logged.find(needle, at + 1)) {
      ++count;
    }
    return count;
  }

 private:
  std::ostringstream out_;
  std::shared_ptr<spdlog::logger> previous_;
  std::shared_ptr<spdlog::logger> logger_;
};

}  // namespace nlockd::testutil
