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
// A flood (of refused or evicted connections, of unfinished records) logs one warning a second.
constexpr std::chrono::seconds kFloodWarningInterval{1};
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
        signal_(socket_.get_executor()),
        replies_ready_(socket_.get_executor()),
        idle_timer_(socket_.get_executor()),
        assembler_(RecordLimits{.max_record_size = server_.options_.max_record_size,
                                .max_fragments = server_.options_.max_fragments_per_record}),
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
    socket_.non_blocking(true, ec);
    ++server_.stats_.open_connections;
  }
  ~Connection() {
    ReleaseRecord();
    --server_.stats_.open_connections;
  }

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
    replies_ready_.Set();
    pending_replies_.clear();
    ReleaseRecord();
    Wake();
  }

  bool closed() const { return closed_; }
  const asio::ip::address& peer_address() const { return context_.peer_address; }
  // May be closed to make room for a new connection: no call of its own is running.
  bool evictable() const { return !closed_ && calls_in_flight_ == 0; }
  std::chrono::steady_clock::time_point last_activity() const { return last_activity_; }
  // Bytes held for the unfinished record, as last told to the server.
  size_t unfinished_bytes() const { return unfinished_bytes_; }
  void set_unfinished_bytes(size_t bytes) { unfinished_bytes_ = bytes; }

 private:
  asio::awaitable<void> HandleCall(std::shared_ptr<Connection> self, std::vector<uint8_t> record);
  asio::awaitable<void> WriteLoop(std::shared_ptr<Connection> /*keep_alive*/);
  asio::awaitable<void> IdleWatch(std::shared_ptr<Connection> /*keep_alive*/);
  // Reads what the socket has into the server's buffer and feeds it to the assembler;
  // false when the connection is done (closed, EOF, a bad record).
  bool ReadAvailable(std::vector<std::vector<uint8_t>>& records);
  void QueueReply(std::vector<uint8_t> reply);
  // Calls running plus replies not yet sent: past either limit the reader waits.
  bool Backlogged() const {
    return calls_in_flight_ + queued_replies_ >= server_.options_.max_calls_per_connection ||
           queued_reply_bytes_ >= server_.options_.max_queued_reply_bytes;
  }
  void ReleaseRecord() {
    assembler_.Reset();
    record_started_.reset();
    server_.NoteUnfinished(*this, 0);
  }
  // Single executor: a waiter checks its condition and starts waiting without suspending in
  // between, so a Wake cannot fall between the two.
  // A wake before the wait began is stale: the waiter has just checked its condition.
  asio::awaitable<void> WaitForWake() {
    signal_.Reset();
    co_await signal_.Wait();
  }
  void Wake() { signal_.Set(); }
  // The writer's own wake-up, so that waking the reader (a call finished) does not wake it.
  asio::awaitable<void> WaitForReplies() {
    replies_ready_.Reset();
    co_await replies_ready_.Wait();
  }

  Server& server_;
  asio::ip::tcp::socket socket_;
  TaskGate::Pass pass_;
  CallContext context_;
  Event signal_;  // the reader's wake-up: a call finished, a reply went out, closed
  Event replies_ready_;
  asio::steady_timer idle_timer_;
  RecordAssembler assembler_;
  // The last call received complete or reply sent.
  std::chrono::steady_clock::time_point last_activity_;
  // When the unfinished record's first bytes came; empty between records.
  std::optional<std::chrono::steady_clock::time_point> record_started_;
  size_t unfinished_bytes_ = 0;
  std::deque<std::vector<uint8_t>> pending_replies_;
  size_t calls_in_flight_ = 0;
  size_t queued_replies_ = 0;  // Answered, not yet written: pending_replies_ and the writer's.
  size_t queued_reply_bytes_ = 0;
  bool writing_ = false;
  bool closed_ = false;
};

asio::awaitable<void> Server::Connection::Run(std::shared_ptr<Connection> self) {
  asio::co_spawn(socket_.get_executor(), IdleWatch(self), asio::detached);
  asio::co_spawn(socket_.get_executor(), WriteLoop(self), asio::detached);
  std::vector<std::vector<uint8_t>> records;
  while (!closed_) {
    auto [ec] = co_await socket_.async_wait(asio::socket_base::wait_read, kUseTuple);
    if (ec || closed_ || !ReadAvailable(records)) break;
    for (auto& record : records) {
      while (Backlogged() && !closed_) co_await WaitForWake();
      if (closed_) break;
      ++calls_in_flight_;
      asio::co_spawn(socket_.get_executor(), HandleCall(self, std::move(record)), asio::detached);
    }
    records.clear();
  }
  // Let the calls in flight finish and their replies go out, then close.
  while ((calls_in_flight_ > 0 || writing_) && !closed_) co_await WaitForWake();
  Close();
}

