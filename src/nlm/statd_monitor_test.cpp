// SPDX-License-Identifier: Apache-2.0
#include "nlm/statd_monitor.hpp"

#include <string>
#include <vector>

#include <asio/io_context.hpp>
#include <gtest/gtest.h>
#include <unistd.h>

#include "rpc/dispatcher.hpp"
#include "rpc/server.hpp"
#include "testutil/run_coroutine.hpp"

namespace nlockd::nlm {
namespace {

using testutil::RunCoroutine;

// What the fake statd was asked.
struct SmMonCall {
  std::string mon_name;
  std::string my_name;
  int32_t prog = 0;
  int32_t vers = 0;
  int32_t proc = 0;
  std::array<uint8_t, 16> priv{};
  uint16_t source_port = 0;
};

class FakeLocal final : public HostMonitor {
 public:
  asio::awaitable<bool> Monitor(MonitorRequest request) override {
    requests.push_back(request);
    co_return true;
  }
  std::vector<MonitorRequest> requests;
};

// A portmapper and a status monitor on one port: GETPORT(100024) answers `statd_port`, SM_MON
// answers `stat`.
class FakeStatd {
 public:
  explicit FakeStatd(asio::io_context& io) : server_(io.get_executor(), dispatcher_, {}) {
    dispatcher_.Register(100000, 2, 3, "GETPORT",
                         [this](const rpc::CallContext& context, xdr::Decoder& in,
                                xdr::Encoder& out) { return GetPort(context, in, out); });
    dispatcher_.Register(100024, 1, 2, "SM_MON",
                         [this](const rpc::CallContext& context, xdr::Decoder& in,
                                xdr::Encoder& out) { return Mon(context, in, out); });
    server_.Listen(asio::ip::make_address("127.0.0.1"), 0);
    server_.Start();
  }
  uint16_t port() const { return server_.port(); }
  rpc::Server& server() { return server_; }

  bool statd_registered = true;
  int32_t stat = 0;
  std::vector<SmMonCall> calls;

 private:
  asio::awaitable<rpc::HandlerStatus> GetPort(const rpc::CallContext&, xdr::Decoder&,
                                              xdr::Encoder& out) {
    out.U32(statd_registered ? server_.port() : 0);
    co_return rpc::HandlerStatus::kSuccess;
  }

  asio::awaitable<rpc::HandlerStatus> Mon(const rpc::CallContext& context, xdr::Decoder& in,
                                          xdr::Encoder& out) {
    SmMonCall call;
    call.source_port = context.peer_port;
    if (!in.String(call.mon_name, 1024, "mon_name") || !in.String(call.my_name, 1024, "my_name") ||
        !in.I32(call.prog, "prog") || !in.I32(call.vers, "vers") || !in.I32(call.proc, "proc") ||
        !in.FixedOpaque(call.priv, "priv")) {
      co_return rpc::HandlerStatus::kGarbageArgs;
    }
    calls.push_back(call);
    out.I32(stat);
    out.I32(7);
    co_return rpc::HandlerStatus::kSuccess;
  }

  rpc::Dispatcher dispatcher_;
  rpc::Server server_;
};

class StatdMonitorTest : public ::testing::Test {
 protected:
  StatdMonitorTest()
      : statd_(io_),
        client_(io_.get_executor()),
        monitor_(client_, local_, StatdMonitorOptions{"server-1", "127.0.0.1", statd_.port()}) {}
  ~StatdMonitorTest() override { RunCoroutine(io_, statd_.server().Shutdown()); }

  bool Monitor() {
    return RunCoroutine(io_, monitor_.Monitor(MonitorRequest{
                                 "192.0.2.7", "client-7", asio::ip::make_address("192.0.2.7"), 3}));
  }

  asio::io_context io_;
  FakeStatd statd_;
  rpc::Client client_;
  FakeLocal local_;
  StatdMonitor monitor_;
};

TEST_F(StatdMonitorTest, AsksStatdToCallNlmProcedure16BackWithTheHostKeyThenRecordsIt) {
  ASSERT_TRUE(Monitor());
  ASSERT_EQ(statd_.calls.size(), 1u);
  const SmMonCall& call = statd_.calls[0];
  EXPECT_EQ(call.mon_name, "192.0.2.7");
  EXPECT_EQ(call.my_name, "server-1");
  EXPECT_EQ(call.prog, 100021);
  EXPECT_EQ(call.vers, 4);
  EXPECT_EQ(call.proc, 16);
  EXPECT_EQ((std::vector<uint8_t>(call.priv.begin(), call.priv.begin() + 4)),
            (std::vector<uint8_t>{192, 0, 2, 7}));
  // From a privileged port when the process may bind one, as a kernel lockd calls.
  if (geteuid() == 0) {
    EXPECT_LT(call.source_port, 1024);
  }
  ASSERT_EQ(local_.requests.size(), 1u);
  EXPECT_EQ(local_.requests[0].host, "192.0.2.7");
}

TEST_F(StatdMonitorTest, StatFailOrNoStatdMeansNotMonitored) {
  statd_.stat = 1;  // stat_fail
  EXPECT_FALSE(Monitor());
  statd_.stat = 0;
  statd_.statd_registered = false;
  EXPECT_FALSE(Monitor());
  EXPECT_TRUE(local_.requests.empty());
  EXPECT_EQ(monitor_.failures(), 2u);
}

TEST(StatdMonitorWire, EncodesIpv6AddressWholeInPriv) {
  std::vector<uint8_t> args = EncodeSmMon("h", "me", asio::ip::make_address("2001:db8::1"));
  // mon_name "h" (4 + 4), my_name "me" (4 + 4), three ints (12), priv (16).
  ASSERT_EQ(args.size(), 44u);
  EXPECT_EQ(args[28], 0x20);
  EXPECT_EQ(args[29], 0x01);
  EXPECT_EQ(args[43], 0x01);
}

}  // namespace
}  // namespace nlockd::nlm
