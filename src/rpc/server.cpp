// SPDX-License-Identifier: Apache-2.0
#include "rpc/server.hpp"

#include <deque>
#include <utility>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/steady_timer.hpp>
#include <asio/write.hpp>
#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include "base/error.hpp"
#include "rpc/address.hpp"
#include "rpc/record_marking.hpp"
#include "rpc/udp_datagrams.hpp"
#include "rpc/use_tuple.hpp"

namespace nlockd::rpc {

namespace {
constexpr size_t kReadChunk = 64 * 1024;
constexpr size_t kMaxDatagram = 64 * 1024;
}  // namespace

// One TCP connection: a reader that reassembles records and spawns a call per record, a writer
// that sends replies in completion order, and an idle watchdog. Kept alive by the coroutines
// that hold a shared_ptr to it; holds a gate pass so that shutdown waits for it.
class Server::Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(Server& server, asio::ip::tcp::socket socket, TaskGate::Pass pass)
      : server_(server),
        socket_(std::move(socket)),
        pass_(std::move(pass)),
        signal_(socket_.get_executor(), asio::steady_timer::time_point::max()),
        replies_ready_(socket_.get_executor(), asio::steady_timer::time_point::max()),
        idle_timer_(socket_.get_executor()),
        last_activity_(std::chrono::steady_clock::now()) {
    asio::error_code ec;
    auto remote = socket_.remote_endpoint(ec);
    auto local = socket_.local_endpoint(ec);
    context_.transport = Transport::kTcp;
    context_.peer_address = NormalizeAddress(remote.address());
    context_.peer = AddressToString(context_.peer_address);
    context_.peer_port = remote.port();
    context_.local_address = NormalizeAddress(local.address());
    context_.local_port = local.port();
    context_.listener_programs = server_.options_.programs;
    ++server_.stats_.open_connections;
  }
  ~Connection() { --server_.stats_.open_connections; }

  asio::awaitable<void> Run(std::shared_ptr<Connection> self);
  void StopReading() {
    asio::error_code ec;
    socket_.shutdown(asio::ip::tcp::socket::shutdown_receive, ec);
  }
  void Close() {
    if (closed_) return;
    closed_ = true;
    asio::error_code ec;
    socket_.close(ec);
    idle_timer_.cancel();
    replies_ready_.cancel();
    Wake();
  }

 private:
  asio::awaitable<void> HandleCall(std::shared_ptr<Connection> self, std::vector<uint8_t> record);
  asio::awaitable<void> WriteLoop(std::shared_ptr<Connection> /*keep_alive*/);
  asio::awaitable<void> IdleWatch(std::shared_ptr<Connection> /*keep_alive*/);
  void QueueReply(std::vector<uint8_t> reply);
  // Single executor: a waiter checks its condition and starts waiting without suspending in
  // between, so a Wake cannot fall between the two.
  asio::awaitable<void> WaitForWake() {
    signal_.expires_at(asio::steady_timer::time_point::max());
    co_await signal_.async_wait(kUseTuple);
  }
  void Wake() { signal_.cancel(); }
  // The writer's own wake-up, so that waking the reader (a call finished) does not wake it.
  asio::awaitable<void> WaitForReplies() {
    replies_ready_.expires_at(asio::steady_timer::time_point::max());
    co_await replies_ready_.async_wait(kUseTuple);
  }

  Server& server_;
  asio::ip::tcp::socket socket_;
  TaskGate::Pass pass_;
  CallContext context_;
  asio::steady_timer signal_;
  asio::steady_timer replies_ready_;
  asio::steady_timer idle_timer_;
  std::chrono::steady_clock::time_point last_activity_;
  std::deque<std::vector<uint8_t>> pending_replies_;
  size_t calls_in_flight_ = 0;
  bool writing_ = false;
  bool closed_ = false;
};

