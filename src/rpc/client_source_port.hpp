// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <optional>
#include <random>

#include <asio/error.hpp>
#include <asio/ip/address.hpp>

// The source port of an outgoing call: any, one fixed port (firewalls), or a free privileged
// one (a peer that trusts only root's calls, as Linux lockd does for the status callback).
namespace nlockd::rpc {

struct SourcePort {
  enum class Kind { kAny, kFixed, kReserved };
  Kind kind = Kind::kAny;
  uint16_t port = 0;  // kFixed only.

  static SourcePort Any() { return {}; }
  static SourcePort Fixed(uint16_t port) { return {Kind::kFixed, port}; }
  static SourcePort Reserved() { return {Kind::kReserved, 0}; }
};

// The ports a reserved-port bind tries, as bindresvport(3) does: 600..1023 first, then
// 512..599, each once, from a random start (so that concurrent callers rarely collide).
inline constexpr uint16_t kReservedFirst = 600;
inline constexpr uint16_t kReservedLow = 512;
inline constexpr uint16_t kReservedHigh = 1023;

// Binds an open, unbound socket of `protocol` to a free privileged port (of `address` when
// given, of every address otherwise). Returns the error of the failed bind when the process may
// not bind one (EACCES without root or CAP_NET_BIND_SERVICE), address_in_use when every port is
// taken.
template <typename Socket>
asio::error_code BindReservedPort(Socket& socket, typename Socket::protocol_type protocol,
                                  const std::optional<asio::ip::address>& address = std::nullopt) {
  constexpr int kHighCount = kReservedHigh - kReservedFirst + 1;
  constexpr int kLowCount = kReservedFirst - kReservedLow;
  thread_local std::minstd_rand engine{std::random_device{}()};
  const int start = static_cast<int>(engine() % kHighCount);
  asio::error_code ec;
  for (int i = 0; i < kHighCount + kLowCount; ++i) {
    const int port = i < kHighCount ? kReservedFirst + (start + i) % kHighCount
                                    : kReservedLow + (i - kHighCount);
    const auto chosen = static_cast<uint16_t>(port);
    socket.bind(address ? typename Socket::endpoint_type(*address, chosen)
                        : typename Socket::endpoint_type(protocol, chosen),
                ec);
    if (!ec) return ec;
    if (ec != asio::error::address_in_use) return ec;
  }
  return ec;
}

}  // namespace nlockd::rpc
