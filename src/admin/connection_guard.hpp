// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>

namespace nlockd::admin {

struct ConnectionLimits {
  // Connections open at once, each on a thread of its own, so that a client opening
  // connections without end can use up neither threads nor the descriptors NLM and NSM need
  // (AdminServer lowers it further under a small RLIMIT_NOFILE).
  size_t max_connections = 32;
  // From the connection's start to the end of its request's body: a client that sends its
  // request a byte at a time (slowloris) holds its thread this long at most.
  std::chrono::milliseconds request_timeout{10'000};
  // For writing the answer: a client that does not read it holds its thread this long at most.
  std::chrono::milliseconds response_timeout{10'000};
  // A connection's thread that has had no connection to serve for this long ends (the next
  // connection starts one again), so that a burst leaves no idle threads behind it.
  std::chrono::milliseconds idle_thread_linger{60'000};
};

// Which admin connections are open and which of them are still reading their request. When
// every slot is taken, the connection that has been reading its request the longest is shut
// down (shutdown(2): its HTTP thread then sees the peer gone) to make room, so that slow
// clients cannot lock out a health check; connections whose handler runs are never evicted.
// Thread-safe.
class ConnectionGuard {
 public:
  explicit ConnectionGuard(size_t max_connections) : max_connections_(max_connections) {}
  ConnectionGuard(const ConnectionGuard&) = delete;
  ConnectionGuard& operator=(const ConnectionGuard&) = delete;

  // A slot for the connection on socket `fd`, made by evicting the oldest reader if needed;
  // nullopt when every slot is taken by a connection past its request. The guard only ever
  // shuts `fd` down, never closes it. REQUIRES: `fd` stays open until Leave.
  std::optional<uint64_t> Admit(int fd);
  // Whether a connection arriving now, behind `waiting` others not yet admitted, will find a
  // slot: free ones, ones being vacated, or readers evicted for it now (the oldest first).
  bool MakeRoom(size_t waiting);
  // The request has been read: the connection is no longer evictable.
  void RequestRead(uint64_t id);
  void Leave(uint64_t id);
  // Shuts down every connection still reading its request (the server is stopping).
  void ShutDownReaders();

  size_t open() const;
  uint64_t evicted() const;

 private:
  struct Connection {
    int fd = -1;
    uint64_t order = 0;  // admission order: lower is older
    bool reading = true;
    bool shut_down = false;
  };

  // REQUIRES: mutex_ held.
  bool EvictOldestReaderLocked();
  size_t LeavingLocked() const;

  const size_t max_connections_;
  mutable std::mutex mutex_;
  std::map<uint64_t, Connection> connections_;  // by id (= order); guarded by mutex_
  uint64_t next_id_ = 1;                        // guarded by mutex_
  uint64_t evicted_ = 0;                        // guarded by mutex_
};

}  // namespace nlockd::admin
