// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <utility>

#include <spdlog/spdlog.h>

#include "base/clock.hpp"

namespace nlockd {

// How often one call site may write: a bucket of `burst` lines, refilled at `per_second`.
struct LogRate {
  double per_second = 1.0;
  uint32_t burst = 10;
};

// Rate-limits one log call site that the network can trigger at will (an SM_NOTIFY for a host
// nobody monitors, a failed admin login), so that a flood of such requests cannot fill the disk
// or bury the lines that matter. Past the bucket, lines are counted, not written; the next line
// written is preceded by one "N similar lines suppressed" summary. Thread-safe; `clock` (null:
// the steady clock) must outlive the limiter.
class LogLimiter {
 public:
  // `what` names the call site in the summary ("nsm SM_NOTIFY ignored").
  explicit LogLimiter(std::string what, LogRate rate = {}, const Clock* clock = nullptr);
  LogLimiter(const LogLimiter&) = delete;
  LogLimiter& operator=(const LogLimiter&) = delete;

  // Writes the line through spdlog's default logger unless the bucket is empty.
  template <typename... Args>
  void Log(spdlog::level::level_enum level, spdlog::format_string_t<Args...> format,
           Args&&... args) {
    // A level that is not written costs no token.
    if (!spdlog::should_log(level)) return;
    uint64_t suppressed = 0;
    if (!Admit(suppressed)) return;
    if (suppressed != 0) spdlog::log(level, "{}: {} similar lines suppressed", what_, suppressed);
    spdlog::log(level, format, std::forward<Args>(args)...);
  }

  // Takes a token; false (and the line counted as suppressed) when there is none. On true,
  // `suppressed_before` is how many lines were suppressed since the last one admitted.
  bool Admit(uint64_t& suppressed_before);

  const std::string& what() const { return what_; }

 private:
  std::string what_;
  LogRate rate_;
  SteadyClock steady_;
  const Clock& clock_;
  std::mutex mutex_;
  double tokens_;               // guarded by mutex_
  Clock::time_point refilled_;  // guarded by mutex_
  uint64_t suppressed_ = 0;     // guarded by mutex_
};

}  // namespace nlockd