bool Server::Connection::ReadAvailable(std::vector<std::vector<uint8_t>>& records) {
  std::vector<uint8_t>& buffer = server_.read_buffer_;
  asio::error_code ec;
  const size_t n = socket_.read_some(asio::buffer(buffer), ec);
  if (ec == asio::error::would_block || ec == asio::error::try_again) return true;
  if (ec) return false;  // EOF, reset, or shutdown: routine.
  server_.stats_.bytes_received += n;
  const auto status = assembler_.Feed(std::span(buffer.data(), n), records);
  if (status != RecordAssembler::Status::kOk) {
    const bool too_large = status == RecordAssembler::Status::kRecordTooLarge;
    ++(too_large ? server_.stats_.records_too_large : server_.stats_.records_too_fragmented);
    // A client that reconnects and sends another such record at once must not flood the log.
    if (server_.FloodWarningDue()) {
      spdlog::warn(
          "rpc record {} from peer={}; closing the connection ({} similar since the last warning)",
          too_large
              ? fmt::format("over {} bytes", server_.options_.max_record_size)
              : fmt::format("in over {} fragments", server_.options_.max_fragments_per_record),
          context_.peer, server_.warnings_suppressed_);
      server_.warnings_suppressed_ = 0;
    }
    Close();
    return false;
  }
  const auto now = std::chrono::steady_clock::now();
  if (!records.empty()) {
    last_activity_ = now;
    record_started_.reset();
  }
  if (assembler_.idle()) {
    record_started_.reset();
  } else if (!record_started_) {
    record_started_ = now;
    idle_timer_.cancel();  // The watchdog re-arms for the record's deadline.
  }
  server_.NoteUnfinished(*this, assembler_.held_bytes());
  return !closed_;
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
    spdlog::error("rpc call failed peer={}: {}", context_.peer, e.what());
  }
  record = {};
  --calls_in_flight_;
  if (has_reply && !closed_) {
    FinishRecord(reply, mark);
    QueueReply(std::move(reply));
  }
  Wake();
}

void Server::Connection::QueueReply(std::vector<uint8_t> reply) {
  ++queued_replies_;
  queued_reply_bytes_ += reply.size();
  pending_replies_.push_back(std::move(reply));
  if (!writing_) {
    writing_ = true;
    replies_ready_.Set();
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
    size_t batch_bytes = 0;
    while (!pending_replies_.empty() && batch.size() < kMaxRepliesPerSend) {
      batch.push_back(std::move(pending_replies_.front()));
      pending_replies_.pop_front();
      batch_bytes += batch.back().size();
      buffers.push_back(asio::buffer(batch.back()));
    }
    auto [ec, n] = co_await asio::async_write(socket_, buffers, kUseTuple);
    queued_replies_ -= batch.size();
    queued_reply_bytes_ -= batch_bytes;
    if (ec) {
      Close();
      break;
    }
    server_.stats_.bytes_sent += n;
    last_activity_ = std::chrono::steady_clock::now();
    Wake();  // The reader may be waiting for the backlog to shrink.
  }
  batch.clear();
  writing_ = false;
  Wake();
}

