// SPDX-License-Identifier: Apache-2.0
#include "rpc/udp_datagrams.hpp"

#include <cerrno>
#include <cstring>

#include <netinet/in.h>
#include <sys/socket.h>

namespace nlockd::rpc {

namespace {

std::error_code LastError() { return std::error_code(errno, std::system_category()); }

// Room for one IPv4 and one IPv6 packet-info message.
constexpr size_t kControlSpace = CMSG_SPACE(sizeof(in_pktinfo)) + CMSG_SPACE(sizeof(in6_pktinfo));

}  // namespace

void ReceiveDestinations(asio::ip::udp::socket& socket, std::error_code& ec) {
  ec.clear();
  const int fd = socket.native_handle();
  const int on = 1;
  if (::setsockopt(fd, IPPROTO_IP, IP_PKTINFO, &on, sizeof on) != 0) {
    ec = LastError();
    return;
  }
  if (socket.local_endpoint().address().is_v6() &&
      ::setsockopt(fd, IPPROTO_IPV6, IPV6_RECVPKTINFO, &on, sizeof on) != 0) {
    ec = LastError();
  }
}

ReceivedDatagram ReceiveDatagram(asio::ip::udp::socket& socket, std::span<uint8_t> buffer,
                                 std::error_code& ec) {
  ec.clear();
  ReceivedDatagram out;
  sockaddr_storage sender{};
  iovec iov{buffer.data(), buffer.size()};
  alignas(cmsghdr) unsigned char control[kControlSpace];
  msghdr message{};
  message.msg_name = &sender;
  message.msg_namelen = sizeof sender;
  message.msg_iov = &iov;
  message.msg_iovlen = 1;
  message.msg_control = control;
  message.msg_controllen = sizeof control;
  const ssize_t n = ::recvmsg(socket.native_handle(), &message, MSG_DONTWAIT);
  if (n < 0) {
    ec = (errno == EAGAIN || errno == EWOULDBLOCK) ? std::error_code(asio::error::would_block)
                                                   : LastError();
    return out;
  }
  out.size = static_cast<size_t>(n);
  std::memcpy(out.sender.data(), &sender, std::min<size_t>(message.msg_namelen, sizeof sender));
  out.sender.resize(message.msg_namelen);
  for (cmsghdr* c = CMSG_FIRSTHDR(&message); c != nullptr; c = CMSG_NXTHDR(&message, c)) {
    if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO) {
      in_pktinfo info;
      std::memcpy(&info, CMSG_DATA(c), sizeof info);
      asio::ip::address_v4::bytes_type bytes;
      std::memcpy(bytes.data(), &info.ipi_addr, bytes.size());
      out.destination = asio::ip::address_v4(bytes);
    } else if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_PKTINFO) {
      in6_pktinfo info;
      std::memcpy(&info, CMSG_DATA(c), sizeof info);
      asio::ip::address_v6::bytes_type bytes;
      std::memcpy(bytes.data(), &info.ipi6_addr, bytes.size());
      asio::ip::address_v6 address(bytes);
      if (address.is_link_local()) address.scope_id(static_cast<unsigned>(info.ipi6_ifindex));
      out.destination = address;
    }
  }
  // A call to a broadcast or multicast address is answered from the host's own address.
  if (out.destination && out.destination->is_multicast()) out.destination.reset();
  if (out.destination && out.destination->is_v4() &&
      out.destination->to_v4() == asio::ip::address_v4::broadcast()) {
    out.destination.reset();
  }
  return out;
}

size_t SendDatagram(asio::ip::udp::socket& socket, std::span<const uint8_t> data,
                    const asio::ip::udp::endpoint& to, const std::optional<asio::ip::address>& from,
                    std::error_code& ec) {
  ec.clear();
  iovec iov{const_cast<uint8_t*>(data.data()), data.size()};
  alignas(cmsghdr) unsigned char control[kControlSpace] = {};
  msghdr message{};
  message.msg_name = const_cast<sockaddr*>(to.data());
  message.msg_namelen = static_cast<socklen_t>(to.size());
  message.msg_iov = &iov;
  message.msg_iovlen = 1;
  if (from) {
    message.msg_control = control;
    cmsghdr* c = nullptr;
    if (from->is_v4()) {
      // Also on a dual-stack IPv6 socket answering an IPv4 caller.
      message.msg_controllen = CMSG_SPACE(sizeof(in_pktinfo));
      c = CMSG_FIRSTHDR(&message);
      c->cmsg_level = IPPROTO_IP;
      c->cmsg_type = IP_PKTINFO;
      c->cmsg_len = CMSG_LEN(sizeof(in_pktinfo));
      in_pktinfo info{};
      const auto bytes = from->to_v4().to_bytes();
      std::memcpy(&info.ipi_spec_dst, bytes.data(), bytes.size());
      std::memcpy(CMSG_DATA(c), &info, sizeof info);
    } else {
      message.msg_controllen = CMSG_SPACE(sizeof(in6_pktinfo));
      c = CMSG_FIRSTHDR(&message);
      c->cmsg_level = IPPROTO_IPV6;
      c->cmsg_type = IPV6_PKTINFO;
      c->cmsg_len = CMSG_LEN(sizeof(in6_pktinfo));
      in6_pktinfo info{};
      const auto v6 = from->to_v6();
      const auto bytes = v6.to_bytes();
      std::memcpy(&info.ipi6_addr, bytes.data(), bytes.size());
      info.ipi6_ifindex = v6.scope_id();
      std::memcpy(CMSG_DATA(c), &info, sizeof info);
    }
  }
  const ssize_t n = ::sendmsg(socket.native_handle(), &message, MSG_DONTWAIT | MSG_NOSIGNAL);
  if (n < 0) {
    ec = (errno == EAGAIN || errno == EWOULDBLOCK) ? std::error_code(asio::error::would_block)
                                                   : LastError();
    return 0;
  }
  return static_cast<size_t>(n);
}

}  // namespace nlockd::rpc
