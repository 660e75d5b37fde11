// SPDX-License-Identifier: Apache-2.0
#include "nsm/notifier.hpp"

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/ip/udp.hpp>
#include <gtest/gtest.h>

#include "nsm/wire.hpp"
#include "rpc/client.hpp"
#include "rpc/dispatcher.hpp"
#include "rpc/rpcbind.hpp"
#include "rpc/server.hpp"
#include "rpc/use_tuple.hpp"
#include "store/memory/memory_store.hpp"
#include "testutil/captured_log.hpp"
#include "testutil/run_coroutine.hpp"

namespace nlockd::nsm {
namespace {

using std::chrono::milliseconds;

asio::awaitable<rpc::HandlerStatus> Ready(rpc::HandlerStatus status) { co_return status; }

// What a peer's statd got.
struct Received {
  std::string peer;  // the address it was sent to
  std::string mon_name;
  int32_t state = 0;
  rpc::Transport transport = rpc::Transport::kUdp;
};

// One loopback "host": its statd (an rpc::Server answering SM_NOTIFY) and its rpcbind (an
// rpc::Server answering GETPORT for 100024 with the ports it is told).
class Peer {
 public:
  Peer(asio::any_io_executor executor, std::string address, std::vector<Received>& log)
      : address_(std::move(address)),
        statd_(executor, statd_dispatcher_, rpc::ServerOptions{}),
        rpcbind_(executor, rpcbind_dispatcher_, rpc::ServerOptions{}) {
    statd_dispatcher_.Register(
        SM_PROG, SM_VERS, SM_NOTIFY, "SM_NOTIFY",
        [this, &log](const rpc::CallContext& context, xdr::Decoder& args, xdr::Encoder&) {
          stat_chge change;
          if (!Decode(args, change)) return Ready(rpc::HandlerStatus::kGarbageArgs);
          log.push_back(Received{address_, change.mon_name, change.state, context.transport});
          return Ready(rpc::HandlerStatus::kSuccess);
        });
    rpcbind_dispatcher_.Register(
        rpc::kPmapProgram, rpc::kPmapVersion, rpc::kPmapProcGetPort, "GETPORT",
        [this](const rpc::CallContext&, xdr::Decoder& args, xdr::Encoder& result) {
          uint32_t program = 0, version = 0, protocol = 0, port = 0;
          if (!args.U32(program, "prog") || !args.U32(version, "vers") ||
              !args.U32(protocol, "prot") || !args.U32(port, "port")) {
            return Ready(rpc::HandlerStatus::kGarbageArgs);
          }
          ++getport_calls;
          uint16_t answer = 0;
          if (program == SM_PROG && version == SM_VERS) {
            answer = protocol == rpc::kIpProtoUdp ? udp_port : tcp_port;
          }
          result.U32(answer);
          return Ready(rpc::HandlerStatus::kSuccess);
        });
  }

  void ListenStatd(uint16_t port) {
    statd_.Listen(asio::ip::make_address(address_), port);
    statd_.Start();
    udp_port = statd_.port();
    tcp_port = statd_.port();
  }
  void ListenRpcbind(uint16_t port) {
    rpcbind_.Listen(asio::ip::make_address(address_), port);
    rpcbind_.Start();
  }
  asio::awaitable<void> Shutdown() {
    co_await statd_.Shutdown();
    co_await rpcbind_.Shutdown();
  }

  const std::string& address() const { return address_; }
  uint16_t statd_port() const { return statd_.port(); }
  uint16_t rpcbind_port() const { return rpcbind_.port(); }

  uint16_t udp_port = 0;  // what GETPORT answers; 0 = not registered
  uint16_t tcp_port = 0;
  int getport_calls = 0;

 private:
  std::string address_;
  rpc::Dispatcher statd_dispatcher_;
  rpc::Dispatcher rpcbind_dispatcher_;
  rpc::Server statd_;
  rpc::Server rpcbind_;
};

// Accepts TCP connections and never reads or answers.
asio::awaitable<void> AcceptAndStaySilent(asio::ip::tcp::acceptor& acceptor,
                                          std::vector<asio::ip::tcp::socket>& held) {
  for (;;) {
    auto [ec, socket] = co_await acceptor.async_accept(rpc::kUseTuple);
    if (ec) co_return;
    held.push_back(std::move(socket));
  }
}

class NotifierTest : public ::testing::Test {
 protected:
  NotifierTest() : store_(store::StoreOptions{}), client_(io_.get_executor()) {}

