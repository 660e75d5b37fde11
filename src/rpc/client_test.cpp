#include "rpc/client.hpp"

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/ip/udp.hpp>
#include <gtest/gtest.h>

#include "rpc/dispatcher.hpp"
#include "rpc/server.hpp"
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

TEST(Client, TcpCallToASilentListenerEndsAtItsDeadline) {
  asio::io_context io;
  asio::ip::tcp::acceptor silent(io, {asio::ip::make_address("127.0.0.1"), 0});
  Client client(io.get_executor());
  CallOptions options;
  options.deadline = std::chrono::milliseconds(200);
  auto start = std::chrono::steady_clock::now();
  CallResult result = RunCoroutine(
      io, client.Call({"127.0.0.1", silent.local_endpoint().port(), Transport::kTcp}, 100024, 1,
                      0, {}, options));
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
  CallResult result = RunCoroutine(
      io, client.Call({"127.0.0.1", silent.local_endpoint().port(), Transport::kUdp}, 100024, 1,
                      0, {}, options));
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

}  // namespace
}  // namespace nlockd::rpc
