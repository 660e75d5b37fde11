// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace nlockd {

// What the catcher of an infrastructure fault can do about it (docs/architecture.md, "Errors").
// Protocol outcomes and untrusted input never throw; only faults of the machinery do.
enum class ErrorKind {
  kFailed,         // A bug or a permanent fault: log it and give up on this unit of work.
  kOverloaded,     // Out of a resource (a limit, memory, a pool): retry later.
  kDisconnected,   // A peer or the store went away: reconnect, then retry.
  kUnimplemented,  // Asked for something this build does not do.
};

std::string_view ToString(ErrorKind kind);

// The one exception type nlockd throws.
class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

// Throws Error(kFailed) naming the check, the condition, where, and `message`.
[[noreturn]] void FailCheck(const char* macro, const char* condition, const char* file, int line,
                            std::string_view message);
// Logs the same as critical, flushes the logs, and aborts: never returns, never throws.
[[noreturn]] void FailInvariant(const char* condition, const char* file, int line,
                                std::string_view message) noexcept;

}  // namespace nlockd

// Our own invariant: a failure is a bug in nlockd, and the state it guards (the lock table, a
// coroutine's lifetime) can no longer be trusted, so the process aborts rather than serve from
// it; a supervisor restarts it, and the restart recovers from the store. Never reachable from
// input: check input where it enters and answer it.
#define NLOCKD_ASSERT(cond, ...)                                          \
  do {                                                                    \
    if (!(cond)) [[unlikely]]                                             \
      ::nlockd::FailInvariant(#cond, __FILE__, __LINE__, "" __VA_ARGS__); \
  } while (false)

// A caller's contract (a REQUIRES: line): a failure is a bug in the caller, found before it
// changed anything. It throws Error(kFailed); the caller's unit of work fails (the RPC
// dispatcher answers that one call SYSTEM_ERR) and the process goes on.
#define NLOCKD_REQUIRE(cond, ...)                                                       \
  do {                                                                                  \
    if (!(cond)) [[unlikely]]                                                           \
      ::nlockd::FailCheck("NLOCKD_REQUIRE", #cond, __FILE__, __LINE__, "" __VA_ARGS__); \
  } while (false)