asio::awaitable<void> Server::Connection::Run(std::shared_ptr<Connection> self) {
  asio::co_spawn(socket_.get_executor(), IdleWatch(self), asio::detached);
  asio::co_spawn(socket_.get_executor(), WriteLoop(self), asio::detached);
  std::vector<uint8_t> buffer(kReadChunk);
  RecordAssembler assembler(server_.options_.max_record_size);
  std::vector<std::vector<uint8_t>> records;
  while (!closed_) {
    while (calls_in_flight_ >= server_.options_.max_calls_per_connection && !closed_) {
      co_await WaitForWake();
    }
    if (closed_) break;
    auto [ec, n] = co_await socket_.async_read_some(asio::buffer(buffer), kUseTuple);
    if (ec) break;  // EOF, reset, or shutdown: routine.
    last_activity_ = std::chrono::steady_clock::now();
    server_.stats_.bytes_received += n;
    if (assembler.Feed(std::span(buffer.data(), n), records) ==
        RecordAssembler::Status::kRecordTooLarge) {
      ++server_.stats_.records_too_large;
      spdlog::warn("rpc record over {} bytes from peer={}; closing the connection",
                   server_.options_.max_record_size, AddressToString(context_.peer_address));
      Close();
      break;
    }
    for (auto& record : records) {
      ++calls_in_flight_;
      asio::co_spawn(socket_.get_executor(), HandleCall(self, std::move(record)), asio::detached);
    }
    records.clear();
  }
  // Let the calls in flight finish and their replies go out, then close.
  while ((calls_in_flight_ > 0 || writing_) && !closed_) co_await WaitForWake();
  Close();
}

asio::awaitable<void> Server::Connection::HandleCall(std::shared_ptr<Connection> /*keep_alive*/,
                                                     std::vector<uint8_t> record) {
  std::vector<uint8_t> reply;
  reply.reserve(128);
  size_t mark = BeginRecord(reply);
  bool has_reply = false;
  try {
    has_reply = co_await server_.dispatcher_.Dispatch(context_, record, reply);
  } catch (const std::exception& e) {
    spdlog::error("rpc call failed peer={}: {}", AddressToString(context_.peer_address), e.what());
  }
  --calls_in_flight_;
  if (has_reply && !closed_) {
    FinishRecord(reply, mark);
    QueueReply(std::move(reply));
  }
  Wake();
}

void Server::Connection::QueueReply(std::vector<uint8_t> reply) {
  pending_replies_.push_back(std::move(reply));
  if (!writing_) {
    writing_ = true;
    replies_ready_.cancel();
  }
}

asio::awaitable<void> Server::Connection::WriteLoop(std::shared_ptr<Connection> /*keep_alive*/) {
  // One writer for the connection's life. The first reply of a turn wakes it, and the wake-up
  // runs behind the handlers ready then, so the replies they finish (the rest of a read's
  // records, the calls of a journal batch) go out with it in one send instead of one each.
  constexpr size_t kMaxRepliesPerSend = 64;
  std::vector<std::vector<uint8_t>> batch;
  std::vector<asio::const_buffer> buffers;
  batch.reserve(kMaxRepliesPerSend);
  buffers.reserve(kMaxRepliesPerSend);
  while (!closed_) {
    if (pending_replies_.empty()) {
      writing_ = false;
      Wake();
      co_await WaitForReplies();
      continue;
    }
    batch.clear();
    buffers.clear();
    while (!pending_replies_.empty() && batch.size() < kMaxRepliesPerSend) {
      batch.push_back(std::move(pending_replies_.front()));
      pending_replies_.pop_front();
      buffers.push_back(asio::buffer(batch.back()));
    }
    auto [ec, n] = co_await asio::async_write(socket_, buffers, kUseTuple);
    if (ec) {
      Close();
      break;
    }
    server_.stats_.bytes_sent += n;
    last_activity_ = std::chrono::steady_clock::now();
  }
  writing_ = false;
  Wake();
}

asio::awaitable<void> Server::Connection::IdleWatch(std::shared_ptr<Connection> /*keep_alive*/) {
  const auto idle = server_.options_.idle_timeout;
  while (!closed_) {
    idle_timer_.expires_at(last_activity_ + idle);
    co_await idle_timer_.async_wait(kUseTuple);
    if (closed_) break;
    if (std::chrono::steady_clock::now() - last_activity_ >= idle && calls_in_flight_ == 0 &&
        !writing_) {
      spdlog::debug("rpc closing idle connection peer={}", AddressToString(context_.peer_address));
      Close();
    }
  }
}

Server::Server(asio::any_io_executor executor, const Dispatcher& dispatcher, ServerOptions options)
    : executor_(executor),
      dispatcher_(dispatcher),
      options_(options),
      acceptor_(executor),
      udp_(executor),
      gate_(executor) {}