  ~NotifierTest() override {
    if (notifier_) testutil::RunCoroutine(io_, notifier_->Shutdown());
    for (auto& peer : peers_) testutil::RunCoroutine(io_, peer->Shutdown());
    asio::error_code ignored;
    silent_acceptor_.close(ignored);
    io_.run_for(milliseconds(50));
  }

  // Peers answering on 127.0.0.2, .3, ...: statd on one port, rpcbind on another, both the same
  // on every address.
  void StartPeers(int count) {
    for (int i = 0; i < count; ++i) {
      auto peer =
          std::make_unique<Peer>(io_.get_executor(), "127.0.0." + std::to_string(2 + i), received_);
      peer->ListenStatd(peers_.empty() ? 0 : peers_[0]->statd_port());
      peer->ListenRpcbind(peers_.empty() ? 0 : peers_[0]->rpcbind_port());
      peers_.push_back(std::move(peer));
    }
  }
  uint16_t rpcbind_port() const { return peers_.at(0)->rpcbind_port(); }

  // An rpcbind that receives and never answers (127.0.0.100 unless told).
  void StartSilentUdpPeer(const std::string& address = "127.0.0.100") {
    silent_udp_.emplace_back(
        io_, asio::ip::udp::endpoint(asio::ip::make_address(address), rpcbind_port()));
  }

  // 127.0.0.101: its rpcbind lists statd on TCP only, and that listener accepts and is silent.
  void StartSilentTcpPeer() {
    auto peer = std::make_unique<Peer>(io_.get_executor(), "127.0.0.101", received_);
    peer->ListenRpcbind(rpcbind_port());
    asio::ip::tcp::endpoint endpoint(asio::ip::make_address("127.0.0.101"), 0);
    silent_acceptor_.open(endpoint.protocol());
    silent_acceptor_.bind(endpoint);
    silent_acceptor_.listen();
    peer->udp_port = 0;
    peer->tcp_port = silent_acceptor_.local_endpoint().port();
    asio::co_spawn(io_, AcceptAndStaySilent(silent_acceptor_, silent_held_), asio::detached);
    peers_.push_back(std::move(peer));
  }

  void MakeNotifier(NotifierOptions options) {
    if (options.rpcbind_port == 111 && !peers_.empty()) options.rpcbind_port = rpcbind_port();
    notifier_ = std::make_unique<Notifier>(io_.get_executor(), client_, store_, clock_, options);
    notifier_->set_on_answered([this](const std::string& name) { answered_.push_back(name); });
    notifier_->set_on_given_up([this](const std::string& name) { given_up_.push_back(name); });
    notifier_->set_on_attempt([this](const NotifyAttemptReport& report) {
      attempts_.push_back(Attempt{report.mon_name, report.outcome, report.duration});
    });
  }

  struct Attempt {
    std::string mon_name;
    NotifyAttemptReport::Outcome outcome;
    Clock::duration duration;
  };
  size_t CountAttempts(NotifyAttemptReport::Outcome outcome) const {
    return static_cast<size_t>(
        std::count_if(attempts_.begin(), attempts_.end(),
                      [&](const Attempt& a) { return a.outcome == outcome; }));
  }

