// SPDX-License-Identifier: Apache-2.0
#pragma once

// The client hosts of the HA fault tests: one thread per host, inside the host's network
// namespace, driving NLM version 4 over UDP at the service address with rpcgen's XDR routines,
// answering the SM_NOTIFY of a new active node by reclaiming, and recording every lock it held
// (from its grant's arrival to its unlock's first sending) for the checker.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace nlockd::integration::hafault {

using Clock = std::chrono::steady_clock;

// One lock as one client held it.
struct LockInterval {
  std::string owner;  // caller name and owner handle
  std::string file;
  bool exclusive = true;
  Clock::time_point start;  // its grant (or the grant it reclaimed) arrived
  Clock::time_point end;    // its unlock was first sent, it was lost, or the run ended
};

// Pairs of intervals on one file, of different owners, at least one exclusive, that overlap:
// a description of each.
std::vector<std::string> Conflicts(std::vector<LockInterval> intervals);

class FaultClient {
 public:
  // Client host `id` of `clients` in network namespace `netns` (its address `address`), the
  // service at `server`:`nlm_port`, its status monitor on UDP `statd_port`.
  FaultClient(int id, int clients, std::string netns, std::string address, std::string server,
              uint16_t nlm_port, uint16_t statd_port, std::string service, uint32_t seed);
  ~FaultClient();
  FaultClient(const FaultClient&) = delete;
  FaultClient& operator=(const FaultClient&) = delete;

  int id() const { return id_; }
  // Its own exclusive lock and the shared lock on the common file were granted.
  bool WaitAnchored(std::chrono::milliseconds timeout);
  // It was notified of a state above `above` and reclaimed what it held.
  bool WaitReclaimed(int32_t above, std::chrono::milliseconds timeout);
  int32_t last_state() const { return last_state_; }
  // When the last new (not reclaimed) lock was granted to it.
  Clock::time_point LastNewGrant() const {
    return Clock::time_point(Clock::duration(last_new_grant_.load()));
  }

  struct Result {
    std::vector<LockInterval> intervals;
    size_t grants = 0;
    size_t reclaims = 0;
    size_t lost = 0;             // reclaims not granted
    size_t not_held_at_end = 0;  // another owner's TEST found the lock free
    bool verified = false;       // the final TESTs were answered
    std::string lost_detail;
  };
  // Stops the load (idempotent), verifies the locks it holds, and returns what it saw.
  void Stop();
  const Result& result() const { return result_; }

 private:
  void Run();

  const int id_;
  const int clients_;
  const std::string netns_;
  const std::string address_;
  const std::string server_;
  const uint16_t nlm_port_;
  const uint16_t statd_port_;
  const std::string service_;
  const uint32_t seed_;

  std::atomic<bool> stop_ = false;
  std::atomic<int32_t> last_state_ = 0;
  std::atomic<Clock::rep> last_new_grant_ = 0;
  std::mutex mutex_;
  std::condition_variable changed_;
  bool anchored_ = false;
  bool failed_ = false;  // the thread could not start (namespace, sockets)
  Result result_;
  std::thread thread_;  // Last: it starts once everything above exists.
};

}  // namespace nlockd::integration::hafault
