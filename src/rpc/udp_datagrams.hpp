// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <system_error>

#include <asio/ip/address.hpp>
#include <asio/ip/udp.hpp>

// Datagrams with their destination address, so that a UDP server bound to a wildcard address
// answers from the address each call was sent to. Without it the kernel picks the reply's
// source by route: a call to an address added after start (an HA service address) would be
// answered from the host's primary address, and a client whose socket is connected to the
// service address (the Linux kernel's RPC client) drops such a reply.
namespace nlockd::rpc {

// Asks the kernel for each datagram's destination address (IP_PKTINFO; on an IPv6 socket also
// IPV6_RECVPKTINFO, IPv4 calls to a dual-stack socket report theirs through IP_PKTINFO).
void ReceiveDestinations(asio::ip::udp::socket& socket, std::error_code& ec);

struct ReceivedDatagram {
  size_t size = 0;
  asio::ip::udp::endpoint sender;
  // Where the datagram was sent; nullopt when the kernel did not say.
  std::optional<asio::ip::address> destination;
};

// One datagram already waiting (non-blocking): ec is would_block when there is none.
ReceivedDatagram ReceiveDatagram(asio::ip::udp::socket& socket, std::span<uint8_t> buffer,
                                 std::error_code& ec);

// Sends `data` to `to` from `from` (the destination of the call it answers), or from the
// address the kernel picks when `from` is nullopt. Non-blocking: ec is would_block when the
// socket buffer is full.
size_t SendDatagram(asio::ip::udp::socket& socket, std::span<const uint8_t> data,
                    const asio::ip::udp::endpoint& to, const std::optional<asio::ip::address>& from,
                    std::error_code& ec);

}  // namespace nlockd::rpc