  // Runs the io_context until `done` holds; false after `timeout`.
  bool RunUntil(const std::function<bool()>& done, milliseconds timeout = milliseconds(15000)) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!done()) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      io_.run_for(milliseconds(5));
      if (io_.stopped()) io_.restart();
    }
    return true;
  }

  std::set<std::string> OwedNames() {
    std::set<std::string> names;
    for (const auto& row : store_.LoadAll().notify_owed) names.insert(row.mon_name);
    return names;
  }

  std::vector<NotifyTarget> LiveTargets() const {
    std::vector<NotifyTarget> targets;
    for (const auto& peer : peers_) {
      if (peer->address() != "127.0.0.101") {
        targets.push_back(NotifyTarget{"host-" + peer->address(), peer->address()});
      }
    }
    return targets;
  }

  asio::io_context io_;
  SteadyClock clock_;
  store::MemoryStore store_;
  rpc::Client client_;
  std::vector<std::unique_ptr<Peer>> peers_;
  std::vector<asio::ip::udp::socket> silent_udp_;
  asio::ip::tcp::acceptor silent_acceptor_{io_};
  std::vector<asio::ip::tcp::socket> silent_held_;
  std::vector<Received> received_;
  std::vector<std::string> answered_;
  std::vector<std::string> given_up_;
  std::vector<Attempt> attempts_;
  std::unique_ptr<Notifier> notifier_;
};

TEST_F(NotifierTest, AnsweringPeersAreNotifiedBeforeSilentOnesFailOnce) {
  StartPeers(5);
  StartSilentUdpPeer();
  StartSilentTcpPeer();
  NotifierOptions options;
  options.attempt_deadline = milliseconds(3000);
  MakeNotifier(options);

  std::vector<NotifyTarget> targets = LiveTargets();
  targets.push_back(NotifyTarget{"silent-udp", "127.0.0.100"});
  targets.push_back(NotifyTarget{"silent-tcp", "127.0.0.101"});
  notifier_->StartRound("server-a", 7, targets);
  EXPECT_TRUE(notifier_->RoundActive());
  EXPECT_EQ(notifier_->Pending(), 7u);
  // Persisted at once, before anything was sent.
  EXPECT_EQ(OwedNames().size(), 7u);
  for (const auto& row : store_.LoadAll().notify_owed) EXPECT_EQ(row.state, 7);

  ASSERT_TRUE(RunUntil([&] { return answered_.size() == 5; }));
  // Every answering host got through while the silent ones were still in their first attempt:
  // the silent peers delayed nobody.
  NotifierStats stats = notifier_->stats();
  EXPECT_EQ(stats.failed_attempts, 0u);
  EXPECT_EQ(stats.answered, 5u);
  EXPECT_EQ(stats.pending, 2u);
  EXPECT_EQ(stats.in_flight, 2u);
  ASSERT_EQ(received_.size(), 5u);
  for (const auto& r : received_) {
    EXPECT_EQ(r.mon_name, "server-a");
    EXPECT_EQ(r.state, 7);
    EXPECT_EQ(r.transport, rpc::Transport::kUdp);
  }
  EXPECT_EQ(OwedNames(), (std::set<std::string>{"silent-tcp", "silent-udp"}));
  EXPECT_TRUE(notifier_->RoundActive());
  // The TCP-only peer's rpcbind was asked for UDP, then TCP.
  EXPECT_EQ(peers_.back()->getport_calls, 2);
  EXPECT_TRUE(RunUntil([&] { return !silent_held_.empty(); }));
}

