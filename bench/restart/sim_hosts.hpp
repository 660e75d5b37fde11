// SPDX-License-Identifier: Apache-2.0
#pragma once

// The client hosts of the restart benchmark, all in this process: host i is the loopback
// address 127.<10 + i / 62500>.<1 + (i / 250) % 250>.<1 + i % 250>. Each host sends its NLM calls
// from a UDP socket bound to its own address (nlockd keys hosts by source address), and one UDP
// socket on every address plays each host's status monitor (nlockd is started with
// --notify-statd-port), answering SM_NOTIFY from the address it was sent to.
//
// REQUIRES: a private network namespace with lo up (bench/restart/run_restart.sh makes one),
// so that the fixed ports are free and nothing else sees the traffic.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <netinet/in.h>

namespace nlockd::bench {

using Clock = std::chrono::steady_clock;

sockaddr_in Ipv4(const std::string& address, uint16_t port);
std::string HostAddress(size_t host);

// NLM version 4 LOCK calls of one client host over UDP, several in flight, retransmitted when a
// reply is late (UDP may drop under a burst).
class NlmHost {
 public:
  NlmHost(const std::string& address, sockaddr_in server);
  ~NlmHost();
  NlmHost(const NlmHost&) = delete;
  NlmHost& operator=(const NlmHost&) = delete;

  struct Lock {
    std::string fh;
    uint64_t offset = 0;
    uint64_t length = 0;
  };
  // Sends LOCK for every lock (exclusive, not blocking, one owner of this host) and waits for
  // every reply; the nlm4_stats of each (-1 when no reply came before `timeout`).
  std::vector<int32_t> LockAll(const std::vector<Lock>& locks, bool reclaim, int32_t state,
                               std::chrono::milliseconds timeout);
  // One UNLOCK; true when it answered GRANTED.
  bool Unlock(const Lock& lock, std::chrono::milliseconds timeout);
  // One LOCK call that waits at most `wait` for its reply, sent again with the same xid every
  // `resend` as a client retransmits (the server's duplicate request cache answers the
  // repeats): its stat, or nullopt.
  std::optional<int32_t> TryLock(const Lock& lock, std::chrono::milliseconds wait,
                                 std::chrono::milliseconds resend);

 private:
  std::vector<uint8_t> Call(uint32_t xid, uint32_t procedure, const Lock& lock, bool reclaim,
                            int32_t state) const;
  std::optional<std::pair<uint32_t, int32_t>> Receive(int wait_ms);

  int fd_ = -1;
  sockaddr_in server_{};
  std::string caller_;
  uint32_t next_xid_;
};

// The `locks` locks host `host` takes in the benches: one 4 KiB range on each of its own files.
std::vector<NlmHost::Lock> LocksOf(size_t host, size_t locks);

// Asks for a lock on `fh` (offset 0, length 1) from `prober` until it is granted, as a client
// would: each call retransmitted with its xid every 10 ms and waited for up to a second (a
// server busy with reclaims answers late, not never), a new call at once after a refusal
// (grace) or a second without an answer. The time the grant arrived; throws after `give_up`.
Clock::time_point FirstGrant(NlmHost& prober, const std::string& fh, Clock::time_point give_up);

// Every host's status monitor. `on_notify(host, state)` runs on the monitor's thread for each
// SM_NOTIFY to a known host (after the reply went out).
class StatusMonitors {
 public:
  using OnNotify = std::function<void(size_t host, int32_t state)>;
  StatusMonitors(uint16_t port, size_t hosts, OnNotify on_notify);
  ~StatusMonitors();
  StatusMonitors(const StatusMonitors&) = delete;
  StatusMonitors& operator=(const StatusMonitors&) = delete;

  // SM_NOTIFY datagrams received, and the time the last one arrived.
  uint64_t notifications() const { return notifications_; }
  Clock::time_point last_notification() const;

 private:
  void Run();
  void Serve();

  int fd_ = -1;
  std::unordered_map<uint32_t, size_t> host_of_;  // s_addr -> host
  OnNotify on_notify_;
  std::atomic<bool> stop_ = false;
  std::atomic<uint64_t> notifications_ = 0;
  std::atomic<int64_t> last_ns_ = 0;
  std::thread thread_;
};

// A queue of host numbers served by worker threads.
class HostQueue {
 public:
  void Push(size_t host);
  // The next host, or nullopt once Close() was called and the queue is empty.
  std::optional<size_t> Pop();
  void Close();

 private:
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<size_t> hosts_;
  bool closed_ = false;
};

// The simulated hosts taking their `locks` locks each (LocksOf), or reclaiming them, on `threads`
// worker threads fed by a queue: first locks until Reclaim() gives the state an SM_NOTIFY
// carried, reclaims with that state after. Counts the replies, GRANTED or not. `hosts` must
// outlive it; the destructor stops the workers once the queue is empty.
class LockWorkers {
 public:
  LockWorkers(const std::vector<std::unique_ptr<NlmHost>>& hosts, size_t locks, size_t threads);
  ~LockWorkers() { Close(); }
  LockWorkers(const LockWorkers&) = delete;
  LockWorkers& operator=(const LockWorkers&) = delete;

  // Every host takes its locks.
  void LockAll();
  // `host` reclaims its locks with `state` (call from a status monitor's SM_NOTIFY).
  void Reclaim(size_t host, int32_t state);
  // Waits until every host's every lock was answered, or `until` passed; whether they were.
  bool WaitAllAnswered(std::optional<Clock::time_point> until = std::nullopt) const;
  // Zeroes the counts and the last answer's time (before the reclaims).
  void ResetCounts();
  size_t granted() const { return granted_; }
  size_t failed() const { return failed_; }
  // When the last host's locks were all answered; nullopt if none since ResetCounts().
  std::optional<Clock::time_point> last_answered() const;
  // Stops the workers once the queue is empty (idempotent).
  void Close();

 private:
  const std::vector<std::unique_ptr<NlmHost>>& hosts_;
  const size_t locks_;
  HostQueue queue_;
  std::atomic<size_t> granted_ = 0;
  std::atomic<size_t> failed_ = 0;
  std::atomic<int64_t> last_answered_ns_ = 0;
  std::atomic<int32_t> reclaim_state_ = 0;  // 0: first locks
  std::vector<std::thread> threads_;
};

}  // namespace nlockd::bench