Server::~Server() {
  asio::error_code ec;
  acceptor_.close(ec);
  udp_.close(ec);
}

void Server::Listen(const asio::ip::address& address, uint16_t port) {
  const int attempts = port == 0 ? 20 : 1;
  for (int attempt = 1;; ++attempt) {
    asio::error_code ec;
    asio::ip::tcp::endpoint tcp_endpoint(address, port);
    acceptor_.open(tcp_endpoint.protocol(), ec);
    if (!ec) acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) acceptor_.bind(tcp_endpoint, ec);
    if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) {
      throw Error(ErrorKind::kFailed, "cannot listen on tcp " + address.to_string() + ":" +
                                          std::to_string(port) + ": " + ec.message());
    }
    uint16_t bound = acceptor_.local_endpoint().port();
    asio::ip::udp::endpoint udp_endpoint(address, bound);
    udp_.open(udp_endpoint.protocol(), ec);
    if (!ec) udp_.bind(udp_endpoint, ec);
    if (!ec) {
      address_ = address;
      port_ = bound;
      AskForDestinations();
      return;
    }
    asio::error_code ignored;
    udp_.close(ignored);
    acceptor_.close(ignored);
    if (attempt >= attempts || ec != asio::error::address_in_use) {
      throw Error(ErrorKind::kFailed, "cannot listen on udp " + address.to_string() + ":" +
                                          std::to_string(bound) + ": " + ec.message());
    }
  }
}

namespace {

// The address family of a socket, as the protocol Asio needs to adopt it.
template <typename Protocol>
Protocol ProtocolOf(int fd) {
  sockaddr_storage storage{};
  socklen_t length = sizeof storage;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&storage), &length) != 0) {
    throw Error(ErrorKind::kFailed, "cannot adopt socket " + std::to_string(fd) + ": not a socket");
  }
  return storage.ss_family == AF_INET6 ? Protocol::v6() : Protocol::v4();
}

}  // namespace

void Server::Adopt(int tcp_listen_fd, int udp_fd) {
  asio::error_code ec;
  acceptor_.assign(ProtocolOf<asio::ip::tcp>(tcp_listen_fd), tcp_listen_fd, ec);
  if (!ec) udp_.assign(ProtocolOf<asio::ip::udp>(udp_fd), udp_fd, ec);
  if (ec) throw Error(ErrorKind::kFailed, "cannot adopt the listening sockets: " + ec.message());
  asio::ip::tcp::endpoint endpoint = acceptor_.local_endpoint(ec);
  if (ec) throw Error(ErrorKind::kFailed, "adopted TCP socket is not bound: " + ec.message());
  address_ = endpoint.address();
  port_ = endpoint.port();
  AskForDestinations();
}

void Server::AskForDestinations() {
  std::error_code ec;
  ReceiveDestinations(udp_, ec);
  if (ec) {
    spdlog::warn(
        "rpc udp on port {}: the kernel will not say where each call was sent ({}); replies go "
        "from the address it picks, which a client of another local address may drop",
        port_, ec.message());
  }
}

void Server::Start() {
  NLOCKD_REQUIRE(acceptor_.is_open() && udp_.is_open(), "Listen first");
  asio::co_spawn(executor_, AcceptLoop(), asio::detached);
  asio::co_spawn(executor_, UdpLoop(), asio::detached);
}

asio::awaitable<void> Server::AcceptLoop() {
  auto loop_pass = gate_.TryEnter();
  if (!loop_pass) co_return;
  asio::steady_timer backoff(executor_);
  while (!gate_.closed()) {
    auto [ec, socket] = co_await acceptor_.async_accept(kUseTuple);
    if (ec) {
      if (ec == asio::error::operation_aborted || gate_.closed()) break;
      // Out of descriptors, say: back off instead of spinning.
      spdlog::warn("rpc accept failed: {}", ec.message());
      backoff.expires_after(std::chrono::milliseconds(100));
      co_await backoff.async_wait(kUseTuple);
      continue;
    }
    connections_.remove_if([](const std::weak_ptr<Connection>& c) { return c.expired(); });
    if (stats_.open_connections >= options_.max_connections) {
      ++stats_.connections_refused;
      spdlog::warn("rpc connection limit {} reached; refusing a connection",
                   options_.max_connections);
      asio::error_code ignored;
      socket.close(ignored);
      continue;
    }
    auto pass = gate_.TryEnter();
    if (!pass) break;
    ++stats_.connections_accepted;
    asio::error_code ignored;
    socket.set_option(asio::ip::tcp::no_delay(true), ignored);
    auto connection = std::make_shared<Connection>(*this, std::move(socket), std::move(*pass));
    connections_.push_back(connection);
    asio::co_spawn(executor_, connection->Run(connection), asio::detached);
  }
}

