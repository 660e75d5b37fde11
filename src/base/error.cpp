// SPDX-License-Identifier: Apache-2.0
#include "base/error.hpp"

#include <cstdlib>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace nlockd {

std::string_view ToString(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kFailed:
      return "failed";
    case ErrorKind::kOverloaded:
      return "overloaded";
    case ErrorKind::kDisconnected:
      return "disconnected";
    case ErrorKind::kUnimplemented:
      return "unimplemented";
  }
  return "unknown";
}

void FailCheck(const char* macro, const char* condition, const char* file, int line,
               std::string_view message) {
  throw Error(ErrorKind::kFailed, fmt::format("{} failed at {}:{}: {}{}{}", macro, file, line,
                                              condition, message.empty() ? "" : ": ", message));
}

void FailInvariant(const char* condition, const char* file, int line,
                   std::string_view message) noexcept {
  try {
    spdlog::critical("NLOCKD_ASSERT failed at {}:{}: {}{}{}; aborting", file, line, condition,
                     message.empty() ? "" : ": ", message);
    spdlog::shutdown();  // Flushes every logger, so that the reason reaches the log.
  } catch (...) {
    // Logging failed too; abort all the same.
  }
  std::abort();
}

}  // namespace nlockd
