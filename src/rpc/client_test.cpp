// SPDX-License-Identifier: Apache-2.0
#include "rpc/client.hpp"

#include <fstream>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/ip/udp.hpp>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rpc/dispatcher.hpp"
#include "rpc/server.hpp"
#include "rpc/task_gate.hpp"
#include "testutil/run_coroutine.hpp"

namespace nlockd::rpc {
namespace {

using testutil::RunCoroutine;

int drops_left = 0;

// Swallows the first `drops_left` calls, as a lossy network would, then answers.
asio::awaitable<HandlerStatus> Lossy(const CallContext&, xdr::Decoder&, xdr::Encoder& out) {
  if (drops_left > 0) {
    --drops_left;
    co_return HandlerStatus::kNoReply;
  }
  out.U32(1);
  co_return HandlerStatus::kSuccess;
}

// Answers with the source port the call came from, as the server saw it.
asio::awaitable<HandlerStatus> PeerPort(const CallContext& context, xdr::Decoder&,
                                        xdr::Encoder& out) {
  out.U32(context.peer_port);
  co_return HandlerStatus::kSuccess;
}

uint32_t SeenPort(const CallResult& result) {
  xdr::Decoder dec(result.body);
  uint32_t port = 0;
  EXPECT_TRUE(dec.U32(port, "port"));
  return port;
}

// Whether this process may bind a privileged port (root or CAP_NET_BIND_SERVICE).
bool MayBindReserved(asio::io_context& io) {
  asio::ip::udp::socket probe(io, asio::ip::udp::v4());
  return !BindReservedPort(probe, asio::ip::udp::v4());
}

uint16_t FreeUdpAndTcpPort(asio::io_context& io) {
  for (;;) {
    asio::ip::udp::socket udp(io, {asio::ip::udp::v4(), 0});
    const uint16_t port = udp.local_endpoint().port();
    asio::error_code ec;
    asio::ip::tcp::acceptor tcp(io);
    tcp.open(asio::ip::tcp::v4());
    tcp.bind({asio::ip::tcp::v4(), port}, ec);
    if (!ec) return port;
  }
}

class ClientSourcePort : public ::testing::TestWithParam<Transport> {};

TEST_P(ClientSourcePort, FixedPortIsTheOneTheReceiverSees) {
  asio::io_context io;
  Dispatcher dispatcher;
  dispatcher.Register(300000, 1, 1, "PEER_PORT", PeerPort);
  Server server(io.get_executor(), dispatcher, {});
  server.Listen(asio::ip::make_address("127.0.0.1"), 0);
  server.Start();
  Client client(io.get_executor());
  CallOptions options;
  options.source = SourcePort::Fixed(FreeUdpAndTcpPort(io));
  for (int call = 0; call < 2; ++call) {  // The port is taken again by the next call.
    CallResult result = RunCoroutine(
        io, client.Call({"127.0.0.1", server.port(), GetParam()}, 300000, 1, 1, {}, options));
    ASSERT_EQ(result.status, CallStatus::kOk) << result.detail;
    EXPECT_EQ(SeenPort(result), options.source.port);
  }
  RunCoroutine(io, server.Shutdown());
}

TEST_P(ClientSourcePort, ReservedPortIsPrivilegedWhenTheProcessMayBindOne) {
  asio::io_context io;
  Dispatcher dispatcher;
  dispatcher.Register(300000, 1, 1, "PEER_PORT", PeerPort);
  Server server(io.get_executor(), dispatcher, {});
  server.Listen(asio::ip::make_address("127.0.0.1"), 0);
  server.Start();
  Client client(io.get_executor());
  CallOptions options;
  options.source = SourcePort::Reserved();
  CallResult result = RunCoroutine(
      io, client.Call({"127.0.0.1", server.port(), GetParam()}, 300000, 1, 1, {}, options));
  ASSERT_EQ(result.status, CallStatus::kOk) << result.detail;
  if (MayBindReserved(io)) {
    EXPECT_GE(SeenPort(result), kReservedLow);
    EXPECT_LE(SeenPort(result), kReservedHigh);
  } else {
    // Without the privilege the call still goes out, from an ordinary port.
    EXPECT_GT(SeenPort(result), kReservedHigh);
  }
  RunCoroutine(io, server.Shutdown());
}

// Answers with the address the call came from, as the server saw it.
asio::awaitable<HandlerStatus> PeerAddress(const CallContext& context, xdr::Decoder&,
                                           xdr::Encoder& out) {
  out.String(context.peer_address.to_string());
  co_return HandlerStatus::kSuccess;
}

TEST_P(ClientSourcePort, SourceAddressIsTheOneTheReceiverSeesWithAnyKindOfPort) {
  asio::io_context io;
  Dispatcher dispatcher;
  dispatcher.Register(300000, 1, 2, "PEER_ADDRESS", PeerAddress);
  Server server(io.get_executor(), dispatcher, {});
  server.Listen(asio::ip::make_address("0.0.0.0"), 0);
  server.Start();
  Client client(io.get_executor());
  for (SourcePort port :
       {SourcePort::Any(), SourcePort::Reserved(), SourcePort::Fixed(FreeUdpAndTcpPort(io))}) {
    for (const char* source : {"127.0.0.2", "::ffff:127.0.0.3"}) {
      CallOptions options;
      options.source = port;
      options.source_address = asio::ip::make_address(source);
      CallResult result = RunCoroutine(
          io, client.Call({"127.0.0.1", server.port(), GetParam()}, 300000, 1, 2, {}, options));
      ASSERT_EQ(result.status, CallStatus::kOk) << result.detail;
      xdr::Decoder dec(result.body);
      std::string seen;
      ASSERT_TRUE(dec.String(seen, 64, "address"));
      EXPECT_EQ(seen, std::string(source).substr(std::string(source).rfind(':') + 1))
          << "source " << source;
    }
  }
  // An address of another family, or one that is not local, is left to the kernel.
  for (const char* source : {"::1", "192.0.2.77"}) {
    CallOptions options;
    options.source_address = asio::ip::make_address(source);
    CallResult result = RunCoroutine(
        io, client.Call({"127.0.0.1", server.port(), GetParam()}, 300000, 1, 2, {}, options));
    ASSERT_EQ(result.status, CallStatus::kOk) << source << ": " << result.detail;
  }
  RunCoroutine(io, server.Shutdown());
}

std::string TransportName(const ::testing::TestParamInfo<Transport>& transport) {
  return ToString(transport.param);
}

INSTANTIATE_TEST_SUITE_P(Transports, ClientSourcePort,
                         ::testing::Values(Transport::kUdp, Transport::kTcp), TransportName);

TEST(Client, ReservedPortBindIsRefusedWithoutThePrivilege) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to drop the privilege";
  {
    std::ifstream start("/proc/sys/net/ipv4/ip_unprivileged_port_start");
    int first_unprivileged = 1024;
    start >> first_unprivileged;
    if (first_unprivileged < 1024) GTEST_SKIP() << "every port is unprivileged here";
  }
  asio::io_context io;
  // A child without the capability: the bind must fail with a permission error, not hang.
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (setuid(65534) != 0) _exit(2);
    asio::io_context child_io;
    asio::ip::udp::socket socket(child_io, asio::ip::udp::v4());
    asio::error_code ec = BindReservedPort(socket, asio::ip::udp::v4());
    _exit(ec == asio::error::access_denied ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

TEST(Client, TcpCallToASilentListenerEndsAtItsDeadline) {
  asio::io_context io;
  asio::ip::tcp::acceptor silent(io, {asio::ip::make_address("127.0.0.1"), 0});
  Client client(io.get_executor());
  CallOptions options;
  options.deadline = std::chrono::milliseconds(200);
  auto start = std::chrono::steady_clock::now();
  CallResult result =
      RunCoroutine(io, client.Call({"127.0.0.1", silent.local_endpoint().port(), Transport::kTcp},
                                   100024, 1, 0, {}, options));
  EXPECT_EQ(result.status, CallStatus::kTimedOut);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
}

TEST(Client, UdpCallToASilentSocketEndsAtItsDeadline) {
  asio::io_context io;
  asio::ip::udp::socket silent(io, {asio::ip::make_address("127.0.0.1"), 0});
  Client client(io.get_executor());
  CallOptions options;
  options.deadline = std::chrono::milliseconds(200);
  options.udp_retry = std::chrono::milliseconds(50);
  CallResult result =
      RunCoroutine(io, client.Call({"127.0.0.1", silent.local_endpoint().port(), Transport::kUdp},
                                   100024, 1, 0, {}, options));
  EXPECT_EQ(result.status, CallStatus::kTimedOut);
}

TEST(Client, TcpCallToAClosedPortIsUnreachable) {
  asio::io_context io;
  uint16_t port = 0;
  {
    asio::ip::tcp::acceptor probe(io, {asio::ip::make_address("127.0.0.1"), 0});
    port = probe.local_endpoint().port();
  }
  Client client(io.get_executor());
  CallResult result =
      RunCoroutine(io, client.Call({"127.0.0.1", port, Transport::kTcp}, 100024, 1, 0, {}));
  EXPECT_EQ(result.status, CallStatus::kUnreachable);
}

TEST(Client, UdpRetransmitsUntilAnswered) {
  asio::io_context io;
  Dispatcher dispatcher;
  dispatcher.Register(300000, 1, 1, "LOSSY", Lossy);
  Server server(io.get_executor(), dispatcher, {});
  server.Listen(asio::ip::make_address("127.0.0.1"), 0);
  server.Start();
  drops_left = 2;
  Client client(io.get_executor());
  CallOptions options;
  options.udp_retry = std::chrono::milliseconds(20);
  CallResult result = RunCoroutine(
      io, client.Call({"127.0.0.1", server.port(), Transport::kUdp}, 300000, 1, 1, {}, options));
  EXPECT_EQ(result.status, CallStatus::kOk);
  EXPECT_EQ(drops_left, 0);
  // Not SUCCESS answers are told apart from transport failures.
  CallResult unavailable = RunCoroutine(
      io, client.Call({"127.0.0.1", server.port(), Transport::kTcp}, 300001, 1, 0, {}));
  EXPECT_EQ(unavailable.status, CallStatus::kNotSuccess);
  EXPECT_EQ(unavailable.accept_stat, AcceptStat::kProgUnavail);
  RunCoroutine(io, server.Shutdown());
}

asio::awaitable<void> CallAndKeep(Client& client, CallTarget target, CallResult& result) {
  CallOptions options;
  options.deadline = std::chrono::seconds(10);
  result = co_await client.Call(std::move(target), 100024, 1, 0, {}, options);
}

class ClientCancel : public ::testing::TestWithParam<Transport> {};

TEST_P(ClientCancel, ACancelledCallReturnsAtOnceNotAtItsDeadline) {
  asio::io_context io;
  Client client(io.get_executor());
  TaskGate gate(io.get_executor(), "test");
  // A peer that takes the call and never answers; the request reaching it cancels the gate.
  asio::ip::udp::socket udp_peer(io, {asio::ip::make_address("127.0.0.1"), 0});
  asio::ip::tcp::acceptor tcp_peer(io, {asio::ip::make_address("127.0.0.1"), 0});
  asio::ip::tcp::socket accepted(io);
  std::vector<uint8_t> request(1024);
  auto cancel_when_sent = [&gate](asio::error_code, size_t) { gate.Cancel(); };
  uint16_t port = 0;
  if (GetParam() == Transport::kUdp) {
    port = udp_peer.local_endpoint().port();
    udp_peer.async_receive(asio::buffer(request), cancel_when_sent);
  } else {
    port = tcp_peer.local_endpoint().port();
    tcp_peer.async_accept(accepted, [&](asio::error_code ec) {
      if (!ec) accepted.async_read_some(asio::buffer(request), cancel_when_sent);
    });
  }
  CallResult result;
  result.status = CallStatus::kOk;
  ASSERT_TRUE(gate.Spawn("call", [&] {
    return CallAndKeep(client, {"127.0.0.1", port, GetParam()}, result);
  }));
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(RunCoroutine(io, gate.WaitEmpty(std::chrono::seconds(5))));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  EXPECT_EQ(result.status, CallStatus::kTimedOut);
  EXPECT_NE(result.detail.find("cancelled"), std::string::npos) << result.detail;
}

INSTANTIATE_TEST_SUITE_P(Transports, ClientCancel,
                         ::testing::Values(Transport::kUdp, Transport::kTcp), TransportName);

}  // namespace
}  // namespace nlockd::rpc
