// SPDX-License-Identifier: Apache-2.0
#pragma once

// The calls of one connection that are in flight: read, but their replies not yet written (or
// dropped). The connection stops reading at the limit and resumes when replies drain, so that a
// client pipelining calls without reading the replies costs the host at most `limit` calls and
// replies, not an unbounded queue (the daemon's rpc server stops at 128 per connection too).
// Counting only: no I/O, no locking (one thread runs the connection), tested on its own
// (call_window_test.cpp).
#include <cstddef>

namespace example {

class CallWindow {
 public:
  explicit CallWindow(size_t limit) : limit_(limit) {}

  // No more calls may be taken until some are answered.
  bool Full() const { return in_flight_ >= limit_; }
  // A call was handed on.
  void Opened() { ++in_flight_; }
  // `n` calls were answered. True if that made room in a full window: a reader waiting in
  // Full() must be woken. REQUIRES: n <= in_flight().
  bool Answered(size_t n) {
    const bool was_full = Full();
    in_flight_ -= n;
    return was_full && !Full();
  }
  size_t in_flight() const { return in_flight_; }
  size_t limit() const { return limit_; }

 private:
  size_t limit_;
  size_t in_flight_ = 0;
};

}  // namespace example
