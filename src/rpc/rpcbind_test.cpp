// SPDX-License-Identifier: Apache-2.0
#include "rpc/rpcbind.hpp"

#include <memory>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <asio/ip/udp.hpp>
#include <gtest/gtest.h>

#include "rpc/dispatcher.hpp"
#include "rpc/server.hpp"
#include "rpc/task_gate.hpp"
#include "testutil/run_coroutine.hpp"
#include "xdr/decoder.hpp"
#include "xdr/encoder.hpp"

namespace nlockd::rpc {
namespace {

using testutil::RunCoroutine;

asio::awaitable<HandlerStatus> Ready(HandlerStatus status) { co_return status; }

bool DecodeRpcb(xdr::Decoder& args, RpcbMapping& m) {
  return args.U32(m.program, "prog") && args.U32(m.version, "vers") &&
         args.String(m.netid, 255, "netid") && args.String(m.address, 255, "addr") &&
         args.String(m.owner, 255, "owner");
}

// An rpcbind on 127.0.0.1 with rpcbind's table rules (RFC 1833; as Debian's rpcbind keeps
// them): SET fails when (prog, vers, netid) is there at another address, UNSET with a netid
// takes that one, v2 UNSET takes tcp and udp. Serves v4 and v2, or v2 only.
class FakeRpcbind {
 public:
  FakeRpcbind(asio::io_context& io, bool v4, uint16_t port = 0)
      : server_(io.get_executor(), dispatcher_, ServerOptions{}) {
    if (v4) {
      dispatcher_.Register(kPmapProgram, kRpcbVersion4, kRpcbProcSet, "SET",
                           [this](const CallContext&, xdr::Decoder& args, xdr::Encoder& result) {
                             RpcbMapping m;
                             if (!DecodeRpcb(args, m)) return Ready(HandlerStatus::kGarbageArgs);
                             ++v4_calls;
                             result.Bool(MapSet(m));
                             return Ready(HandlerStatus::kSuccess);
                           });
      dispatcher_.Register(kPmapProgram, kRpcbVersion4, kRpcbProcUnset, "UNSET",
                           [this](const CallContext&, xdr::Decoder& args, xdr::Encoder& result) {
                             RpcbMapping m;
                             if (!DecodeRpcb(args, m)) return Ready(HandlerStatus::kGarbageArgs);
                             ++v4_calls;
                             MapUnset(m.program, m.version, m.netid);
                             result.Bool(true);
                             return Ready(HandlerStatus::kSuccess);
                           });
      dispatcher_.Register(kPmapProgram, kRpcbVersion4, kRpcbProcDump, "DUMP",
                           [this](const CallContext&, xdr::Decoder&, xdr::Encoder& result) {
                             ++v4_calls;
                             for (const auto& m : table) {
                               result.Bool(true);
                               result.U32(m.program);
                               result.U32(m.version);
                               result.String(m.netid);
                               result.String(m.address);
                               result.String(m.owner);
                             }
                             result.Bool(false);
                             return Ready(HandlerStatus::kSuccess);
                           });
    }
    dispatcher_.Register(
        kPmapProgram, kPmapVersion, kPmapProcSet, "PMAP_SET",
        [this](const CallContext&, xdr::Decoder& args, xdr::Encoder& result) {
          PmapMapping p;
          if (!DecodePmap(args, p)) return Ready(HandlerStatus::kGarbageArgs);
          ++v2_calls;
          RpcbMapping m{
              p.program, p.version, p.protocol == kIpProtoTcp ? "tcp" : "udp",
              ToUniversalAddress(asio::ip::address_v4::any(), static_cast<uint16_t>(p.port)),
              "unknown"};
          result.Bool(MapSet(m));
          return Ready(HandlerStatus::kSuccess);
        });
    dispatcher_.Register(kPmapProgram, kPmapVersion, kPmapProcUnset, "PMAP_UNSET",
                         [this](const CallContext&, xdr::Decoder& args, xdr::Encoder& result) {
                           PmapMapping p;
                           if (!DecodePmap(args, p)) return Ready(HandlerStatus::kGarbageArgs);
                           ++v2_calls;
                           MapUnset(p.program, p.version, "tcp");
                           MapUnset(p.program, p.version, "udp");
                           result.Bool(true);
                           return Ready(HandlerStatus::kSuccess);
                         });
    dispatcher_.Register(kPmapProgram, kPmapVersion, kPmapProcGetPort, "PMAP_GETPORT",
                         [this](const CallContext&, xdr::Decoder& args, xdr::Encoder& result) {
                           PmapMapping p;
                           if (!DecodePmap(args, p)) return Ready(HandlerStatus::kGarbageArgs);
                           ++v2_calls;
                           const RpcbMapping* m = Find(p.program, p.version,
                                                       p.protocol == kIpProtoTcp ? "tcp" : "udp");
                           result.U32(m ? ParseUniversalAddress(m->address)->port : 0);
                           return Ready(HandlerStatus::kSuccess);
                         });
    server_.Listen(asio::ip::make_address("127.0.0.1"), port);
    server_.Start();
  }

