// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include <asio/any_io_executor.hpp>
#include <asio/awaitable.hpp>
#include <asio/ip/udp.hpp>
#include <asio/steady_timer.hpp>

#include "rpc/client.hpp"
#include "rpc/task_gate.hpp"

namespace nlockd::nsm {

// The notifier's UDP calls (rpcbind GETPORT and SM_NOTIFY) over one unconnected socket per
// address family, replies matched by xid, as sm-notify does: a round to thousands of hosts
// opens no socket per host, so it costs a few syscalls per host and no file descriptors.
// Runs on one single-threaded executor; its receive loops hold passes of `gate`.
// REQUIRES: Close() before destruction, and the loops ended (the gate drained).
class NotifyChannel {
 public:
  // `source_port` non-zero: both sockets are bound to it (a firewall lets the replies in); when
  // that fails, the log says so and an ephemeral port serves.
  NotifyChannel(asio::any_io_executor executor, rpc::TaskGate& gate, uint16_t source_port = 0);
  NotifyChannel(const NotifyChannel&) = delete;
  NotifyChannel& operator=(const NotifyChannel&) = delete;

  // One call: sends, retransmits after `retry` (doubling) and gives up at `deadline`.
  // Ends kOk, kTimedOut, kUnreachable (no socket), kRejected, kNotSuccess or kBadReply.
  asio::awaitable<rpc::CallResult> Call(asio::ip::udp::endpoint peer, uint32_t program,
                                        uint32_t version, uint32_t procedure,
                                        std::vector<uint8_t> args,
                                        std::chrono::milliseconds deadline,
                                        std::chrono::milliseconds retry);

  // Whether replies wait in a socket, unread: the executor is behind.
  bool RepliesQueued() const;

  // Calls waiting for their replies.
  size_t calls_waiting() const { return waiters_.size(); }

  // Closes the sockets; calls in flight end at their deadlines, the receive loops at once.
  void Close();

 private:
  struct Waiter {
    explicit Waiter(const asio::any_io_executor& executor) : wake(executor) {}
    asio::steady_timer wake;
    std::optional<std::vector<uint8_t>> reply;
  };

  asio::ip::udp::socket* SocketFor(const asio::ip::udp::endpoint& peer);
  asio::awaitable<void> ReceiveLoop(asio::ip::udp::socket* socket, rpc::TaskGate::Pass pass);
  void Deliver(std::span<const uint8_t> message);

  asio::any_io_executor executor_;
  rpc::TaskGate& gate_;
  std::optional<asio::ip::udp::socket> v4_;
  std::optional<asio::ip::udp::socket> v6_;
  std::unordered_map<uint32_t, Waiter*> waiters_;  // by xid; each Waiter lives in its Call
  uint32_t next_xid_;
  uint16_t source_port_;
  bool closed_ = false;
};

}  // namespace nlockd::nsm
