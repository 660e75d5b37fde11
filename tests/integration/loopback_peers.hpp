// SPDX-License-Identifier: Apache-2.0
#pragma once

// Many client hosts on one machine, for the recovery tests: host i is the loopback address
// 127.0.<1 + i / 250>.<1 + i % 250>. Linux routes all of 127.0.0.0/8 to lo, so a socket bound
// to one of these addresses is, to nlockd, a client host of its own (NLM keys hosts by source
// address). One UDP socket on every address plays each host's status monitor: nlockd is told
// the port with --notify-statd-port, so its SM_NOTIFY to host i arrives here with host i's
// address as destination (IP_PKTINFO) and is answered from that address. This costs no network
// namespace per host, so a test can have a hundred hosts and still start in milliseconds.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "integration/nlm_rpcgen.hpp"

namespace nlockd::integration {

class LoopbackPeers {
 public:
  // Binds the status monitors' socket and starts answering; throws when it cannot bind.
  LoopbackPeers();
  ~LoopbackPeers();
  LoopbackPeers(const LoopbackPeers&) = delete;
  LoopbackPeers& operator=(const LoopbackPeers&) = delete;

  static std::string Address(size_t host);
  // The UDP port every host's status monitor listens on (for --notify-statd-port).
  uint16_t statd_port() const { return port_; }

  struct Notification {
    std::string mon_name;
    int32_t state = 0;
  };
  // Makes the status monitor of `address` drop whatever reaches it, as a host that is down.
  void Silence(const std::string& address);
  // Waits until every address in `hosts` got an SM_NOTIFY with a state above `above`; returns
  // the last one each got, or nullopt at the deadline.
  std::optional<std::map<std::string, Notification>> WaitNotified(
      const std::vector<std::string>& hosts, int32_t above, std::chrono::milliseconds timeout);
  // How many SM_NOTIFY datagrams reached `address` (answered or not).
  size_t Attempts(const std::string& address);
  // Waits until `address` got at least `count` SM_NOTIFY datagrams.
  bool WaitAttempts(const std::string& address, size_t count, std::chrono::milliseconds timeout);

  // NLM version 4 over UDP from host `address` to nlockd at 127.0.0.1:`port`; the reply's
  // status, or nullopt when none came.
  static std::optional<NlmStat> Lock(const std::string& address, uint16_t port, const NlmLock& lock,
                                     NlmLockFlags flags);
  static std::optional<NlmStat> Unlock(const std::string& address, uint16_t port,
                                       const NlmLock& lock);

 private:
  void Run();
  void Serve();

  int fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_ = false;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::set<std::string> silent_;
  std::map<std::string, Notification> notified_;
  std::map<std::string, size_t> attempts_;
  std::thread thread_;  // Last: it starts once everything above exists.
};

// "stat=<name>" of an optional status, for comparing with a literal in EXPECT_EQ.
std::string StatOf(const std::optional<NlmStat>& stat);

}  // namespace nlockd::integration