TEST_F(NotifierTest, SilentPeersAreRetriedThenGivenUpAndTheirRowsRemoved) {
  StartPeers(2);
  StartSilentUdpPeer();
  StartSilentTcpPeer();
  NotifierOptions options;
  options.attempt_deadline = milliseconds(300);
  options.udp_retry = milliseconds(100);
  options.initial_backoff = milliseconds(50);
  options.max_backoff = milliseconds(100);
  options.total_budget = milliseconds(900);
  MakeNotifier(options);

  std::vector<NotifyTarget> targets = LiveTargets();
  targets.push_back(NotifyTarget{"silent-udp", "127.0.0.100"});
  targets.push_back(NotifyTarget{"silent-tcp", "127.0.0.101"});
  notifier_->StartRound("server-a", 9, targets);
  ASSERT_TRUE(RunUntil([&] { return !notifier_->RoundActive(); }));

  std::sort(given_up_.begin(), given_up_.end());
  EXPECT_EQ(given_up_, (std::vector<std::string>{"silent-tcp", "silent-udp"}));
  EXPECT_EQ(answered_.size(), 2u);
  EXPECT_TRUE(OwedNames().empty());
  NotifierStats stats = notifier_->stats();
  EXPECT_EQ(stats.given_up, 2u);
  EXPECT_EQ(stats.answered, 2u);
  EXPECT_EQ(stats.pending, 0u);
  EXPECT_EQ(stats.rounds_completed, 1u);
  ASSERT_EQ(stats.round_durations.size(), 1u);
  // Each silent host was tried more than once before its budget ran out.
  EXPECT_GE(stats.failed_attempts, 4u);
  EXPECT_GE(stats.rpcbind_failures, 2u);  // the silent rpcbind
  EXPECT_EQ(stats.attempts, stats.failed_attempts + stats.answered);

  // Every attempt was reported once it ended, with how long it took.
  using Outcome = NotifyAttemptReport::Outcome;
  EXPECT_EQ(attempts_.size(), stats.attempts);
  EXPECT_EQ(CountAttempts(Outcome::kAnswered), 2u);
  EXPECT_EQ(CountAttempts(Outcome::kGaveUp), 2u);
  EXPECT_EQ(CountAttempts(Outcome::kFailed), stats.failed_attempts - 2);
  for (const Attempt& attempt : attempts_) {
    if (attempt.outcome == Outcome::kAnswered) {
      EXPECT_LT(attempt.duration, options.attempt_deadline) << attempt.mon_name;
    } else {
      // A silent peer holds an attempt until its deadline.
      EXPECT_GE(attempt.duration, options.attempt_deadline / 2) << attempt.mon_name;
      EXPECT_TRUE(attempt.mon_name == "silent-udp" || attempt.mon_name == "silent-tcp");
    }
  }
}

TEST_F(NotifierTest, ConfiguredPortSkipsRpcbindAndTcpWorks) {
  StartPeers(3);
  NotifierOptions options;
  options.statd_port = peers_[0]->statd_port();
  options.statd_transport = rpc::Transport::kTcp;
  options.rpcbind_port = 1;  // nobody there: it must not be asked
  MakeNotifier(options);
  notifier_->StartRound("server-a", 11, LiveTargets());
  ASSERT_TRUE(RunUntil([&] { return !notifier_->RoundActive(); }));
  EXPECT_EQ(answered_.size(), 3u);
  for (const auto& peer : peers_) EXPECT_EQ(peer->getport_calls, 0);
  ASSERT_EQ(received_.size(), 3u);
  for (const auto& r : received_) EXPECT_EQ(r.transport, rpc::Transport::kTcp);
  EXPECT_EQ(notifier_->stats().sent, 3u);
}

TEST_F(NotifierTest, TcpOnlyStatdIsReachedOverTcp) {
  StartPeers(1);
  peers_[0]->udp_port = 0;  // its rpcbind lists statd on TCP only
  MakeNotifier(NotifierOptions{});
  notifier_->StartRound("server-a", 13, LiveTargets());
  ASSERT_TRUE(RunUntil([&] { return !notifier_->RoundActive(); }));
  ASSERT_EQ(received_.size(), 1u);
  EXPECT_EQ(received_[0].transport, rpc::Transport::kTcp);
  EXPECT_EQ(peers_[0]->getport_calls, 2);
}

TEST_F(NotifierTest, NamesAreResolvedAndAnUnresolvableNameIsAFailedAttempt) {
  StartPeers(1);
  NotifierOptions options;
  options.statd_port = peers_[0]->statd_port();
  options.attempt_deadline = milliseconds(500);
  options.total_budget = milliseconds(100);  // give up after the first failure
  MakeNotifier(options);
  // "127.0.0.2" as a name goes through the resolver path (no address given).
  std::vector<NotifyTarget> targets{NotifyTarget{"127.0.0.2", ""},
                                    NotifyTarget{"no-such-host.invalid", ""}};
  notifier_->StartRound("server-a", 15, targets);
  ASSERT_TRUE(RunUntil([&] { return !notifier_->RoundActive(); }));
  EXPECT_EQ(answered_, (std::vector<std::string>{"127.0.0.2"}));
  EXPECT_EQ(given_up_, (std::vector<std::string>{"no-such-host.invalid"}));
  EXPECT_EQ(notifier_->stats().resolve_failures, 1u);
}

