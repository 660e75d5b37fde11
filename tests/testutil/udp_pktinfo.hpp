// SPDX-License-Identifier: Apache-2.0
#pragma once

// UDP over one IPv4 socket that plays many hosts at once (tests and benchmarks bind it to
// INADDR_ANY with IP_PKTINFO on): each datagram's local destination says which host it was
// for, and the answer leaves from that same address.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include <netinet/in.h>
#include <sys/socket.h>

namespace nlockd::testutil {

struct AddressedDatagram {
  size_t size = 0;        // bytes read into the buffer
  sockaddr_in from{};     // the sender
  in_addr destination{};  // the local address it was sent to
};

// One datagram, without blocking; nullopt when none is waiting.
inline std::optional<AddressedDatagram> ReceiveAddressed(int fd, std::span<uint8_t> buffer) {
  AddressedDatagram datagram;
  iovec iov{buffer.data(), buffer.size()};
  alignas(cmsghdr) char control[256];
  msghdr message{};
  message.msg_name = &datagram.from;
  message.msg_namelen = sizeof datagram.from;
  message.msg_iov = &iov;
  message.msg_iovlen = 1;
  message.msg_control = control;
  message.msg_controllen = sizeof control;
  const ssize_t n = ::recvmsg(fd, &message, MSG_DONTWAIT);
  if (n <= 0) return std::nullopt;
  datagram.size = static_cast<size_t>(n);
  for (cmsghdr* c = CMSG_FIRSTHDR(&message); c != nullptr; c = CMSG_NXTHDR(&message, c)) {
    if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO) {
      datagram.destination = reinterpret_cast<in_pktinfo*>(CMSG_DATA(c))->ipi_addr;
    }
  }
  return datagram;
}

// Sends `bytes` to `to` from the local address `source` (best effort, as UDP is).
inline void SendFrom(int fd, const sockaddr_in& to, in_addr source,
                     std::span<const uint8_t> bytes) {
  iovec out{const_cast<uint8_t*>(bytes.data()), bytes.size()};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(in_pktinfo))] = {};
  sockaddr_in destination = to;
  msghdr answer{};
  answer.msg_name = &destination;
  answer.msg_namelen = sizeof destination;
  answer.msg_iov = &out;
  answer.msg_iovlen = 1;
  answer.msg_control = control;
  answer.msg_controllen = sizeof control;
  cmsghdr* c = CMSG_FIRSTHDR(&answer);
  c->cmsg_level = IPPROTO_IP;
  c->cmsg_type = IP_PKTINFO;
  c->cmsg_len = CMSG_LEN(sizeof(in_pktinfo));
  reinterpret_cast<in_pktinfo*>(CMSG_DATA(c))->ipi_spec_dst = source;
  ::sendmsg(fd, &answer, 0);
}

}  // namespace nlockd::testutil