asio::awaitable<void> Server::UdpLoop() {
  auto loop_pass = gate_.TryEnter();
  if (!loop_pass) co_return;
  std::vector<uint8_t> buffer(kMaxDatagram);
  while (!gate_.closed()) {
    std::error_code ec;
    ReceivedDatagram received = ReceiveDatagram(udp_, buffer, ec);
    if (ec == asio::error::would_block) {
      auto [wait_ec] = co_await udp_.async_wait(asio::socket_base::wait_read, kUseTuple);
      if (wait_ec && (wait_ec == asio::error::operation_aborted || !udp_.is_open())) break;
      continue;
    }
    if (ec) {
      if (gate_.closed() || !udp_.is_open()) break;
      continue;  // ICMP errors from earlier sends surface here; they are not ours to handle.
    }
    const size_t n = received.size;
    stats_.bytes_received += n;
    if (udp_in_flight_ >= options_.max_udp_calls) {
      ++stats_.udp_dropped;
      continue;
    }
    auto pass = gate_.TryEnter();
    if (!pass) break;
    ++udp_in_flight_;
    asio::co_spawn(executor_,
                   HandleDatagram(std::vector<uint8_t>(buffer.begin(),
                                                       buffer.begin() + static_cast<ptrdiff_t>(n)),
                                  received.sender, received.destination, std::move(*pass)),
                   asio::detached);
  }
}

asio::awaitable<void> Server::HandleDatagram(std::vector<uint8_t> datagram,
                                             asio::ip::udp::endpoint sender,
                                             std::optional<asio::ip::address> destination,
                                             TaskGate::Pass /*pass*/) {
  CallContext context;
  context.transport = Transport::kUdp;
  context.peer_address = NormalizeAddress(sender.address());
  context.peer = AddressToString(context.peer_address);
  context.peer_port = sender.port();
  context.local_address = NormalizeAddress(destination.value_or(address_));
  context.local_port = port_;
  context.listener_programs = options_.programs;
  std::vector<uint8_t> reply;
  bool has_reply = false;
  try {
    has_reply = co_await dispatcher_.Dispatch(context, datagram, reply);
  } catch (const std::exception& e) {
    spdlog::error("rpc udp call failed peer={}: {}", AddressToString(context.peer_address),
                  e.what());
  }
  // From the address the call was sent to: a client connected to it drops any other source.
  while (has_reply && udp_.is_open()) {
    std::error_code ec;
    const size_t n = SendDatagram(udp_, reply, sender, destination, ec);
    if (ec == asio::error::would_block) {
      auto [wait_ec] = co_await udp_.async_wait(asio::socket_base::wait_write, kUseTuple);
      if (wait_ec) break;
      continue;
    }
    if (!ec) stats_.bytes_sent += n;
    break;
  }
  --udp_in_flight_;
}

asio::awaitable<void> Server::Shutdown() {
  gate_.Close();
  asio::error_code ignored;
  acceptor_.close(ignored);
  udp_.cancel(ignored);
  for (auto& weak : connections_) {
    if (auto connection = weak.lock()) connection->StopReading();
  }
  bool drained = co_await gate_.WaitEmpty(options_.drain_timeout);
  if (!drained) {
    spdlog::warn("rpc shutdown: {} tasks still running after the drain timeout; closing",
                 gate_.count());
    for (auto& weak : connections_) {
      if (auto connection = weak.lock()) connection->Close();
    }
    udp_.close(ignored);
    co_await gate_.WaitEmpty(std::chrono::seconds(2));
  }
  udp_.close(ignored);
  connections_.clear();
}

}  // namespace nlockd::rpc