TEST_F(NotifierTest, NewRoundReplacesTheOneInProgressAndTheNewestStateWins) {
  StartPeers(2);
  MakeNotifier(NotifierOptions{});
  notifier_->StartRound("server-a", 17, LiveTargets());
  notifier_->StartRound("server-a", 19, LiveTargets());  // SM_SIMU_CRASH right after
  ASSERT_TRUE(RunUntil([&] { return !notifier_->RoundActive(); }));
  ASSERT_EQ(received_.size(), 2u);
  for (const auto& r : received_) EXPECT_EQ(r.state, 19);
  NotifierStats stats = notifier_->stats();
  EXPECT_EQ(stats.rounds_started, 2u);
  EXPECT_EQ(stats.rounds_replaced, 1u);
  EXPECT_EQ(stats.rounds_completed, 1u);
  EXPECT_TRUE(OwedNames().empty());
}

TEST_F(NotifierTest, HostsOwedFromAnEarlierRoundAnnounceTheNewState) {
  StartPeers(1);
  StartSilentUdpPeer();
  NotifierOptions options;
  options.attempt_deadline = milliseconds(200);
  options.udp_retry = milliseconds(100);
  options.initial_backoff = milliseconds(100);
  MakeNotifier(options);
  notifier_->StartRound("server-a", 21, {NotifyTarget{"silent-udp", "127.0.0.100"}});
  ASSERT_TRUE(RunUntil([&] { return notifier_->stats().failed_attempts >= 1; }));
  notifier_->StartRound("server-a", 23, LiveTargets());
  ASSERT_TRUE(RunUntil([&] { return answered_.size() == 1; }));
  EXPECT_EQ(notifier_->Pending(), 1u);
  std::map<std::string, int32_t> owed_state;
  for (const auto& row : store_.LoadAll().notify_owed) owed_state[row.mon_name] = row.state;
  EXPECT_EQ(owed_state, (std::map<std::string, int32_t>{{"silent-udp", 23}}));
}

TEST_F(NotifierTest, InFlightAttemptsAreBounded) {
  StartPeers(6);
  NotifierOptions options;
  options.max_in_flight = 2;
  MakeNotifier(options);
  size_t max_in_flight = 0;
  notifier_->set_on_answered([&](const std::string&) {
    max_in_flight = std::max(max_in_flight, notifier_->stats().in_flight);
    answered_.push_back("");
  });
  notifier_->StartRound("server-a", 25, LiveTargets());
  EXPECT_TRUE(RunUntil([&] { return !notifier_->RoundActive(); }));
  EXPECT_EQ(answered_.size(), 6u);
  EXPECT_LE(max_in_flight, 2u);
}

TEST_F(NotifierTest, SilentPeersStopHoldingSlotsAfterSlotHold) {
  StartPeers(3);
  StartSilentUdpPeer("127.0.0.100");
  StartSilentUdpPeer("127.0.0.102");
  NotifierOptions options;
  options.max_in_flight = 1;
  options.slot_hold = milliseconds(100);
  options.attempt_deadline = milliseconds(3000);
  MakeNotifier(options);
  // Names sort the silent hosts first, so they take the only slot first.
  std::vector<NotifyTarget> targets{{"a-silent-1", "127.0.0.100"}, {"a-silent-2", "127.0.0.102"}};
  for (const auto& target : LiveTargets()) targets.push_back(target);
  notifier_->StartRound("server-a", 33, targets);
  ASSERT_TRUE(RunUntil([&] { return answered_.size() == 3; }));
  NotifierStats stats = notifier_->stats();
  EXPECT_EQ(stats.failed_attempts, 0u);  // the silent ones are still in their first attempt
  EXPECT_EQ(stats.in_flight, 2u);
  EXPECT_EQ(stats.lingering, 2u);
}