  uint16_t port() const { return server_.port(); }
  asio::awaitable<void> Shutdown() { co_await server_.Shutdown(); }

  const RpcbMapping* Find(uint32_t program, uint32_t version, const std::string& netid) const {
    for (const auto& m : table) {
      if (m.program == program && m.version == version && m.netid == netid) return &m;
    }
    return nullptr;
  }
  size_t Count(uint32_t program) const {
    size_t n = 0;
    for (const auto& m : table) n += m.program == program;
    return n;
  }

  std::vector<RpcbMapping> table;
  int v4_calls = 0;
  int v2_calls = 0;

 private:
  static bool DecodePmap(xdr::Decoder& args, PmapMapping& p) {
    return args.U32(p.program, "prog") && args.U32(p.version, "vers") &&
           args.U32(p.protocol, "prot") && args.U32(p.port, "port");
  }
  bool MapSet(const RpcbMapping& m) {
    if (const RpcbMapping* there = Find(m.program, m.version, m.netid)) {
      return there->address == m.address;
    }
    table.push_back(m);
    return true;
  }
  void MapUnset(uint32_t program, uint32_t version, const std::string& netid) {
    std::erase_if(table, [&](const RpcbMapping& m) {
      return m.program == program && m.version == version && (netid.empty() || m.netid == netid);
    });
  }

  Dispatcher dispatcher_;
  Server server_;
};

// A live server of (program, version) on 127.0.0.1, answering NULL: another process's service.
class OtherService {
 public:
  OtherService(asio::io_context& io, uint32_t program, uint32_t version)
      : server_(io.get_executor(), dispatcher_, ServerOptions{}) {
    dispatcher_.Register(program, version, 0, "NULL",
                         [](const CallContext&, xdr::Decoder&, xdr::Encoder&) {
                           return Ready(HandlerStatus::kSuccess);
                         });
    server_.Listen(asio::ip::make_address("127.0.0.1"), 0);
    server_.Start();
  }
  uint16_t port() const { return server_.port(); }
  asio::awaitable<void> Shutdown() { co_await server_.Shutdown(); }

