// SPDX-License-Identifier: Apache-2.0
#include "rpc/client.hpp"

#include <memory>
#include <tuple>

#include <asio/connect.hpp>
#include <asio/experimental/awaitable_operators.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/ip/udp.hpp>
#include <asio/read.hpp>
#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/write.hpp>
#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include "rpc/record_marking.hpp"
#include "rpc/use_tuple.hpp"
#include "xdr/encoder.hpp"

namespace nlockd::rpc {

namespace {
using namespace asio::experimental::awaitable_operators;

CallResult Failure(CallStatus status, std::string detail) {
  CallResult result;
  result.status = status;
  result.detail = std::move(detail);
  return result;
}

bool Cancelled(const asio::cancellation_state& state) {
  return state.cancelled() != asio::cancellation_type::none;
}

CallResult CancelledCall(const CallTarget& target) {
  return Failure(CallStatus::kTimedOut, "cancelled before a reply from " + target.host + ":" +
                                            std::to_string(target.port));
}
}  // namespace

std::string_view ToString(CallStatus status) {
  switch (status) {
    case CallStatus::kOk:
      return "ok";
    case CallStatus::kTimedOut:
      return "timed_out";
    case CallStatus::kUnreachable:
      return "unreachable";
    case CallStatus::kRejected:
      return "rejected";
    case CallStatus::kNotSuccess:
      return "not_success";
    case CallStatus::kBadReply:
      return "bad_reply";
  }
  return "unknown";
}

CallResult InterpretReply(std::span<const uint8_t> reply) {
  DecodedReply decoded = DecodeReply(reply);
  if (!decoded.ok) return Failure(CallStatus::kBadReply, "reply header does not decode");
  if (decoded.reply_stat == ReplyStat::kMsgDenied) {
    return Failure(CallStatus::kRejected,
                   decoded.reject_stat == RejectStat::kAuthError
                       ? "auth error " + std::to_string(static_cast<int>(decoded.auth_stat))
                       : "rpc version mismatch");
  }
  if (decoded.accept_stat != AcceptStat::kSuccess) {
    CallResult result =
        Failure(CallStatus::kNotSuccess,
                "accept_stat " + std::to_string(static_cast<int>(decoded.accept_stat)));
    result.accept_stat = decoded.accept_stat;
    return result;
  }
  CallResult result;
  result.status = CallStatus::kOk;
  result.body.assign(decoded.body.begin(), decoded.body.end());
  return result;
}

namespace {

// `address` as a source for a socket of `protocol`: itself, its IPv4-mapped form on an IPv6
// socket, or nothing (another family, or no address asked for).
template <typename Protocol>
std::optional<asio::ip::address> SourceAddressFor(const Protocol& protocol,
                                                  const std::optional<asio::ip::address>& address) {
  if (!address || address->is_unspecified()) return std::nullopt;
  const bool v6_socket = protocol.family() == AF_INET6;
  if (address->is_v4()) {
    if (!v6_socket) return address;
    return asio::ip::make_address_v6(asio::ip::v4_mapped, address->to_v4());
  }
  if (v6_socket) return address;
  if (address->to_v6().is_v4_mapped()) {
    return asio::ip::make_address_v4(asio::ip::v4_mapped, address->to_v6());
  }
  return std::nullopt;
}

}  // namespace

template <typename Socket>
void Client::BindSource(Socket& socket, typename Socket::protocol_type protocol, SourcePort source,
                        const std::optional<asio::ip::address>& address) {
  asio::error_code ec;
  const std::optional<asio::ip::address> local = SourceAddressFor(protocol, address);
  switch (source.kind) {
    case SourcePort::Kind::kAny:
      if (!local) return;
      socket.bind(typename Socket::endpoint_type(*local, 0), ec);
      if (ec) {
        spdlog::debug("rpc cannot call from {} ({}); calling from the address the kernel picks",
                      local->to_string(), ec.message());
      }
      return;
    case SourcePort::Kind::kReserved:
      ec = BindReservedPort(socket, protocol, local);
      if (ec == std::errc::address_not_available) ec = BindReservedPort(socket, protocol);
      if (ec && !reserved_warned_) {
        reserved_warned_ = true;
        spdlog::warn(
            "rpc cannot bind a privileged source port ({}): status callbacks go out from an "
            "unprivileged port, and Linux lockd drops them; run nlockd as root or with "
            "CAP_NET_BIND_SERVICE",
            ec.message());
      }
      return;
    case SourcePort::Kind::kFixed:
      socket.set_option(asio::socket_base::reuse_address(true), ec);
      socket.bind(local ? typename Socket::endpoint_type(*local, source.port)
                        : typename Socket::endpoint_type(protocol, source.port),
                  ec);
      if (ec == std::errc::address_not_available) {
        socket.bind(typename Socket::endpoint_type(protocol, source.port), ec);
      }
      if (ec) {
        auto level = fixed_warned_ ? spdlog::level::debug : spdlog::level::warn;
        fixed_warned_ = true;
        spdlog::log(level, "rpc cannot bind source port {} ({}); calling from another port",
                    source.port, ec.message());
      }
      return;
  }
}

Client::Client(asio::any_io_executor executor)
    : executor_(std::move(executor)), next_xid_(std::random_device{}()) {}

asio::awaitable<std::optional<asio::ip::address>> Client::Resolve(std::string host) {
  asio::error_code ec;
  auto literal = asio::ip::make_address(host, ec);
  if (!ec) co_return literal;
  asio::ip::udp::resolver resolver(executor_);
  auto [resolve_ec, results] = co_await resolver.async_resolve(host, "", kUseTuple);
  if (resolve_ec || results.empty()) co_return std::nullopt;
  co_return results.begin()->endpoint().address();
}

asio::awaitable<CallResult> Client::Call(CallTarget target, uint32_t program, uint32_t version,
                                         uint32_t procedure, std::vector<uint8_t> args,
                                         CallOptions options) {
  uint32_t xid = NextXid();
  std::vector<uint8_t> request;
  request.reserve(args.size() + 64);
  size_t mark = 0;
  if (target.transport == Transport::kTcp) mark = BeginRecord(request);
  xdr::Encoder enc(request);
  EncodeCallHeader(enc, xid, program, version, procedure, options.auth);
  request.insert(request.end(), args.begin(), args.end());
  if (target.transport == Transport::kTcp) FinishRecord(request, mark);

  // A cancel of the calling task reaches the call's waits (each branch of || is spawned with
  // the group's cancellation slot) and ends them with operation_aborted; the result then says
  // so instead of naming the aborted wait. A task cancelled before it calls sends nothing.
  const asio::cancellation_state cancellation = co_await asio::this_coro::cancellation_state;
  if (Cancelled(cancellation)) co_return CancelledCall(target);
  // One timer bounds everything, name resolution included.
  asio::steady_timer deadline(executor_, options.deadline);
  // Named first: g++ 12 double-destroys temporaries in a co_await operand (PR 101367 family).
  auto call = ResolveAndCall(target, xid, std::move(request), options);
  auto timeout = deadline.async_wait(kUseTuple);
  auto outcome = co_await (std::move(call) || std::move(timeout));
  const bool answered = outcome.index() == 0 && std::get<0>(outcome).status == CallStatus::kOk;
  if (!answered && Cancelled(cancellation)) {
    co_return CancelledCall(target);
  }
  if (outcome.index() == 1) {
    co_return Failure(CallStatus::kTimedOut, "no reply from " + target.host + ":" +
                                                 std::to_string(target.port) + " within " +
                                                 std::to_string(options.deadline.count()) + " ms");
  }
  co_return std::get<0>(std::move(outcome));
}

asio::awaitable<CallResult> Client::ResolveAndCall(CallTarget target, uint32_t xid,
                                                   std::vector<uint8_t> request,
                                                   CallOptions options) {
  auto address = co_await Resolve(target.host);
  if (!address) co_return Failure(CallStatus::kUnreachable, "cannot resolve " + target.host);
  if (target.transport == Transport::kTcp) {
    co_return co_await CallTcp(*address, target.port, xid, std::move(request), options);
  }
  co_return co_await CallUdp(*address, target.port, xid, std::move(request), options);
}

asio::awaitable<CallResult> Client::CallUdp(asio::ip::address address, uint16_t port, uint32_t xid,
                                            std::vector<uint8_t> request, CallOptions options) {
  asio::ip::udp::endpoint peer(address, port);
  asio::ip::udp::socket socket(executor_, peer.protocol());
  BindSource(socket, peer.protocol(), options.source, options.source_address);
  // Connecting the socket makes the kernel report ICMP port-unreachable as ECONNREFUSED.
  asio::error_code ec;
  socket.connect(peer, ec);
  if (ec) co_return Failure(CallStatus::kUnreachable, ec.message());
  // Room for any datagram, not zeroed: only the bytes that arrived are read.
  constexpr size_t kMaxDatagram = size_t{64} * 1024;
  const auto reply = std::make_unique_for_overwrite<uint8_t[]>(kMaxDatagram);
  auto interval = options.udp_retry;
  asio::steady_timer retry(executor_);
  for (;;) {
    auto [send_ec, sent] = co_await socket.async_send(asio::buffer(request), kUseTuple);
    if (send_ec) co_return Failure(CallStatus::kUnreachable, send_ec.message());
    retry.expires_after(interval);
    bool retransmit = false;
    while (!retransmit) {
      auto result =
          co_await (socket.async_receive(asio::buffer(reply.get(), kMaxDatagram), kUseTuple) ||
                    retry.async_wait(kUseTuple));
      if (result.index() == 1) {
        retransmit = true;
        break;
      }
      auto [recv_ec, n] = std::get<0>(result);
      if (recv_ec == asio::error::connection_refused) {
        co_return Failure(CallStatus::kUnreachable, "port unreachable");
      }
      if (recv_ec) co_return Failure(CallStatus::kUnreachable, recv_ec.message());
      std::span<const uint8_t> message(reply.get(), n);
      DecodedReply header = DecodeReply(message);
      if (!header.ok || header.xid != xid) continue;  // Someone else's, or a stale reply.
      co_return InterpretReply(message);
    }
    interval *= 2;
  }
}

asio::awaitable<CallResult> Client::CallTcp(asio::ip::address address, uint16_t port, uint32_t xid,
                                            std::vector<uint8_t> request, CallOptions options) {
  asio::ip::tcp::endpoint peer(address, port);
  asio::ip::tcp::socket socket(executor_);
  asio::error_code open_ec;
  socket.open(peer.protocol(), open_ec);
  if (open_ec) co_return Failure(CallStatus::kUnreachable, open_ec.message());
  BindSource(socket, peer.protocol(), options.source, options.source_address);
  auto [connect_ec] = co_await socket.async_connect(peer, kUseTuple);
  if (connect_ec == std::errc::address_not_available &&
      options.source.kind == SourcePort::Kind::kFixed) {
    // The fixed port's last connection to this peer lingers (TIME_WAIT): any port then.
    asio::error_code ignored;
    socket.close(ignored);
    socket.open(peer.protocol(), ignored);
    std::tie(connect_ec) = co_await socket.async_connect(peer, kUseTuple);
  }
  if (connect_ec) co_return Failure(CallStatus::kUnreachable, connect_ec.message());
  auto [write_ec, written] = co_await asio::async_write(socket, asio::buffer(request), kUseTuple);
  if (write_ec) co_return Failure(CallStatus::kUnreachable, write_ec.message());
  RecordAssembler assembler(options.max_reply_size);
  std::vector<std::vector<uint8_t>> records;
  std::vector<uint8_t> buffer(16 * 1024);
  for (;;) {
    auto [read_ec, n] = co_await socket.async_read_some(asio::buffer(buffer), kUseTuple);
    if (read_ec) co_return Failure(CallStatus::kUnreachable, read_ec.message());
    if (assembler.Feed(std::span(buffer.data(), n), records) != RecordAssembler::Status::kOk) {
      co_return Failure(CallStatus::kBadReply, "reply larger than the limit or too fragmented");
    }
    for (const auto& record : records) {
      DecodedReply header = DecodeReply(record);
      if (header.ok && header.xid == xid) co_return InterpretReply(record);
    }
    records.clear();
  }
}

}  // namespace nlockd::rpc
