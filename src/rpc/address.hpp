// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <string>

#include <asio/ip/address.hpp>

namespace nlockd::rpc {

// An IPv4-mapped IPv6 address (::ffff:a.b.c.d) as the IPv4 address it is, so that one host is
// one key everywhere: monitor keys, source-address checks, persistence. (A client seen over a
// dual-stack socket would otherwise match nothing it registered as IPv4.)
asio::ip::address NormalizeAddress(const asio::ip::address& address);

// The normalised address as text: "192.0.2.1" or "2001:db8::1".
std::string AddressToString(const asio::ip::address& address);

bool IsLoopback(const asio::ip::address& address);

}  // namespace nlockd::rpc