asio::awaitable<void> Server::Connection::IdleWatch(std::shared_ptr<Connection> /*keep_alive*/) {
  const auto idle = server_.options_.idle_timeout;
  const auto record_timeout = server_.options_.record_timeout;
  while (!closed_) {
    const auto now = std::chrono::steady_clock::now();
    auto deadline = last_activity_ + idle;
    // Idle but for a call in flight: look again an idle period later, not at once.
    if (deadline <= now) deadline = now + idle;
    if (record_started_) deadline = std::min(deadline, *record_started_ + record_timeout);
    idle_timer_.expires_at(deadline);
    co_await idle_timer_.async_wait(kUseTuple);
    if (closed_) break;
    const auto woke = std::chrono::steady_clock::now();
    if (record_started_ && woke - *record_started_ >= record_timeout) {
      ++server_.stats_.records_timed_out;
      spdlog::debug("rpc record from peer={} unfinished after {} ms; closing the connection",
                    context_.peer,
                    std::chrono::duration_cast<std::chrono::milliseconds>(record_timeout).count());
      Close();
    } else if (woke - last_activity_ >= idle && calls_in_flight_ == 0) {
      // Replies still queued do not keep it open: its client stopped reading them.
      spdlog::debug("rpc closing idle connection peer={}", context_.peer);
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
      gate_(executor, "rpc listener"),
      read_buffer_(kReadChunk) {}

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
  auto loop_pass = gate_.TryEnter("accept loop");
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
    asio::error_code remote_ec;
    const auto remote = socket.remote_endpoint(remote_ec);
    if (remote_ec) continue;  // Reset before we got to it.
    if (!MakeRoomFor(NormalizeAddress(remote.address()))) {
      ++stats_.connections_refused;
      asio::error_code ignored;
      socket.close(ignored);
      continue;
    }
    auto pass = gate_.TryEnter("tcp connection");
    if (!pass) break;
    ++stats_.connections_accepted;
    asio::error_code ignored;
    socket.set_option(asio::ip::tcp::no_delay(true), ignored);
    auto connection = std::make_shared<Connection>(*this, std::move(socket), std::move(*pass));
    connections_.push_back(connection);
    asio::co_spawn(executor_, connection->Run(connection), asio::detached);
  }
}

bool Server::MakeRoomFor(const asio::ip::address& peer) {
  connections_.remove_if([](const std::weak_ptr<Connection>& weak) {
    auto c = weak.lock();
    return !c || c->closed();
  });
  size_t from_peer = 0;
  std::shared_ptr<Connection> oldest;          // Longest idle of all.
  std::shared_ptr<Connection> oldest_of_peer;  // Longest idle of the peer's.
  auto older = [](const std::shared_ptr<Connection>& a, const std::shared_ptr<Connection>& b) {
    return !b || a->last_activity() < b->last_activity();
  };
  for (const auto& weak : connections_) {
    auto c = weak.lock();
    if (!c) continue;
    const bool of_peer = c->peer_address() == peer;
    from_peer += of_peer ? 1 : 0;
    if (!c->evictable()) continue;
    if (older(c, oldest)) oldest = c;
    if (of_peer && older(c, oldest_of_peer)) oldest_of_peer = c;
  }
  std::shared_ptr<Connection> victim;
  const char* limit = nullptr;
  if (from_peer >= options_.max_connections_per_address) {
    victim = oldest_of_peer;
    limit = "per-address connection limit";
  } else if (connections_.size() >= options_.max_connections) {
    victim = oldest;
    limit = "connection limit";
  } else {
    return true;
  }
  if (FloodWarningDue()) {
    spdlog::warn("rpc {} reached (peer={}); {} ({} similar since the last warning)", limit,
                 AddressToString(peer),
                 victim ? "closing the connection idle longest, from " +
                              AddressToString(victim->peer_address())
                        : std::string("refusing the new connection: none is idle"),
                 warnings_suppressed_);
    warnings_suppressed_ = 0;
  }
  if (!victim) return false;
  ++stats_.connections_evicted;
  victim->Close();
  return true;
}

void Server::NoteUnfinished(Connection& connection, size_t held) {
  const size_t before = connection.unfinished_bytes();
  stats_.unfinished_record_bytes = stats_.unfinished_record_bytes - before + held;
  connection.set_unfinished_bytes(held);
  if (stats_.unfinished_record_bytes == 0 && unfinished_evictions_logged_) {
    spdlog::info("rpc unfinished records back to 0 bytes");
    unfinished_evictions_logged_ = false;
  }
  // Only growth evicts: closing a connection reports its bytes released from here.
  if (held <= before) return;
  while (stats_.unfinished_record_bytes > options_.max_unfinished_record_bytes) {
    std::shared_ptr<Connection> largest;
    for (const auto& weak : connections_) {
      auto c = weak.lock();
      if (c && !c->closed() && (!largest || c->unfinished_bytes() > largest->unfinished_bytes())) {
        largest = c;
      }
    }
    if (!largest || largest->unfinished_bytes() == 0) break;
    if (FloodWarningDue()) {
      spdlog::warn(
          "rpc unfinished records hold {} bytes, over the limit of {}; closing the connection "
          "holding the largest ({} bytes, peer={}) ({} similar since the last warning)",
          stats_.unfinished_record_bytes, options_.max_unfinished_record_bytes,
          largest->unfinished_bytes(), AddressToString(largest->peer_address()),
          warnings_suppressed_);
      warnings_suppressed_ = 0;
    }
    ++stats_.unfinished_record_evictions;
    unfinished_evictions_logged_ = true;
    largest->Close();
  }
}

bool Server::FloodWarningDue() {
  const auto now = std::chrono::steady_clock::now();
  if (now < next_flood_warning_) {
    ++warnings_suppressed_;
    return false;
  }
  next_flood_warning_ = now + kFloodWarningInterval;
  return true;
}

asio::awaitable<void> Server::UdpLoop() {
  auto loop_pass = gate_.TryEnter("udp loop");
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
    auto pass = gate_.TryEnter("udp call");
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
  // Cancel: nothing new is taken. The loops' waits end with the sockets; a connection stops
  // reading and closes once its calls in flight have answered.
  gate_.Cancel();
  asio::error_code ignored;
  acceptor_.close(ignored);
  udp_.cancel(ignored);
  for (auto& weak : connections_) {
    if (auto connection = weak.lock()) connection->StopReading();
  }
  // Then wait. A call in flight is not cancelled: its client would see no reply for an
  // operation that may have happened. Past the bound the warning names what still runs.
  const bool drained = co_await gate_.CancelAndWait(options_.drain_timeout);
  if (!drained) {
    for (auto& weak : connections_) {
      if (auto connection = weak.lock()) connection->Close();
    }
    udp_.close(ignored);
    // The connections end as their last call returns (into a closed socket); their calls
    // belong to services that the caller shuts down next.
    co_await gate_.WaitEmpty(kShutdownMargin);
  }
  udp_.close(ignored);
  connections_.clear();
}

}  // namespace nlockd::rpc