TEST_F(NotifierTest, ShutdownStopsRetriesAndLeavesUnansweredHostsOwed) {
  StartPeers(1);
  StartSilentUdpPeer();
  NotifierOptions options;
  options.attempt_deadline = milliseconds(200);
  options.udp_retry = milliseconds(100);
  MakeNotifier(options);
  std::vector<NotifyTarget> targets = LiveTargets();
  targets.push_back(NotifyTarget{"silent-udp", "127.0.0.100"});
  notifier_->StartRound("server-a", 27, targets);
  ASSERT_TRUE(RunUntil([&] { return answered_.size() == 1; }));
  testutil::RunCoroutine(io_, notifier_->Shutdown());
  EXPECT_EQ(OwedNames(), (std::set<std::string>{"silent-udp"}));
  const uint64_t attempts = notifier_->stats().attempts;
  io_.run_for(milliseconds(300));
  EXPECT_EQ(notifier_->stats().attempts, attempts);
  notifier_->StartRound("server-a", 29, targets);  // ignored after shutdown
  EXPECT_EQ(notifier_->stats().rounds_started, 1u);
}

TEST_F(NotifierTest, ShutdownCancelsAttemptsToPeersThatNeverAnswer) {
  StartPeers(1);
  StartSilentUdpPeer();
  StartSilentUdpPeer("127.0.0.102");
  NotifierOptions options;
  // Waiting for the attempts instead of cancelling them would take 20 s.
  options.attempt_deadline = milliseconds(20000);
  MakeNotifier(options);
  notifier_->StartRound(
      "server-a", 27,
      {NotifyTarget{"silent-udp", "127.0.0.100"}, NotifyTarget{"silent-udp-2", "127.0.0.102"}});
  ASSERT_TRUE(RunUntil([&] { return notifier_->stats().in_flight == 2; }));
  io_.run_for(milliseconds(200));  // both are in their calls
  testutil::CapturedLog log;
  const auto started = std::chrono::steady_clock::now();
  testutil::RunCoroutine(io_, notifier_->Shutdown());
  EXPECT_LT(std::chrono::steady_clock::now() - started, milliseconds(2000));
  // Cancelled, not failed: both stay owed for the next start, and nothing was left running.
  EXPECT_EQ(OwedNames(), (std::set<std::string>{"silent-udp", "silent-udp-2"}));
  EXPECT_EQ(notifier_->stats().failed_attempts, 0u);
  EXPECT_EQ(log.Count("still running"), 0u) << log.text();
}

TEST_F(NotifierTest, EmptyRoundEndsAtOnce) {
  MakeNotifier(NotifierOptions{});
  notifier_->StartRound("server-a", 31, {});
  ASSERT_TRUE(RunUntil([&] { return !notifier_->RoundActive(); }));
  EXPECT_EQ(notifier_->stats().rounds_completed, 1u);
}

TEST(NotifierTargets, MergeKeepsOneEntryPerNameCaseInsensitivelyPreferringAnAddress) {
  std::vector<NotifyTarget> owed{{"Client-A", ""}, {"client-b", "10.0.0.2"}};
  std::vector<NotifyTarget> monitored{
      {"client-a", "10.0.0.1"}, {"CLIENT-B", ""}, {"client-c", ""}, {"", "10.0.0.9"}};
  EXPECT_EQ(MergeTargets(owed, monitored),
            (std::vector<NotifyTarget>{
                {"Client-A", "10.0.0.1"}, {"client-b", "10.0.0.2"}, {"client-c", ""}}));
}

TEST(NotifierTargets, MonitoredTargetsAreOnePerPeerWithAKnownAddress) {
  Registry registry(10);
  store::Registration registration;
  registration.mon_name = "client-a";
  registry.Put(registration);
  registration.my_id.my_proc = 2;  // a second registration of the same host
  registry.Put(registration);
  registry.AddPeerAddress("client-a", "192.0.2.1");
  registration.mon_name = "Client-B";
  registry.Put(registration);
  std::vector<NotifyTarget> all = MonitoredTargets(registry);
  std::sort(all.begin(), all.end(),
            [](const auto& a, const auto& b) { return a.address > b.address; });
  EXPECT_EQ(all, (std::vector<NotifyTarget>{{"client-a", "192.0.2.1"}, {"Client-B", ""}}));
  EXPECT_EQ(MonitoredTargets(registry, "client-b"), (std::vector<NotifyTarget>{{"Client-B", ""}}));
  EXPECT_TRUE(MonitoredTargets(registry, "nobody").empty());
}

}  // namespace
}  // namespace nlockd::nsm
