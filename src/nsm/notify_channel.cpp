// SPDX-License-Identifier: Apache-2.0
#include "nsm/notify_channel.hpp"

#include <algorithm>
#include <random>
#include <span>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/ip/v6_only.hpp>
#include <asio/this_coro.hpp>
#include <spdlog/spdlog.h>

#include "rpc/message.hpp"
#include "rpc/use_tuple.hpp"
#include "xdr/encoder.hpp"

namespace nlockd::nsm {

namespace {

rpc::CallResult Failure(rpc::CallStatus status, std::string detail) {
  rpc::CallResult result;
  result.status = status;
  result.detail = std::move(detail);
  return result;
}

// Replies are a few dozen bytes; a bigger buffer lets the burst of them at the start of a
// notification round wait in the kernel instead of being dropped.
constexpr int kReceiveBuffer = 4 << 20;

}  // namespace

NotifyChannel::NotifyChannel(asio::any_io_executor executor, rpc::TaskGate& gate,
                             uint16_t source_port)
    : executor_(std::move(executor)),
      gate_(gate),
      next_xid_(std::random_device{}()),
      source_port_(source_port) {}

asio::ip::udp::socket* NotifyChannel::SocketFor(const asio::ip::udp::endpoint& peer) {
  if (closed_) return nullptr;
  auto& slot = peer.address().is_v4() ? v4_ : v6_;
  if (slot) return &*slot;
  asio::ip::udp::socket socket(executor_);
  asio::error_code ec;
  socket.open(peer.protocol(), ec);
  bool bound = false;
  if (!ec && source_port_ != 0) {
    // The IPv6 socket takes IPv6 only, so that the IPv4 one can hold the same port.
    if (peer.address().is_v6()) socket.set_option(asio::ip::v6_only(true), ec);
    socket.bind(asio::ip::udp::endpoint(peer.protocol(), source_port_), ec);
    bound = !ec;
    if (ec) {
      spdlog::warn("nsm notifier: cannot bind UDP source port {} ({}); sending from another port",
                   source_port_, ec.message());
      ec.clear();
    }
  }
  if (!ec && !bound) socket.bind(asio::ip::udp::endpoint(peer.protocol(), 0), ec);
  if (ec) {
    spdlog::warn("nsm notifier: cannot open a UDP socket: {}", ec.message());
    return nullptr;
  }
  asio::error_code ignored;
  socket.set_option(asio::socket_base::receive_buffer_size(kReceiveBuffer), ignored);
  auto pass = gate_.TryEnter();
  if (!pass) return nullptr;
  slot.emplace(std::move(socket));
  asio::co_spawn(executor_, ReceiveLoop(&*slot, std::move(*pass)), asio::detached);
  return &*slot;
}

asio::awaitable<rpc::CallResult> NotifyChannel::Call(asio::ip::udp::endpoint peer, uint32_t program,
                                                     uint32_t version, uint32_t procedure,
                                                     std::vector<uint8_t> args,
                                                     std::chrono::milliseconds deadline,
                                                     std::chrono::milliseconds retry) {
  asio::ip::udp::socket* socket = SocketFor(peer);
  if (!socket) co_return Failure(rpc::CallStatus::kUnreachable, "no UDP socket");
  const uint32_t xid = next_xid_++;
  std::vector<uint8_t> request;
  request.reserve(args.size() + 64);
  xdr::Encoder enc(request);
  rpc::EncodeCallHeader(enc, xid, program, version, procedure, std::nullopt);
  request.insert(request.end(), args.begin(), args.end());

  Waiter waiter(executor_);
  waiters_[xid] = &waiter;
  // Every way out takes the waiter away: a return, a co_await that throws because the caller
  // was cancelled, a frame destroyed unresumed. Left behind, it would dangle (Deliver, Close).
  struct Leave {
    std::unordered_map<uint32_t, Waiter*>& waiters;
    uint32_t xid;
    ~Leave() { waiters.erase(xid); }
  } leave{waiters_, xid};
  const auto give_up = std::chrono::steady_clock::now() + deadline;
  auto interval = retry;
  while (!waiter.reply && !closed_) {
    auto [send_ec, sent] =
        co_await socket->async_send_to(asio::buffer(request), peer, rpc::kUseTuple);
    (void)sent;
    if (send_ec && send_ec != asio::error::would_block) {
      co_return Failure(rpc::CallStatus::kUnreachable, send_ec.message());
    }
    if (waiter.reply) break;  // answered while the send was in progress
    const auto now = std::chrono::steady_clock::now();
    if (now >= give_up) break;
    waiter.wake.expires_at(std::min(give_up, now + interval));
    co_await waiter.wake.async_wait(rpc::kUseTuple);
    if (std::chrono::steady_clock::now() >= give_up) break;
    // Cancelled (the notifier shuts down): no retransmission.
    if ((co_await asio::this_coro::cancellation_state).cancelled() !=
        asio::cancellation_type::none) {
      break;
    }
    interval *= 2;
  }
  if (!waiter.reply) {
    co_return Failure(rpc::CallStatus::kTimedOut, "no reply from " + peer.address().to_string() +
                                                      ":" + std::to_string(peer.port()) +
                                                      " within " +
                                                      std::to_string(deadline.count()) + " ms");
  }
  co_return rpc::InterpretReply(*waiter.reply);
}

asio::awaitable<void> NotifyChannel::ReceiveLoop(asio::ip::udp::socket* socket,
                                                 rpc::TaskGate::Pass /*held until it ends*/) {
  std::vector<uint8_t> buffer(64 * 1024);
  asio::ip::udp::endpoint sender;
  asio::error_code ignored;
  socket->non_blocking(true, ignored);
  for (;;) {
    auto [wait_ec] = co_await socket->async_wait(asio::socket_base::wait_read, rpc::kUseTuple);
    if (closed_ || !socket->is_open()) break;
    if (wait_ec) continue;
    // Drain everything queued in one go: one resumption per burst, not per reply.
    for (;;) {
      asio::error_code ec;
      size_t n = socket->receive_from(asio::buffer(buffer), sender, 0, ec);
      if (ec == asio::error::would_block || ec == asio::error::try_again) break;
      if (ec) continue;  // ICMP errors of earlier sends surface here; the callers time out.
      Deliver(std::span<const uint8_t>(buffer.data(), n));
    }
  }
}

void NotifyChannel::Deliver(std::span<const uint8_t> message) {
  rpc::DecodedReply header = rpc::DecodeReply(message);
  if (!header.ok) return;
  auto it = waiters_.find(header.xid);
  if (it == waiters_.end()) return;  // late, duplicate, or not ours
  Waiter* waiter = it->second;
  waiters_.erase(it);
  waiter->reply.emplace(message.begin(), message.end());
  waiter->wake.cancel();
}

bool NotifyChannel::RepliesQueued() const {
  asio::error_code ec;
  if (v4_ && v4_->is_open() && v4_->available(ec) > 0) return true;
  if (v6_ && v6_->is_open() && v6_->available(ec) > 0) return true;
  return false;
}

void NotifyChannel::Close() {
  closed_ = true;
  asio::error_code ignored;
  if (v4_) v4_->close(ignored);
  if (v6_) v6_->close(ignored);
  for (auto& [xid, waiter] : waiters_) waiter->wake.cancel();
}

}  // namespace nlockd::nsm
