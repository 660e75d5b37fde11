#pragma once

#include <cstdint>
#include <optional>
#include <string>

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
};

}  // namespace nlockd::rpc
