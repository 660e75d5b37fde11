// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <asio/any_io_executor.hpp>
#include <asio/awaitable.hpp>
#include <asio/ip/address.hpp>

#include "rpc/call_context.hpp"
#include "rpc/client_source_port.hpp"
#include "rpc/message.hpp"

namespace nlockd::rpc {

// Where a call goes. `host` is an IP literal or a name; names are resolved asynchronously
// within the call's deadline, never blocking the executor.
struct CallTarget {
  std::string host;
  uint16_t port = 0;
  Transport transport = Transport::kUdp;
};

struct CallOptions {
  // Total deadline: resolve, connect, send and reply, so that a dead peer stalls only its call.
  std::chrono::milliseconds deadline{5000};
  // UDP only: the first retransmission interval; it doubles after each try.
  std::chrono::milliseconds udp_retry{500};
  std::optional<AuthSys> auth;  // AUTH_NONE when absent.
  // Replies larger than this are refused (TCP), so a hostile server cannot make us buffer much.
  size_t max_reply_size = 1 << 20;
  // The call's source port. A fixed port is bound with SO_REUSEADDR, so that calls to
  // different peers may share it. When the bind fails the call goes out from any port, and the
  // Client says so in the log (once per kind of source port).
  SourcePort source;
  // The call's source address: the local address the peer reached us at, so that it knows
  // the call for ours (Linux lockd takes a GRANTED only from the address it sent its LOCK to,
  // which on an HA node is the service address, not the host's own). Used when it is of the
  // peer's family; when it cannot be bound (the address is gone) the call goes from the
  // address the kernel picks.
  std::optional<asio::ip::address> source_address;
};

enum class CallStatus {
  kOk,           // SUCCESS; the result is in `body`.
  kTimedOut,     // No reply within the deadline, or the calling task was cancelled first.
  kUnreachable,  // Name did not resolve, connection refused or reset.
  kRejected,     // MSG_DENIED (RPC_MISMATCH or AUTH_ERROR).
  kNotSuccess,   // MSG_ACCEPTED with PROG_UNAVAIL, PROG_MISMATCH, PROC_UNAVAIL, ...
  kBadReply,     // A reply that did not decode.
};

std::string_view ToString(CallStatus status);

struct CallResult {
  CallStatus status = CallStatus::kBadReply;
  AcceptStat accept_stat = AcceptStat::kSuccess;
  std::vector<uint8_t> body;  // The result bytes when kOk.
  std::string detail;         // Human-readable cause when not kOk.
};

// Makes ONC RPC calls as coroutines. Each call opens its own socket (callbacks and
// notifications are rare and go to many hosts, so there is nothing to pool), bound to the
// source port the call asks for. Runs on the executor given; every call ends by its deadline,
// or at once when the calling coroutine is cancelled (kTimedOut, its detail saying so).
class Client {
 public:
  explicit Client(asio::any_io_executor executor);

  const asio::any_io_executor& executor() const { return executor_; }

  asio::awaitable<CallResult> Call(CallTarget target, uint32_t program, uint32_t version,
                                   uint32_t procedure, std::vector<uint8_t> args,
                                   CallOptions options = {});

 private:
  asio::awaitable<CallResult> ResolveAndCall(CallTarget target, uint32_t xid,
                                             std::vector<uint8_t> request, CallOptions options);
  asio::awaitable<CallResult> CallUdp(asio::ip::address address, uint16_t port, uint32_t xid,
                                      std::vector<uint8_t> request, CallOptions options);
  asio::awaitable<CallResult> CallTcp(asio::ip::address address, uint16_t port, uint32_t xid,
                                      std::vector<uint8_t> request, CallOptions options);
  asio::awaitable<std::optional<asio::ip::address>> Resolve(std::string host);
  uint32_t NextXid() { return next_xid_++; }
  // Binds an open socket as `source` and `address` ask; logs (once per kind) when it cannot.
  template <typename Socket>
  void BindSource(Socket& socket, typename Socket::protocol_type protocol, SourcePort source,
                  const std::optional<asio::ip::address>& address);

  asio::any_io_executor executor_;
  uint32_t next_xid_;
  bool reserved_warned_ = false;
  bool fixed_warned_ = false;
};

// Turns a reply message into a CallResult.
CallResult InterpretReply(std::span<const uint8_t> reply);

}  // namespace nlockd::rpc
