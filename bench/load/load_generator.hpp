// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <asio/ip/address.hpp>

// A closed-loop RPC load generator: C TCP connections, each with P lanes; a lane sends a call,
// waits for its reply, and sends the next, so each connection has P calls in flight.
namespace nlockd::bench {

struct CallSpec {
  uint32_t program = 0;
  uint32_t version = 0;
  uint32_t procedure = 0;
  std::vector<uint8_t> args;  // XDR-encoded arguments.
};

// What to call. Lanes call Next in order; `seq` counts the lane's calls from 0.
class Workload {
 public:
  virtual ~Workload() = default;
  virtual std::string name() const = 0;
  virtual CallSpec Next(size_t connection, size_t lane, uint64_t seq) = 0;
  // Checks a SUCCESS reply's result; false counts the call as an error.
  virtual bool Check(const CallSpec& /*call*/, std::span<const uint8_t> /*result*/) { return true; }
};

// Calls one procedure with fixed arguments (NULL when args are empty).
class FixedWorkload : public Workload {
 public:
  explicit FixedWorkload(CallSpec spec) : spec_(std::move(spec)) {}
  std::string name() const override;
  CallSpec Next(size_t, size_t, uint64_t) override { return spec_; }

 private:
  CallSpec spec_;
};

struct LoadOptions {
  asio::ip::address target;
  uint16_t port = 0;
  size_t connections = 1;
  size_t pipeline = 1;  // Lanes (calls in flight) per connection.
  std::chrono::milliseconds warmup{1000};
  std::chrono::milliseconds duration{5000};
  // Bind connection i to its own loopback source address (127.1.x.y), so that a server sees
  // each connection as a different client host.
  bool distinct_sources = false;
  // Stop once this many calls were sent in all (0: run for the duration). With a zero warm-up
  // and a long duration, this makes a fixed number of calls (a prefill).
  uint64_t max_calls = 0;
  // A call unanswered this long, or a connection not made in it, ends its connection and counts
  // as an error: a server that stops answering ends the run rather than hanging it.
  std::chrono::milliseconds call_timeout{10'000};
};

struct LoadResult {
  uint64_t calls = 0;     // Completed in the measured window.
  uint64_t errors = 0;    // Not SUCCESS, bad result, or a broken connection.
  uint64_t timeouts = 0;  // Connections ended by call_timeout (each also counted in errors).
  double seconds = 0;
  double calls_per_second = 0;
  double p50_us = 0, p90_us = 0, p99_us = 0, p999_us = 0, max_us = 0;
};

// Runs the load on the calling thread and returns what was measured.
LoadResult RunLoad(const LoadOptions& options, Workload& workload);

std::string FormatResult(const LoadOptions& options, const std::string& workload,
                         const LoadResult& result);
std::string ResultJson(const LoadOptions& options, const std::string& workload,
                       const LoadResult& result);

}  // namespace nlockd::bench