 private:
  Dispatcher dispatcher_;
  Server server_;
};

// A port on 127.0.0.1 where nothing listens (bound, then closed).
uint16_t DeadPort(asio::io_context& io) {
  asio::ip::udp::socket socket(io, asio::ip::udp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  return socket.local_endpoint().port();
}

const std::vector<std::pair<uint32_t, uint32_t>> kPrograms{{100021, 4}, {100024, 1}};

RpcbindOptions FastOptions() {
  RpcbindOptions options;
  options.call_deadline = std::chrono::milliseconds(300);
  options.probe_deadline = std::chrono::milliseconds(300);
  options.first_retry = std::chrono::milliseconds(20);
  options.max_retry = std::chrono::milliseconds(100);
  options.retry_budget = std::chrono::seconds(30);
  return options;
}

class RpcbindTest : public ::testing::Test {
 protected:
  asio::io_context io_;
  Client client_{io_.get_executor()};
};

TEST(UniversalAddress, FormatsAndParsesBothFamilies) {
  EXPECT_EQ(ToUniversalAddress(asio::ip::make_address("0.0.0.0"), 4045), "0.0.0.0.15.205");
  EXPECT_EQ(ToUniversalAddress(asio::ip::make_address("::"), 111), "::.0.111");
  EXPECT_EQ(ToUniversalAddress(asio::ip::make_address("2001:db8::1"), 65535),
            "2001:db8::1.255.255");
  auto v6 = ParseUniversalAddress("::1.15.205");
  ASSERT_TRUE(v6);
  EXPECT_EQ(v6->address, asio::ip::make_address("::1"));
  EXPECT_EQ(v6->port, 4045);
  auto v4 = ParseUniversalAddress("10.0.0.1.0.111");
  ASSERT_TRUE(v4);
  EXPECT_EQ(v4->address, asio::ip::make_address("10.0.0.1"));
  EXPECT_EQ(v4->port, 111);
}

TEST(UniversalAddress, RefusesGarbage) {
  for (const char* text :
       {"", ".", "..", "1.2", "0.0.0.0.256.1", "0.0.0.0.1.-1", "0.0.0.0.1.", "host.1.2",
        "/run/rpcbind.sock", "0.0.0.0..1", "::.1.2x", "0.0.0.0.99999999999999999999.1"}) {
    EXPECT_FALSE(ParseUniversalAddress(text)) << text;
  }
}

TEST_F(RpcbindTest, RegistersTcpUdpAndIpv6NetidsWithV4AndUnregisters) {
  FakeRpcbind rpcbind(io_, true);
  RpcbindRegistration registration(client_, "127.0.0.1", rpcbind.port(), FastOptions());
  RpcbindListener listener{asio::ip::make_address("::"), 4045};
  EXPECT_TRUE(RunCoroutine(io_, registration.Register(kPrograms, listener)));
  ASSERT_EQ(rpcbind.table.size(), 8u);
  for (const char* netid : {"tcp", "udp", "tcp6", "udp6"}) {
    const RpcbMapping* m = rpcbind.Find(100021, 4, netid);
    ASSERT_TRUE(m) << netid;
    EXPECT_EQ(m->address, std::string(netid).ends_with('6') ? "::.15.205" : "0.0.0.0.15.205");
    EXPECT_EQ(m->owner, RpcbindOwner());
  }
  EXPECT_EQ(rpcbind.v2_calls, 0);
  RunCoroutine(io_, registration.Unregister());
  EXPECT_TRUE(rpcbind.table.empty());
  RunCoroutine(io_, rpcbind.Shutdown());
}

TEST_F(RpcbindTest, AnIpv4ListenerRegistersTcpAndUdpOnly) {
  FakeRpcbind rpcbind(io_, true);
  RpcbindRegistration registration(client_, "127.0.0.1", rpcbind.port(), FastOptions());
  EXPECT_TRUE(RunCoroutine(io_, registration.Register(kPrograms, uint16_t{4045})));
  EXPECT_EQ(rpcbind.table.size(), 4u);
  EXPECT_FALSE(rpcbind.Find(100024, 1, "udp6"));
  RunCoroutine(io_, rpcbind.Shutdown());
}

TEST_F(RpcbindTest, FallsBackToPmapV2WhenRpcbindDoesNotSpeakV4) {
  FakeRpcbind rpcbind(io_, false);
  RpcbindRegistration registration(client_, "127.0.0.1", rpcbind.port(), FastOptions());
  RpcbindListener listener{asio::ip::make_address("::"), 4045};
  EXPECT_TRUE(RunCoroutine(io_, registration.Register(kPrograms, listener)));
  EXPECT_EQ(rpcbind.table.size(), 4u);  // No tcp6/udp6 in PMAP v2.
  EXPECT_TRUE(rpcbind.Find(100021, 4, "tcp"));
  EXPECT_TRUE(rpcbind.Find(100024, 1, "udp"));
  RunCoroutine(io_, registration.Unregister());
  EXPECT_TRUE(rpcbind.table.empty());
  RunCoroutine(io_, rpcbind.Shutdown());
}

TEST_F(RpcbindTest, LeavesAMappingThatALiveProcessHolds) {
  for (bool v4 : {true, false}) {
    SCOPED_TRACE(v4 ? "v4" : "v2");
    FakeRpcbind rpcbind(io_, v4);
    OtherService statd(io_, 100024, 1);
    std::string theirs = ToUniversalAddress(asio::ip::address_v4::any(), statd.port());
    rpcbind.table.push_back({100024, 1, "tcp", theirs, "superuser"});
    rpcbind.table.push_back({100024, 1, "udp", theirs, "superuser"});
    RpcbindRegistration registration(client_, "127.0.0.1", rpcbind.port(), FastOptions());
    EXPECT_FALSE(RunCoroutine(io_, registration.Register(kPrograms, uint16_t{4045})));
    EXPECT_EQ(rpcbind.Find(100024, 1, "tcp")->address, theirs);
    EXPECT_EQ(rpcbind.Find(100024, 1, "udp")->address, theirs);
    EXPECT_TRUE(rpcbind.Find(100021, 4, "tcp"));  // The rest is registered.
    RunCoroutine(io_, registration.Unregister());
    EXPECT_EQ(rpcbind.Count(100021), 0u);
    ASSERT_EQ(rpcbind.Count(100024), 2u);
    EXPECT_EQ(rpcbind.Find(100024, 1, "udp")->address, theirs);
    RunCoroutine(io_, statd.Shutdown());
    RunCoroutine(io_, rpcbind.Shutdown());
  }
}

TEST_F(RpcbindTest, ReplacesAMappingWhereNothingAnswers) {
  for (bool v4 : {true, false}) {
    SCOPED_TRACE(v4 ? "v4" : "v2");
    FakeRpcbind rpcbind(io_, v4);
    std::string stale = ToUniversalAddress(asio::ip::address_v4::any(), DeadPort(io_));
    rpcbind.table.push_back({100021, 4, "tcp", stale, "unknown"});
    rpcbind.table.push_back({100021, 4, "udp", stale, "unknown"});
    RpcbindRegistration registration(client_, "127.0.0.1", rpcbind.port(), FastOptions());
    EXPECT_TRUE(RunCoroutine(io_, registration.Register(kPrograms, uint16_t{4045})));
    EXPECT_EQ(rpcbind.Find(100021, 4, "tcp")->address, "0.0.0.0.15.205");
    EXPECT_EQ(rpcbind.Find(100021, 4, "udp")->address, "0.0.0.0.15.205");
    RunCoroutine(io_, rpcbind.Shutdown());
  }
}

TEST_F(RpcbindTest, UnregisterLeavesAMappingThatChangedHands) {
  for (bool v4 : {true, false}) {
    SCOPED_TRACE(v4 ? "v4" : "v2");
    FakeRpcbind rpcbind(io_, v4);
    RpcbindRegistration registration(client_, "127.0.0.1", rpcbind.port(), FastOptions());
    EXPECT_TRUE(RunCoroutine(io_, registration.Register(kPrograms, uint16_t{4045})));
    // Someone else took statd's entries over (rpcbind restarted, another statd registered).
    std::erase_if(rpcbind.table, [](const RpcbMapping& m) { return m.program == 100024; });
    rpcbind.table.push_back({100024, 1, "tcp", "0.0.0.0.3.7", "superuser"});
    rpcbind.table.push_back({100024, 1, "udp", "0.0.0.0.3.7", "superuser"});
    RunCoroutine(io_, registration.Unregister());
    EXPECT_EQ(rpcbind.Count(100021), 0u);
    EXPECT_EQ(rpcbind.Count(100024), 2u);
    RunCoroutine(io_, rpcbind.Shutdown());
  }
}

// rpcbind's port is silent at first (bound, never answering), then a real one takes it.
TEST_F(RpcbindTest, RetriesUntilRpcbindComesUp) {
  auto silent = std::make_unique<asio::ip::udp::socket>(
      io_, asio::ip::udp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  uint16_t port = silent->local_endpoint().port();
  RpcbindRegistration registration(client_, "127.0.0.1", port, FastOptions());
  std::optional<bool> registered;
  asio::co_spawn(io_, registration.Register(kPrograms, uint16_t{4045}),
                 [&](std::exception_ptr, bool ok) { registered = ok; });
  // Two calls received: the first attempt (v4, then v2) failed and was logged.
  std::array<uint8_t, 2048> buffer;
  asio::ip::udp::endpoint from;
  int received = 0;
  bool receiving = false;
  while (received < 2) {
    if (!receiving) {
      receiving = true;
      silent->async_receive_from(asio::buffer(buffer), from, [&](asio::error_code ec, size_t) {
        receiving = false;
        received += !ec;
      });
    }
    io_.run_one();
  }
  EXPECT_FALSE(registered);
  silent.reset();
  FakeRpcbind rpcbind(io_, true, port);
  while (!registered) io_.run_one();
  EXPECT_TRUE(*registered);
  EXPECT_EQ(rpcbind.table.size(), 4u);
  RunCoroutine(io_, registration.Unregister());
  EXPECT_TRUE(rpcbind.table.empty());
  RunCoroutine(io_, rpcbind.Shutdown());
}

TEST_F(RpcbindTest, UnregisterStopsTheRetries) {
  uint16_t port = DeadPort(io_);
  RpcbindRegistration registration(client_, "127.0.0.1", port, FastOptions());
  std::optional<bool> registered;
  asio::co_spawn(io_, registration.Register(kPrograms, uint16_t{4045}),
                 [&](std::exception_ptr, bool ok) { registered = ok; });
  io_.run_one();
  RunCoroutine(io_, registration.Unregister());
  EXPECT_EQ(registered, false);
}

asio::awaitable<void> RegisterInto(RpcbindRegistration& registration,
                                   std::optional<bool>& registered) {
  registered = co_await registration.Register(kPrograms, uint16_t{4045});
}

TEST_F(RpcbindTest, ACancelledRegistrationGivesUpInsteadOfWaitingToRetry) {
  RpcbindOptions options = FastOptions();
  options.first_retry = std::chrono::seconds(20);
  RpcbindRegistration registration(client_, "127.0.0.1", DeadPort(io_), options);
  TaskGate gate(io_.get_executor(), "test");
  std::optional<bool> registered;
  ASSERT_TRUE(gate.Spawn("register", [&] { return RegisterInto(registration, registered); }));
  EXPECT_TRUE(RunCoroutine(io_, gate.CancelAndWait(std::chrono::seconds(5))));
  EXPECT_EQ(registered, false);
}

TEST_F(RpcbindTest, GivesUpAfterTheBudget) {
  RpcbindOptions options = FastOptions();
  options.retry_budget = std::chrono::milliseconds(100);
  RpcbindRegistration registration(client_, "127.0.0.1", DeadPort(io_), options);
  EXPECT_FALSE(RunCoroutine(io_, registration.Register(kPrograms, uint16_t{4045})));
}

TEST(PortCache, KeepsAPortUntilForgottenOrTooOld) {
  PortCache cache(/*limit=*/2, std::chrono::seconds(10));
  const auto t0 = std::chrono::steady_clock::time_point{} + std::chrono::hours(1);
  PortCache::Key nlm{"127.0.0.1", 111, 100021, 4, kIpProtoUdp};
  EXPECT_FALSE(cache.Find(nlm, t0));
  cache.Put(nlm, 4045, t0);
  EXPECT_EQ(cache.Find(nlm, t0 + std::chrono::seconds(9)), std::optional<uint16_t>(4045));
  EXPECT_FALSE(cache.Find(nlm, t0 + std::chrono::seconds(10)));  // too old: ask again
  cache.Forget(nlm);
  EXPECT_FALSE(cache.Find(nlm, t0));
}

TEST(PortCache, ForgetHostDropsOnlyThatHostsPorts) {
  PortCache cache;
  const auto t0 = std::chrono::steady_clock::time_point{} + std::chrono::hours(1);
  PortCache::Key a4{"10.0.0.1", 111, 100021, 4, kIpProtoUdp};
  PortCache::Key a4tcp{"10.0.0.1", 111, 100021, 4, kIpProtoTcp};
  PortCache::Key a1{"10.0.0.1", 111, 100021, 1, kIpProtoUdp};
  PortCache::Key b4{"10.0.0.10", 111, 100021, 4, kIpProtoUdp};
  PortCache::Key c4{"10.0.0.0", 111, 100021, 4, kIpProtoUdp};
  for (const auto& key : {a4, a4tcp, a1, b4, c4}) cache.Put(key, 4045, t0);
  cache.ForgetHost("10.0.0.1");
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_FALSE(cache.Find(a4, t0));
  EXPECT_FALSE(cache.Find(a4tcp, t0));
  EXPECT_FALSE(cache.Find(a1, t0));
  EXPECT_TRUE(cache.Find(b4, t0));
  EXPECT_TRUE(cache.Find(c4, t0));
  cache.ForgetHost("10.0.0.99");  // nothing kept for it
  EXPECT_EQ(cache.size(), 2u);
}

TEST(PortCache, TheOldestEntryGoesAtTheLimit) {
  PortCache cache(/*limit=*/2, std::chrono::seconds(10));
  const auto t0 = std::chrono::steady_clock::time_point{} + std::chrono::hours(1);
  PortCache::Key a{"10.0.0.1", 111, 100021, 4, kIpProtoUdp};
  PortCache::Key b{"10.0.0.2", 111, 100021, 4, kIpProtoUdp};
  PortCache::Key c{"10.0.0.3", 111, 100021, 4, kIpProtoUdp};
  cache.Put(a, 1001, t0);
  cache.Put(b, 1002, t0 + std::chrono::milliseconds(1));
  cache.Put(c, 1003, t0 + std::chrono::milliseconds(2));
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_FALSE(cache.Find(a, t0));
  EXPECT_TRUE(cache.Find(b, t0));
  EXPECT_TRUE(cache.Find(c, t0));
}

TEST_F(RpcbindTest, CachedGetPortAsksThePortmapperOnceUntilForgotten) {
  FakeRpcbind rpcbind(io_, true);
  rpcbind.table.push_back(
      RpcbMapping{100021, 4, "udp", ToUniversalAddress(asio::ip::address_v4::any(), 4045), ""});
  PortCache cache;
  PortCache::Key key{"127.0.0.1", rpcbind.port(), 100021, 4, kIpProtoUdp};
  bool cached = true;
  auto ask = [&] {
    return CachedGetPort(cache, client_, key, std::chrono::milliseconds(500), cached);
  };
  EXPECT_EQ(RunCoroutine(io_, ask()), std::optional<uint16_t>(4045));
  EXPECT_FALSE(cached);
  EXPECT_EQ(rpcbind.v2_calls, 1);
  EXPECT_EQ(RunCoroutine(io_, ask()), std::optional<uint16_t>(4045));
  EXPECT_TRUE(cached);
  EXPECT_EQ(rpcbind.v2_calls, 1);  // no GETPORT for the second callback
  // A call to the port failed: the registrant moved to another port.
  cache.Forget(key);
  rpcbind.table.back().address = ToUniversalAddress(asio::ip::address_v4::any(), 4046);
  EXPECT_EQ(RunCoroutine(io_, ask()), std::optional<uint16_t>(4046));
  EXPECT_FALSE(cached);
  EXPECT_EQ(rpcbind.v2_calls, 2);
  // An unregistered program is not remembered.
  PortCache::Key other{"127.0.0.1", rpcbind.port(), 100024, 1, kIpProtoUdp};
  EXPECT_EQ(RunCoroutine(
                io_, CachedGetPort(cache, client_, other, std::chrono::milliseconds(500), cached)),
            std::optional<uint16_t>(0));
  EXPECT_FALSE(cache.Find(other, std::chrono::steady_clock::now()));
  RunCoroutine(io_, rpcbind.Shutdown());
}

}  // namespace
}  // namespace nlockd::rpc
