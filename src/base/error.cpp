#include "base/error.hpp"

#include <fmt/format.h>

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
  throw Error(ErrorKind::kFailed,
              fmt::format("{} failed at {}:{}: {}{}{}", macro, file, line, condition,
                          message.empty() ? "" : ": ", message));
}

}  // namespace nlockd
