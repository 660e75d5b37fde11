// SPDX-License-Identifier: Apache-2.0
#include "nsm/notify_channel.hpp"

#include <vector>

#include <asio/bind_cancellation_slot.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <gtest/gtest.h>

#include "rpc/message.hpp"
#include "rpc/use_tuple.hpp"
#include "testutil/run_coroutine.hpp"
#include "xdr/decoder.hpp"
#include "xdr/encoder.hpp"

namespace nlockd::nsm {
namespace {

using std::chrono::milliseconds;

// A peer that drops the first datagram of each call, then answers the retransmission, first
// with a reply carrying a wrong xid and then with the right one; the result echoes the u32
// argument. Counts the datagrams it got.
asio::awaitable<void> DropFirstThenAnswer(asio::ip::udp::socket& socket, int& received) {
  std::vector<uint8_t> buffer(64 * 1024);
  asio::ip::udp::endpoint sender;
  for (;;) {
    auto [ec, n] = co_await socket.async_receive_from(asio::buffer(buffer), sender, rpc::kUseTuple);
    if (ec) co_return;
    if (++received % 2 == 1) continue;  // lost
    rpc::DecodedCall call = rpc::DecodeCall(std::span<const uint8_t>(buffer.data(), n));
    if (call.status != rpc::CallDecodeStatus::kOk) continue;
    xdr::Decoder args(call.args);
    uint32_t value = 0;
    if (!args.U32(value, "value")) continue;
    for (uint32_t xid : {call.header.xid + 1000, call.header.xid}) {
      std::vector<uint8_t> reply;
      xdr::Encoder enc(reply);
      rpc::EncodeAcceptedHeader(enc, xid, rpc::AcceptStat::kSuccess);
      enc.U32(value);
      co_await socket.async_send_to(asio::buffer(reply), sender, rpc::kUseTuple);
    }
  }
}

asio::awaitable<rpc::CallResult> CallWith(NotifyChannel& channel, asio::ip::udp::endpoint peer,
                                          uint32_t value, milliseconds deadline) {
  std::vector<uint8_t> args;
  xdr::Encoder enc(args);
  enc.U32(value);
  co_return co_await channel.Call(peer, 200001, 1, 1, std::move(args), deadline, milliseconds(50));
}

class NotifyChannelTest : public ::testing::Test {
 protected:
  NotifyChannelTest() {
    peer_.open(asio::ip::udp::v4());
    peer_.bind(asio::ip::udp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  }
  ~NotifyChannelTest() override {
    channel_.Close();
    asio::error_code ignored;
    peer_.close(ignored);
    io_.run_for(milliseconds(50));
  }

  asio::io_context io_;
  rpc::TaskGate gate_{io_.get_executor()};
  NotifyChannel channel_{io_.get_executor(), gate_};
  asio::ip::udp::socket peer_{io_};
};

TEST_F(NotifyChannelTest, RetransmitsAndMatchesTheReplyByXid) {
  int received = 0;
  asio::co_spawn(io_, DropFirstThenAnswer(peer_, received), asio::detached);
  for (uint32_t value : {7u, 8u}) {
    rpc::CallResult result = testutil::RunCoroutine(
        io_, CallWith(channel_, peer_.local_endpoint(), value, milliseconds(2000)));
    ASSERT_EQ(result.status, rpc::CallStatus::kOk) << result.detail;
    xdr::Decoder dec(result.body);
    uint32_t echoed = 0;
    ASSERT_TRUE(dec.U32(echoed, "value"));
    EXPECT_EQ(echoed, value);
  }
  EXPECT_EQ(received, 4);
}

TEST_F(NotifyChannelTest, ASilentPeerTimesOutAtTheDeadline) {
  rpc::CallResult result =
      testutil::RunCoroutine(io_, CallWith(channel_, peer_.local_endpoint(), 1, milliseconds(200)));
  EXPECT_EQ(result.status, rpc::CallStatus::kTimedOut);
}

TEST_F(NotifyChannelTest, CloseEndsCallsInFlightAndRefusesNewOnes) {
  bool done = false;
  rpc::CallResult result;
  asio::co_spawn(io_, CallWith(channel_, peer_.local_endpoint(), 1, milliseconds(10000)),
                 [&](std::exception_ptr, rpc::CallResult r) {
                   result = std::move(r);
                   done = true;
                 });
  io_.run_for(milliseconds(50));
  EXPECT_FALSE(done);
  channel_.Close();
  for (int i = 0; i < 100 && !done; ++i) {
    if (io_.stopped()) io_.restart();
    io_.run_for(milliseconds(5));
  }
  EXPECT_TRUE(done);
  EXPECT_EQ(result.status, rpc::CallStatus::kTimedOut);
  rpc::CallResult after =
      testutil::RunCoroutine(io_, CallWith(channel_, peer_.local_endpoint(), 1, milliseconds(100)));
  EXPECT_EQ(after.status, rpc::CallStatus::kUnreachable);
  EXPECT_EQ(gate_.count(), 0u);  // the receive loop ended
}

TEST_F(NotifyChannelTest, ACancelledCallEndsAtOnceAndLeavesNoWaiter) {
  // The request reaching the silent peer cancels its caller (which throws on a cancelled
  // co_await, Asio's default), while the call waits for its retransmission time.
  std::vector<uint8_t> request(1024);
  asio::cancellation_signal cancel;
  peer_.async_receive(asio::buffer(request), [&](asio::error_code, size_t) {
    EXPECT_EQ(channel_.calls_waiting(), 1u);
    cancel.emit(asio::cancellation_type::terminal);
  });
  bool done = false;
  asio::co_spawn(
      io_, CallWith(channel_, peer_.local_endpoint(), 1, milliseconds(10000)),
      asio::bind_cancellation_slot(
          cancel.slot(), [&](const std::exception_ptr&, const rpc::CallResult&) { done = true; }));
  for (int i = 0; i < 200 && !done; ++i) {
    if (io_.stopped()) io_.restart();
    io_.run_for(milliseconds(5));
  }
  EXPECT_TRUE(done);
  EXPECT_EQ(channel_.calls_waiting(), 0u);
}

// Answers every call with the source port it came from.
asio::awaitable<void> EchoSourcePort(asio::ip::udp::socket& socket) {
  std::vector<uint8_t> buffer(64 * 1024);
  asio::ip::udp::endpoint sender;
  for (;;) {
    auto [ec, n] = co_await socket.async_receive_from(asio::buffer(buffer), sender, rpc::kUseTuple);
    if (ec) co_return;
    rpc::DecodedCall call = rpc::DecodeCall(std::span<const uint8_t>(buffer.data(), n));
    if (call.status != rpc::CallDecodeStatus::kOk) continue;
    std::vector<uint8_t> reply;
    xdr::Encoder enc(reply);
    rpc::EncodeAcceptedHeader(enc, call.header.xid, rpc::AcceptStat::kSuccess);
    enc.U32(sender.port());
    co_await socket.async_send_to(asio::buffer(reply), sender, rpc::kUseTuple);
  }
}

TEST_F(NotifyChannelTest, AFixedSourcePortIsTheOneThePeerSees) {
  uint16_t fixed = 0;
  {
    asio::ip::udp::socket probe(io_, {asio::ip::udp::v4(), 0});
    fixed = probe.local_endpoint().port();
  }
  rpc::TaskGate gate(io_.get_executor());
  NotifyChannel channel(io_.get_executor(), gate, fixed);
  asio::co_spawn(io_, EchoSourcePort(peer_), asio::detached);
  for (uint32_t value : {1u, 2u}) {  // one socket for every call
    rpc::CallResult result = testutil::RunCoroutine(
        io_, CallWith(channel, peer_.local_endpoint(), value, milliseconds(2000)));
    ASSERT_EQ(result.status, rpc::CallStatus::kOk) << result.detail;
    xdr::Decoder dec(result.body);
    uint32_t seen = 0;
    ASSERT_TRUE(dec.U32(seen, "port"));
    EXPECT_EQ(seen, fixed);
  }
  channel.Close();
  io_.run_for(milliseconds(50));
}

TEST_F(NotifyChannelTest, ASourcePortInUseFallsBackToAnother) {
  asio::ip::udp::socket holder(io_, {asio::ip::udp::v4(), 0});
  rpc::TaskGate gate(io_.get_executor());
  NotifyChannel channel(io_.get_executor(), gate, holder.local_endpoint().port());
  asio::co_spawn(io_, EchoSourcePort(peer_), asio::detached);
  rpc::CallResult result =
      testutil::RunCoroutine(io_, CallWith(channel, peer_.local_endpoint(), 1, milliseconds(2000)));
  ASSERT_EQ(result.status, rpc::CallStatus::kOk) << result.detail;
  xdr::Decoder dec(result.body);
  uint32_t seen = 0;
  ASSERT_TRUE(dec.U32(seen, "port"));
  EXPECT_NE(seen, holder.local_endpoint().port());
  channel.Close();
  io_.run_for(milliseconds(50));
}

}  // namespace
}  // namespace nlockd::nsm
