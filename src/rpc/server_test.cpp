// SPDX-License-Identifier: Apache-2.0
#include "rpc/server.hpp"

#include <atomic>
#include <future>
#include <thread>

#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/ip/udp.hpp>
#include <asio/read.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/write.hpp>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/time.h>

#include "rpc/client.hpp"
#include "rpc/record_marking.hpp"
#include "testutil/captured_log.hpp"
#include "testutil/run_coroutine.hpp"

namespace nlockd::rpc {
namespace {

using Bytes = std::vector<uint8_t>;
constexpr uint32_t kProg = 200001;
constexpr uint32_t kVers = 1;

asio::awaitable<HandlerStatus> Null(const CallContext&, xdr::Decoder&, xdr::Encoder&) {
  co_return HandlerStatus::kSuccess;
}

std::atomic<int> g_started{0};  // Calls SLEEP and BIG have begun.

// Waits the number of milliseconds in its argument, then echoes it.
asio::awaitable<HandlerStatus> Sleep(const CallContext&, xdr::Decoder& args, xdr::Encoder& out) {
  uint32_t ms = 0;
  if (!args.U32(ms, "ms")) co_return HandlerStatus::kGarbageArgs;
  ++g_started;
  asio::steady_timer timer(co_await asio::this_coro::executor, std::chrono::milliseconds(ms));
  co_await timer.async_wait(asio::use_awaitable);
  out.U32(ms);
  co_return HandlerStatus::kSuccess;
}

// Replies with as many bytes as its argument says.
asio::awaitable<HandlerStatus> Big(const CallContext&, xdr::Decoder& args, xdr::Encoder& out) {
  ++g_started;
  uint32_t size = 0;
  if (!args.U32(size, "size")) co_return HandlerStatus::kGarbageArgs;
  out.Opaque(std::string(size, 'x'));
  co_return HandlerStatus::kSuccess;
}

// Echoes the address the call was sent to, as the server saw it.
asio::awaitable<HandlerStatus> Where(const CallContext& context, xdr::Decoder&, xdr::Encoder& out) {
  out.String(context.local_address.to_string());
  co_return HandlerStatus::kSuccess;
}

Bytes CallMessage(uint32_t xid, uint32_t proc, std::optional<uint32_t> arg = std::nullopt) {
  Bytes msg;
  xdr::Encoder enc(msg);
  EncodeCallHeader(enc, xid, kProg, kVers, proc);
  if (arg) enc.U32(*arg);
  return msg;
}

Bytes AsRecord(const Bytes& msg) {
  Bytes out;
  size_t mark = BeginRecord(out);
  out.insert(out.end(), msg.begin(), msg.end());
  FinishRecord(out, mark);
  return out;
}

// A blocking TCP client for feeding the server exactly the bytes a test wants. Reads and
// writes with a 5 s timeout (through the socket calls: Asio's blocking calls ignore them).
class RawConnection {
 public:
  explicit RawConnection(uint16_t port, const char* source = nullptr, int buffer_size = 0)
      : socket_(io_) {
    socket_.open(asio::ip::tcp::v4());
    if (buffer_size > 0) {
      socket_.set_option(asio::socket_base::receive_buffer_size(buffer_size));
      socket_.set_option(asio::socket_base::send_buffer_size(buffer_size));
    }
    if (source) socket_.bind({asio::ip::make_address(source), 0});
    socket_.connect({asio::ip::make_address("127.0.0.1"), port});
    timeval tv{5, 0};
    setsockopt(socket_.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(socket_.native_handle(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  }
  void Send(const Bytes& bytes) { ASSERT_EQ(TrySend(bytes), bytes.size()); }
  // Bytes sent before an error or the timeout.
  size_t TrySend(const Bytes& bytes) {
    size_t sent = 0;
    while (sent < bytes.size()) {
      const ssize_t n =
          ::send(socket_.native_handle(), bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) break;
      sent += static_cast<size_t>(n);
    }
    return sent;
  }
  void SetSendTimeout(int ms) {
    timeval tv{ms / 1000, (ms % 1000) * 1000};
    setsockopt(socket_.native_handle(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  }
  // The next reply record; nullopt on EOF, error or timeout.
  std::optional<Bytes> ReadRecord() {
    uint8_t header[4];
    if (!Read(header, sizeof header)) return std::nullopt;
    uint32_t len = ((uint32_t{header[0]} << 24) | (uint32_t{header[1]} << 16) |
                    (uint32_t{header[2]} << 8) | header[3]) &
                   ~kLastFragmentBit;
    Bytes body(len);
    if (!Read(body.data(), body.size())) return std::nullopt;
    return body;
  }
  // True if the server closed the connection (within the 5 s timeout).
  bool ClosedByPeer() {
    uint8_t byte;
    const ssize_t n = ::recv(socket_.native_handle(), &byte, 1, 0);
    return n == 0 || (n < 0 && errno == ECONNRESET);
  }
  void Close() { socket_.close(); }

 private:
  bool Read(uint8_t* data, size_t size) {
    size_t got = 0;
    while (got < size) {
      const ssize_t n = ::recv(socket_.native_handle(), data + got, size - got, 0);
      if (n <= 0) return false;
      got += static_cast<size_t>(n);
    }
    return true;
  }

  asio::io_context io_;
  asio::ip::tcp::socket socket_;
};

class ServerTest : public ::testing::Test {
 protected:
  void StartServer(ServerOptions options = {}, const char* address = "127.0.0.1") {
    dispatcher_.Register(kProg, kVers, 0, "NULL", Null);
    dispatcher_.Register(kProg, kVers, 1, "SLEEP", Sleep);
    dispatcher_.Register(kProg, kVers, 2, "WHERE", Where);
    dispatcher_.Register(kProg, kVers, 3, "BIG", Big);
    g_started = 0;
    server_ = std::make_unique<Server>(io_.get_executor(), dispatcher_, options);
    server_->Listen(asio::ip::make_address(address), 0);
    server_->Start();
    thread_ = std::thread([this] { io_.run(); });
  }

  void TearDown() override {
    if (!server_) return;
    StopServer();
  }

  void StopServer() {
    std::promise<void> done;
    asio::co_spawn(io_, server_->Shutdown(), [&](std::exception_ptr) { done.set_value(); });
    done.get_future().wait();
    work_.reset();
    thread_.join();
    server_.reset();
  }

  // The server's counters, read on its executor.
  ServerStats Stats() {
    std::promise<ServerStats> stats;
    asio::post(io_, [&] { stats.set_value(server_->stats()); });
    return stats.get_future().get();
  }

  // Waits (up to 10 s) until `done` holds for the server's counters.
  template <typename Predicate>
  bool WaitForStats(Predicate done) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!done(Stats())) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return true;
  }

  CallResult ClientCall(Transport transport, uint32_t proc, std::optional<uint32_t> arg) {
    asio::io_context client_io;
    Client client(client_io.get_executor());
    Bytes args;
    xdr::Encoder enc(args);
    if (arg) enc.U32(*arg);
    return testutil::RunCoroutine(
        client_io,
        client.Call(CallTarget{"127.0.0.1", server_->port(), transport}, kProg, kVers, proc, args));
  }

  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_{io_.get_executor()};
  Dispatcher dispatcher_;
  std::unique_ptr<Server> server_;
  std::thread thread_;
};

TEST_F(ServerTest, AnswersOverTcpAndUdpOnOnePort) {
  StartServer();
  EXPECT_EQ(ClientCall(Transport::kTcp, 0, std::nullopt).status, CallStatus::kOk);
  EXPECT_EQ(ClientCall(Transport::kUdp, 0, std::nullopt).status, CallStatus::kOk);
  CallResult result = ClientCall(Transport::kTcp, 1, 5);
  ASSERT_EQ(result.status, CallStatus::kOk);
  EXPECT_EQ(result.body, (Bytes{0, 0, 0, 5}));
}

TEST_F(ServerTest, ReassemblesARecordSentInSeveralFragmentsAndWrites) {
  StartServer();
  RawConnection conn(server_->port());
  Bytes msg = CallMessage(7, 0);
  Bytes first(msg.begin(), msg.begin() + 10), second(msg.begin() + 10, msg.end());
  Bytes frag1{0, 0, 0, static_cast<uint8_t>(first.size())};
  frag1.insert(frag1.end(), first.begin(), first.end());
  Bytes frag2{0x80, 0, 0, static_cast<uint8_t>(second.size())};
  frag2.insert(frag2.end(), second.begin(), second.end());
  conn.Send(Bytes(frag1.begin(), frag1.begin() + 3));
  conn.Send(Bytes(frag1.begin() + 3, frag1.end()));
  conn.Send(frag2);
  auto reply = conn.ReadRecord();
  ASSERT_TRUE(reply);
  EXPECT_EQ(DecodeReply(*reply).xid, 7u);
  EXPECT_EQ(DecodeReply(*reply).accept_stat, AcceptStat::kSuccess);
}

TEST_F(ServerTest, PipelinedCallsAreAnsweredAsTheyComplete) {
  StartServer();
  RawConnection conn(server_->port());
  Bytes stream = AsRecord(CallMessage(1, 1, 300));
  Bytes fast = AsRecord(CallMessage(2, 1, 0));
  Bytes null = AsRecord(CallMessage(3, 0));
  stream.insert(stream.end(), fast.begin(), fast.end());
  stream.insert(stream.end(), null.begin(), null.end());
  conn.Send(stream);
  std::vector<uint32_t> order;
  for (int i = 0; i < 3; ++i) {
    auto reply = conn.ReadRecord();
    ASSERT_TRUE(reply);
    order.push_back(DecodeReply(*reply).xid);
  }
  EXPECT_EQ(order.back(), 1u);  // The slow call finishes last.
}

TEST_F(ServerTest, OversizedRecordClosesTheConnectionAndServingGoesOn) {
  ServerOptions options;
  options.max_record_size = 4096;
  StartServer(options);
  RawConnection conn(server_->port());
  conn.Send(Bytes{0x80, 0x01, 0x00, 0x00});  // Claims 64 KiB.
  EXPECT_TRUE(conn.ClosedByPeer());
  EXPECT_EQ(ClientCall(Transport::kTcp, 0, std::nullopt).status, CallStatus::kOk);
}

TEST_F(ServerTest, MalformedRecordsGetNoReplyButTheConnectionStays) {
  StartServer();
  RawConnection conn(server_->port());
  conn.Send(AsRecord(Bytes{0, 0, 0, 9, 0, 0, 0, 0, 0, 0}));  // Truncated call header.
  conn.Send(AsRecord(Bytes{}));                              // Empty record.
  Bytes bad_version = CallMessage(11, 0);
  bad_version[11] = 1;
  conn.Send(AsRecord(bad_version));
  conn.Send(AsRecord(CallMessage(12, 1)));  // SLEEP without its argument.
  conn.Send(AsRecord(CallMessage(13, 0)));
  auto r1 = conn.ReadRecord();
  auto r2 = conn.ReadRecord();
  auto r3 = conn.ReadRecord();
  ASSERT_TRUE(r1 && r2 && r3);
  EXPECT_EQ(DecodeReply(*r1).xid, 11u);
  EXPECT_EQ(DecodeReply(*r1).reject_stat, RejectStat::kRpcMismatch);
  EXPECT_EQ(DecodeReply(*r2).xid, 12u);
  EXPECT_EQ(DecodeReply(*r2).accept_stat, AcceptStat::kGarbageArgs);
  EXPECT_EQ(DecodeReply(*r3).xid, 13u);
}

TEST_F(ServerTest, ClientVanishingMidRecordLeavesTheServerServing) {
  StartServer();
  {
    RawConnection conn(server_->port());
    Bytes record = AsRecord(CallMessage(1, 0));
    conn.Send(Bytes(record.begin(), record.begin() + 9));
    conn.Close();
  }
  {
    RawConnection conn(server_->port());
    conn.Send(AsRecord(CallMessage(1, 1, 200)));
    conn.Close();  // Gone before its slow reply is written.
  }
  EXPECT_EQ(ClientCall(Transport::kTcp, 0, std::nullopt).status, CallStatus::kOk);
}

TEST_F(ServerTest, ConnectionPastTheLimitTakesThePlaceOfTheOneIdleLongest) {
  ServerOptions options;
  options.max_connections = 2;
  StartServer(options);
  RawConnection a(server_->port()), b(server_->port());
  a.Send(AsRecord(CallMessage(1, 0)));
  ASSERT_TRUE(a.ReadRecord());
  b.Send(AsRecord(CallMessage(2, 0)));
  ASSERT_TRUE(b.ReadRecord());
  RawConnection c(server_->port());
  c.Send(AsRecord(CallMessage(3, 0)));
  EXPECT_TRUE(c.ReadRecord()) << "the new connection is served";
  EXPECT_TRUE(a.ClosedByPeer()) << "in place of the one idle longest";
  b.Send(AsRecord(CallMessage(4, 0)));
  EXPECT_TRUE(b.ReadRecord());
  EXPECT_EQ(Stats().connections_evicted, 1u);
}

TEST_F(ServerTest, ConnectionsPastTheLimitAreRefusedWhenNoneIsIdle) {
  ServerOptions options;
  options.max_connections = 2;
  StartServer(options);
  RawConnection a(server_->port()), b(server_->port());
  a.Send(AsRecord(CallMessage(1, 1, 2000)));
  b.Send(AsRecord(CallMessage(2, 1, 2000)));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (g_started < 2 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
  RawConnection c(server_->port());
  EXPECT_TRUE(c.ClosedByPeer());
  EXPECT_EQ(Stats().connections_refused, 1u);
}

TEST_F(ServerTest, OneAddressCannotTakeEveryConnection) {
  ServerOptions options;
  options.max_connections_per_address = 2;
  StartServer(options);
  RawConnection a(server_->port()), b(server_->port());
  a.Send(AsRecord(CallMessage(1, 0)));
  ASSERT_TRUE(a.ReadRecord());
  b.Send(AsRecord(CallMessage(2, 0)));
  ASSERT_TRUE(b.ReadRecord());
  RawConnection c(server_->port());
  c.Send(AsRecord(CallMessage(3, 0)));
  EXPECT_TRUE(c.ReadRecord());
  EXPECT_TRUE(a.ClosedByPeer()) << "the address's own longest-idle connection made room";
  RawConnection other(server_->port(), "127.0.0.2");
  other.Send(AsRecord(CallMessage(4, 0)));
  EXPECT_TRUE(other.ReadRecord()) << "another address is not affected";
  b.Send(AsRecord(CallMessage(5, 0)));
  EXPECT_TRUE(b.ReadRecord());
}

TEST_F(ServerTest, IdleConnectionIsClosed) {
  ServerOptions options;
  options.idle_timeout = std::chrono::milliseconds(100);
  StartServer(options);
  RawConnection conn(server_->port());
  conn.Send(AsRecord(CallMessage(1, 0)));
  ASSERT_TRUE(conn.ReadRecord());
  EXPECT_TRUE(conn.ClosedByPeer());
}

TEST_F(ServerTest, ATrickleOfBytesDoesNotKeepAConnectionOpen) {
  ServerOptions options;
  options.idle_timeout = std::chrono::milliseconds(300);
  StartServer(options);
  RawConnection conn(server_->port());
  Bytes record = AsRecord(CallMessage(1, 0));
  record[3] = 0xff;  // A record longer than what follows: it never completes.
  const auto start = std::chrono::steady_clock::now();
  bool closed = false;
  for (size_t i = 0; i < record.size() && !closed; ++i) {
    closed = conn.TrySend(Bytes{record[i]}) == 0;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // The trickle's pace.
  }
  EXPECT_TRUE(closed || conn.ClosedByPeer());
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));
}

TEST_F(ServerTest, ARecordUnfinishedPastItsTimeoutClosesTheConnection) {
  ServerOptions options;
  options.record_timeout = std::chrono::milliseconds(200);
  StartServer(options);
  RawConnection conn(server_->port());
  conn.Send(AsRecord(CallMessage(1, 0)));
  ASSERT_TRUE(conn.ReadRecord());
  Bytes record = AsRecord(CallMessage(2, 0));
  conn.Send(Bytes(record.begin(), record.begin() + 10));
  EXPECT_TRUE(conn.ClosedByPeer());
  EXPECT_EQ(Stats().records_timed_out, 1u);
}

// Calls of `reply_size`-byte replies, as many as fill the socket buffers many times over.
Bytes PipelinedBigCalls(int calls, uint32_t reply_size) {
  Bytes stream;
  for (int i = 0; i < calls; ++i) {
    Bytes call = AsRecord(CallMessage(static_cast<uint32_t>(i), 3, reply_size));
    stream.insert(stream.end(), call.begin(), call.end());
  }
  return stream;
}

TEST_F(ServerTest, AClientThatDoesNotReadItsRepliesIsNoLongerRead) {
  ServerOptions options;
  options.max_calls_per_connection = 4;
  StartServer(options);
  // Small socket buffers on the client's side; the server's hold at most 4 MiB of replies.
  RawConnection conn(server_->port(), nullptr, 4096);
  conn.SetSendTimeout(1000);
  constexpr int kCalls = 10000;
  const Bytes stream = PipelinedBigCalls(kCalls, 16 * 1024);
  const size_t sent = conn.TrySend(stream);
  EXPECT_LT(sent, stream.size()) << "the server stopped reading";
  EXPECT_LT(g_started.load(), 1000) << "it answered only what the window and sockets hold";
  // The client reads again: every call it sent whole is answered.
  conn.SetSendTimeout(5000);
  const size_t whole_calls = sent / (stream.size() / kCalls);
  size_t replies = 0;
  while (replies < whole_calls && conn.ReadRecord()) ++replies;
  EXPECT_EQ(replies, whole_calls);
  EXPECT_TRUE(WaitForStats([&](const ServerStats& s) { return s.bytes_received == sent; }));
}

TEST_F(ServerTest, QueuedReplyBytesAreBoundedPerConnection) {
  ServerOptions options;
  options.max_queued_reply_bytes = 64 * 1024;
  StartServer(options);
  RawConnection conn(server_->port(), nullptr, 4096);
  conn.SetSendTimeout(1000);
  const Bytes stream = PipelinedBigCalls(10000, 256 * 1024);
  EXPECT_LT(conn.TrySend(stream), stream.size()) << "the server stopped reading";
  // The window of 128 calls would hold 32 MiB of these replies; the byte bound stops it after
  // one, and the server's socket holds at most 4 MiB more.
  EXPECT_LT(g_started.load(), 64);
}

TEST_F(ServerTest, UnfinishedRecordsAcrossConnectionsAreBounded) {
  ServerOptions options;
  options.max_unfinished_record_bytes = 512 * 1024;
  StartServer(options);
  std::vector<std::unique_ptr<RawConnection>> connections;
  for (int i = 0; i < 8; ++i) {
    connections.push_back(std::make_unique<RawConnection>(server_->port()));
    Bytes partial{0x80, 0x0f, 0xff, 0xf0};  // Claims 1 MiB - 16, sends 100 KiB of it.
    partial.resize(4 + 100 * 1024, 0x11);
    connections.back()->TrySend(partial);
  }
  ASSERT_TRUE(WaitForStats([](const ServerStats& s) { return s.unfinished_record_evictions > 0; }));
  EXPECT_LE(Stats().unfinished_record_bytes, options.max_unfinished_record_bytes);
  EXPECT_EQ(ClientCall(Transport::kTcp, 0, std::nullopt).status, CallStatus::kOk);
  connections.clear();
  EXPECT_TRUE(WaitForStats([](const ServerStats& s) {
    return s.open_connections == 0 && s.unfinished_record_bytes == 0;
  })) << "closing them gives their bytes back";
}

TEST_F(ServerTest, ARecordInTooManyFragmentsClosesTheConnection) {
  ServerOptions options;
  options.max_fragments_per_record = 8;
  StartServer(options);
  RawConnection conn(server_->port());
  Bytes ones;
  for (int i = 0; i < 9; ++i) ones.insert(ones.end(), {0, 0, 0, 1, 0});
  conn.Send(ones);
  EXPECT_TRUE(conn.ClosedByPeer());
  EXPECT_EQ(ClientCall(Transport::kTcp, 0, std::nullopt).status, CallStatus::kOk);
}

TEST_F(ServerTest, ClientsReconnectingWithBadRecordsLogOneWarningASecond) {
  // Each refused record used to log a line: a client reconnecting in a loop filled the log (and,
  // with stderr a pipe nobody drained, stopped the daemon on its next write).
  testutil::CapturedLog log;
  ServerOptions options;
  options.max_fragments_per_record = 8;
  options.max_record_size = 1024;
  StartServer(options);
  Bytes fragments;
  for (int i = 0; i < 9; ++i) fragments.insert(fragments.end(), {0, 0, 0, 1, 0});
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 50; ++i) {
    RawConnection conn(server_->port());
    conn.Send(i % 2 == 0 ? fragments : Bytes{0x80, 0, 0x08, 0});  // Or a record of 2 KiB.
    EXPECT_TRUE(conn.ClosedByPeer());
  }
  const auto elapsed = std::chrono::steady_clock::now() - start;
  const ServerStats stats = Stats();
  StopServer();
  EXPECT_EQ(stats.records_too_fragmented + stats.records_too_large, 50u);
  const size_t warnings = log.Count("rpc record ");
  const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(elapsed).count();
  EXPECT_GE(warnings, 1u) << log.text();
  EXPECT_LE(warnings, static_cast<size_t>(seconds) + 1) << log.text();
}

TEST_F(ServerTest, UdpGarbageGetsNoReplyAndUdpKeepsServing) {
  StartServer();
  asio::io_context io;
  asio::ip::udp::socket socket(io, asio::ip::udp::v4());
  asio::ip::udp::endpoint target(asio::ip::make_address("127.0.0.1"), server_->port());
  socket.send_to(asio::buffer(Bytes{1, 2, 3}), target);
  socket.send_to(asio::buffer(Bytes(70000 % 65507, 0xff)), target);
  EXPECT_EQ(ClientCall(Transport::kUdp, 0, std::nullopt).status, CallStatus::kOk);
}

// A UDP call from 127.0.0.1 to 127.0.0.2 on a client socket connected to 127.0.0.2 (as the
// Linux kernel's RPC client connects its socket to the server's address). The kernel would
// answer 127.0.0.1 from 127.0.0.1, which that socket drops; the server must answer from
// 127.0.0.2. Returns the address the server saw the call sent to, "" if no answer came.
std::string CallWhereFromAnotherLoopbackAddress(uint16_t port) {
  asio::io_context io;
  asio::ip::udp::socket socket(io, asio::ip::udp::v4());
  socket.bind({asio::ip::make_address("127.0.0.1"), 0});
  socket.connect({asio::ip::make_address("127.0.0.2"), port});
  timeval tv{3, 0};
  setsockopt(socket.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  socket.send(asio::buffer(CallMessage(77, 2)));
  Bytes reply(512);
  // Not socket.receive(): Asio waits on past SO_RCVTIMEO.
  const ssize_t n = ::recv(socket.native_handle(), reply.data(), reply.size(), 0);
  if (n <= 0) return "";
  reply.resize(static_cast<size_t>(n));
  DecodedReply decoded = DecodeReply(reply);
  if (!decoded.ok || decoded.xid != 77) return "(bad reply)";
  xdr::Decoder in(decoded.body);
  std::string where;
  if (!in.String(where, 64, "where")) return "(bad result)";
  return where;
}

TEST_F(ServerTest, UdpOnTheWildcardAddressAnswersFromTheAddressTheCallWasSentTo) {
  StartServer({}, "0.0.0.0");
  EXPECT_EQ(CallWhereFromAnotherLoopbackAddress(server_->port()), "127.0.0.2");
  EXPECT_EQ(ClientCall(Transport::kUdp, 0, std::nullopt).status, CallStatus::kOk);
}

TEST_F(ServerTest, DualStackUdpAnswersAnIpv4CallFromTheAddressItWasSentTo) {
  {
    asio::io_context probe;
    asio::ip::udp::socket v6(probe);
    asio::error_code ec;
    v6.open(asio::ip::udp::v6(), ec);
    if (!ec) v6.bind({asio::ip::address_v6::any(), 0}, ec);
    if (ec) GTEST_SKIP() << "no IPv6 here";
  }
  StartServer({}, "::");
  EXPECT_EQ(CallWhereFromAnotherLoopbackAddress(server_->port()), "127.0.0.2");
}

TEST_F(ServerTest, ShutdownLetsACallInFlightSendItsReply) {
  StartServer();
  RawConnection conn(server_->port());
  conn.Send(AsRecord(CallMessage(5, 1, 300)));
  // Wait until the call is in flight: a second connection's call is answered after it arrived.
  EXPECT_EQ(ClientCall(Transport::kTcp, 0, std::nullopt).status, CallStatus::kOk);
  std::promise<void> done;
  asio::co_spawn(io_, server_->Shutdown(), [&](std::exception_ptr) { done.set_value(); });
  auto reply = conn.ReadRecord();
  ASSERT_TRUE(reply);
  EXPECT_EQ(DecodeReply(*reply).xid, 5u);
  EXPECT_TRUE(conn.ClosedByPeer());
  done.get_future().wait();
  work_.reset();
  thread_.join();
  server_.reset();
}

TEST_F(ServerTest, ShutdownPastItsBoundWarnsOnceNamingWhatRunsAndClosesTheConnection) {
  testutil::CapturedLog log;
  ServerOptions options;
  options.drain_timeout = std::chrono::milliseconds(100);
  StartServer(options);
  RawConnection conn(server_->port());
  conn.Send(AsRecord(CallMessage(5, 1, 1500)));
  EXPECT_EQ(ClientCall(Transport::kTcp, 0, std::nullopt).status, CallStatus::kOk);
  ASSERT_EQ(g_started, 1);
  std::promise<void> done;
  asio::co_spawn(io_, server_->Shutdown(), [&](std::exception_ptr) { done.set_value(); });
  // Past the bound the connection is closed with its call unanswered.
  EXPECT_FALSE(conn.ReadRecord());
  done.get_future().wait();
  EXPECT_EQ(log.Count("rpc listener: 1 tcp connection still running 100 ms after shutdown began"),
            1u)
      << log.text();
  EXPECT_EQ(log.Count("still running"), 1u) << log.text();
  work_.reset();
  thread_.join();  // The call ends on its own (its service's shutdown would cancel it).
  server_.reset();
}

TEST(ServerPrograms, ListenerServesOnlyItsProgramsOfTheSharedDispatcher) {
  asio::io_context io;
  Dispatcher dispatcher;
  dispatcher.Register(kProg, kVers, 0, "NULL", Null);
  dispatcher.Register(kProg + 1, kVers, 0, "NULL", Null);
  ServerOptions only_first;
  only_first.programs = {kProg};
  Server first(io.get_executor(), dispatcher, only_first);
  first.Listen(asio::ip::make_address("127.0.0.1"), 0);
  first.Start();
  Client client(io.get_executor());
  for (Transport transport : {Transport::kUdp, Transport::kTcp}) {
    CallResult served = testutil::RunCoroutine(
        io, client.Call({"127.0.0.1", first.port(), transport}, kProg, kVers, 0, {}));
    EXPECT_EQ(served.status, CallStatus::kOk) << ToString(transport);
    CallResult other = testutil::RunCoroutine(
        io, client.Call({"127.0.0.1", first.port(), transport}, kProg + 1, kVers, 0, {}));
    EXPECT_EQ(other.status, CallStatus::kNotSuccess) << ToString(transport);
    EXPECT_EQ(other.accept_stat, AcceptStat::kProgUnavail) << ToString(transport);
  }
  testutil::RunCoroutine(io, first.Shutdown());
}

}  // namespace
}  // namespace nlockd::rpc
