// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include <asio/ip/address.hpp>

#include "rpc/message.hpp"

namespace nlockd::rpc {

enum class Transport { kTcp, kUdp };

inline const char* ToString(Transport transport) {
  return transport == Transport::kTcp ? "tcp" : "udp";
}

// Everything a procedure handler may know about the call besides its arguments.
struct CallContext {
  Transport transport = Transport::kTcp;
  asio::ip::address peer_address;  // Normalised (rpc/address.hpp).
  std::string peer;                // peer_address as text, made once per connection.
  uint16_t peer_port = 0;
  asio::ip::address local_address;
  uint16_t local_port = 0;
  uint32_t xid = 0;
  uint32_t program = 0;
  uint32_t version = 0;
  uint32_t procedure = 0;
  std::optional<AuthSys> auth_sys;  // Present for AUTH_SYS calls.
  // The programs the listener that took the call serves; empty: every program of the
  // dispatcher. A call to another one is answered PROG_UNAVAIL (a port of its own per program,
  // as rpc.statd has). Names storage of the listener, which outlives its calls.
  std::span<const uint32_t> listener_programs;
  // The protocol status of the reply ("granted", "stat_fail", ...), for the dispatcher's
  // observer (metrics). Handlers see the context as const, so it is mutable: the one field a
  // handler writes. Empty: the RPC outcome stands for it. Must name a string with static
  // storage (a fixed set of names: each is a metrics label value).
  mutable std::string_view result;
};

}  // namespace nlockd::rpc
