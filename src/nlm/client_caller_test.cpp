// SPDX-License-Identifier: Apache-2.0
#include "nlm/client_caller.hpp"

#include <memory>

#include <asio/io_context.hpp>
#include <asio/ip/udp.hpp>
#include <gtest/gtest.h>

#include "nlm/wire.hpp"
#include "rpc/dispatcher.hpp"
#include "rpc/server.hpp"
#include "testutil/run_coroutine.hpp"
#include "xdr/decoder.hpp"
#include "xdr/encoder.hpp"

namespace nlockd::nlm {
namespace {

using testutil::RunCoroutine;

asio::awaitable<rpc::HandlerStatus> Ready(rpc::HandlerStatus status) { co_return status; }

constexpr uint32_t kGrantedProc = 5;  // NLM4_GRANTED

// A client host's portmapper on 127.0.0.1: answers PMAP GETPORT for NLM 4 with `nlm_port`
// (0 when unset) and counts the questions.
class FakePortmapper {
 public:
  explicit FakePortmapper(asio::io_context& io)
      : server_(io.get_executor(), dispatcher_, rpc::ServerOptions{}) {
    dispatcher_.Register(rpc::kPmapProgram, rpc::kPmapVersion, rpc::kPmapProcGetPort,
                         "PMAP_GETPORT",
                         [this](const rpc::CallContext&, xdr::Decoder& args, xdr::Encoder& result) {
                           uint32_t program = 0, version = 0, protocol = 0, port = 0;
                           if (!args.U32(program, "prog") || !args.U32(version, "vers") ||
                               !args.U32(protocol, "prot") || !args.U32(port, "port")) {
                             return Ready(rpc::HandlerStatus::kGarbageArgs);
                           }
                           ++getports;
                           result.U32(program == NLM_PROG && version == 4 ? nlm_port : 0);
                           return Ready(rpc::HandlerStatus::kSuccess);
                         });
    server_.Listen(asio::ip::make_address("127.0.0.1"), 0);
    server_.Start();
  }
  uint16_t port() const { return server_.port(); }
  asio::awaitable<void> Shutdown() { co_await server_.Shutdown(); }

  uint16_t nlm_port = 0;
  int getports = 0;

 private:
  rpc::Dispatcher dispatcher_;
  rpc::Server server_;
};

// The client's lockd: takes NLM4_GRANTED and counts the calls.
class FakeLockd {
 public:
  explicit FakeLockd(asio::io_context& io)
      : server_(io.get_executor(), dispatcher_, rpc::ServerOptions{}) {
    dispatcher_.Register(NLM_PROG, 4, kGrantedProc, "GRANTED",
                         [this](const rpc::CallContext&, xdr::Decoder&, xdr::Encoder& result) {
                           ++granted;
                           result.U32(0);
                           return Ready(rpc::HandlerStatus::kSuccess);
                         });
    server_.Listen(asio::ip::make_address("127.0.0.1"), 0);
    server_.Start();
  }
  uint16_t port() const { return server_.port(); }
  asio::awaitable<void> Shutdown() { co_await server_.Shutdown(); }

  int granted = 0;

 private:
  rpc::Dispatcher dispatcher_;
  rpc::Server server_;
};

class ClientCallerTest : public ::testing::Test {
 protected:
  ClientCallerTest() : caller_(client_, Options()) {}

  RpcClientCallerOptions Options() {
    RpcClientCallerOptions options;
    options.rpcbind_port = portmapper_.port();
    return options;
  }

  rpc::CallResult Granted(std::optional<uint16_t> port = std::nullopt) {
    ClientAddress where{asio::ip::make_address("127.0.0.1"), port, rpc::Transport::kUdp,
                        std::nullopt};
    return RunCoroutine(io_,
                        caller_.Call(where, 4, kGrantedProc, {}, std::chrono::milliseconds(2000)));
  }

  asio::io_context io_;
  rpc::Client client_{io_.get_executor()};
  FakePortmapper portmapper_{io_};
  RpcClientCaller caller_;
};

TEST_F(ClientCallerTest, AsksTheClientsPortmapperOnceForManyCallbacks) {
  FakeLockd lockd(io_);
  portmapper_.nlm_port = lockd.port();
  for (int i = 0; i < 3; ++i) EXPECT_EQ(Granted().status, rpc::CallStatus::kOk);
  EXPECT_EQ(lockd.granted, 3);
  EXPECT_EQ(portmapper_.getports, 1);
  EXPECT_EQ(caller_.cached_ports(), 1u);
  RunCoroutine(io_, lockd.Shutdown());
  RunCoroutine(io_, portmapper_.Shutdown());
}

TEST_F(ClientCallerTest, AsksAgainWhenTheCachedPortRefuses) {
  auto first = std::make_unique<FakeLockd>(io_);
  portmapper_.nlm_port = first->port();
  EXPECT_EQ(Granted().status, rpc::CallStatus::kOk);
  // The client's lockd restarted on another port; nothing listens at the old one.
  RunCoroutine(io_, first->Shutdown());
  first.reset();
  FakeLockd second(io_);
  portmapper_.nlm_port = second.port();
  EXPECT_EQ(Granted().status, rpc::CallStatus::kOk);
  EXPECT_EQ(second.granted, 1);
  EXPECT_EQ(portmapper_.getports, 2);
  RunCoroutine(io_, second.Shutdown());
  RunCoroutine(io_, portmapper_.Shutdown());
}

TEST_F(ClientCallerTest, ForgetHostMakesTheNextCallbackAskAgain) {
  FakeLockd lockd(io_);
  portmapper_.nlm_port = lockd.port();
  EXPECT_EQ(Granted().status, rpc::CallStatus::kOk);
  caller_.ForgetHost(asio::ip::make_address("127.0.0.2"));  // another host: kept
  EXPECT_EQ(caller_.cached_ports(), 1u);
  caller_.ForgetHost(asio::ip::make_address("127.0.0.1"));
  EXPECT_EQ(caller_.cached_ports(), 0u);
  EXPECT_EQ(Granted().status, rpc::CallStatus::kOk);
  EXPECT_EQ(portmapper_.getports, 2);
  EXPECT_EQ(lockd.granted, 2);
  RunCoroutine(io_, lockd.Shutdown());
  RunCoroutine(io_, portmapper_.Shutdown());
}

TEST_F(ClientCallerTest, UnregisteredNlmIsNotKeptAndAKnownPortSkipsThePortmapper) {
  EXPECT_EQ(Granted().status, rpc::CallStatus::kNotSuccess);
  EXPECT_EQ(caller_.cached_ports(), 0u);
  FakeLockd lockd(io_);
  EXPECT_EQ(Granted(lockd.port()).status, rpc::CallStatus::kOk);  // a _MSG's source port
  EXPECT_EQ(portmapper_.getports, 1);
  EXPECT_EQ(lockd.granted, 1);
  RunCoroutine(io_, lockd.Shutdown());
  RunCoroutine(io_, portmapper_.Shutdown());
}

}  // namespace
}  // namespace nlockd::nlm
