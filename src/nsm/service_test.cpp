// SPDX-License-Identifier: Apache-2.0
#include "nsm/service.hpp"

#include <map>
#include <string>
#include <variant>
#include <vector>

#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <gtest/gtest.h>

#include "base/error.hpp"
#include "rpc/address.hpp"
#include "rpc/use_tuple.hpp"
#include "store/open_store.hpp"
#include "store/testing/write_only_store.hpp"
#include "testutil/captured_log.hpp"
#include "testutil/run_coroutine.hpp"

namespace nlockd::nsm {
namespace {

struct FakeCaller final : StatusCaller {
  asio::awaitable<bool> Call(store::MyId target, StatusCallback body) override {
    calls.push_back(target.my_name + "/" + std::to_string(target.my_proc) + ":" + body.mon_name +
                    "@" + std::to_string(body.state) + " priv0=" + std::to_string(body.priv[0]));
    co_return answer;
  }
  std::vector<std::string> calls;
  bool answer = true;
};

// A callback attempt that a cancel cannot cut short (as one in a name lookup on Asio's
// resolver thread): it ends after `takes`, whatever happens.
struct UncancellableCaller final : StatusCaller {
  asio::awaitable<bool> Call(store::MyId, StatusCallback) override {
    co_await asio::this_coro::reset_cancellation_state(asio::disable_cancellation());
    asio::steady_timer timer(co_await asio::this_coro::executor, takes);
    co_await timer.async_wait(rpc::kUseTuple);
    ++ended;
    co_return true;
  }
  std::chrono::milliseconds takes{0};
  int ended = 0;
};

struct FakeLocal final : LocalStatusReceiver {
  void HostRebooted(const std::string& mon_name, int32_t state) override {
    rebooted.push_back(mon_name + "@" + std::to_string(state));
  }
  std::vector<std::string> rebooted;
};

struct FakeResolver final : NameResolver {
  asio::awaitable<std::vector<std::string>> Resolve(std::string name, LookupFor purpose) override {
    asked.push_back(name);
    purposes.push_back(purpose);
    if (auto it = by_name.find(name); it != by_name.end()) co_return it->second;
    co_return addresses;
  }
  std::vector<std::string> asked;
  std::vector<LookupFor> purposes;
  std::vector<std::string> addresses;  // For a name not in by_name.
  std::map<std::string, std::vector<std::string>> by_name;
};

// Answers nothing until the test releases every lookup (as DNS that does not answer).
struct StalledResolver final : NameResolver {
  explicit StalledResolver(asio::any_io_executor executor)
      : release(std::move(executor), asio::steady_timer::time_point::max()) {}
  asio::awaitable<std::vector<std::string>> Resolve(std::string name, LookupFor) override {
    asked.push_back(name);
    co_await release.async_wait(rpc::kUseTuple);
    co_return std::vector<std::string>{};
  }
  asio::steady_timer release;
  std::vector<std::string> asked;
};

struct FakeHook final : RestartHook {
  void Restarted(int32_t state) override { states.push_back(state); }
  void BeforeStateBump(int32_t next_state) override {
    before_bump.push_back(next_state);
    if (refuse_bump) throw Error(ErrorKind::kFailed, "the early-notify file cannot be kept");
  }
  std::vector<int32_t> states;
  std::vector<int32_t> before_bump;
  bool refuse_bump = false;
};

// A call from `address`; port 811 is a reserved one (as the kernel's lockd uses).
rpc::CallContext From(const std::string& address, uint16_t port = 811) {
  rpc::CallContext context;
  context.peer_address = rpc::NormalizeAddress(asio::ip::make_address(address));
  context.peer = address;
  context.peer_port = port;
  return context;
}

constexpr uint16_t kUnreservedPort = 40'000;

mon Mon(const std::string& mon_name, uint8_t priv0 = 0, int32_t prog = 100021) {
  mon args;
  args.mon_id_.mon_name = mon_name;
  args.mon_id_.my_id_ = my_id{"localhost", prog, 4, 16};
  args.priv[0] = priv0;
  return args;
}

class NsmServiceTest : public ::testing::Test {
 protected:
  explicit NsmServiceTest(NsmOptions options = {}) { Make(std::move(options)); }

  void Make(NsmOptions options) {
    service_.reset();
    service_ = std::make_unique<NsmService>(io_.get_executor(), *store_, caller_, local_,
                                            std::move(options), resolver_, &clock_);
    service_->SetRestartHook(&hook_);
    service_->Load(store_->BumpState(), store_->LoadAll().registrations);
  }

  sm_stat_res CallMon(mon args, const std::string& from = "127.0.0.1") {
    return testutil::RunCoroutine(io_, service_->Mon(From(from), std::move(args)));
  }
  void Notify(const std::string& mon_name, int32_t state, const std::string& from) {
    service_->Notify(From(from), stat_chge{mon_name, state});
    io_.restart();
    io_.run_for(std::chrono::milliseconds(50));
  }

  asio::io_context io_;
  ManualClock clock_;
  std::unique_ptr<store::Store> store_ = store::OpenStore("memory:", store::StoreOptions{});
  FakeCaller caller_;
  FakeLocal local_;
  FakeHook hook_;
  NameResolver* resolver_ = nullptr;  // Set before Make().
  std::unique_ptr<NsmService> service_;
};

TEST_F(NsmServiceTest, MonIsDurableBeforeItIsAnsweredAndReturnsTheOddState) {
  sm_stat_res res = CallMon(Mon("client", 7));
  EXPECT_EQ(res.res_stat, stat_succ);
  EXPECT_EQ(res.state % 2, 1);
  EXPECT_EQ(res.state, service_->state());
  auto stored = store_->LoadAll().registrations;
  ASSERT_EQ(stored.size(), 1u);
  EXPECT_EQ(stored[0].mon_name, "client");
  EXPECT_EQ(stored[0].priv[0], 7);
  EXPECT_EQ(stored[0].source_address, "127.0.0.1:811");
}

TEST_F(NsmServiceTest, SecondMonOfTheSameIdUpdatesPriv) {
  CallMon(Mon("client", 1));
  CallMon(Mon("client", 2));
  auto stored = store_->LoadAll().registrations;
  ASSERT_EQ(stored.size(), 1u);
  EXPECT_EQ(stored[0].priv[0], 2);
  EXPECT_EQ(service_->registry().size(), 1u);
}

TEST_F(NsmServiceTest, InvalidNamesAndCallbackProgramsAreRefused) {
  EXPECT_EQ(CallMon(Mon("")).res_stat, stat_fail);
  EXPECT_EQ(CallMon(Mon("bad\nname")).res_stat, stat_fail);
  EXPECT_EQ(CallMon(Mon("client", 0, 100003)).res_stat, stat_fail);
  mon reserved = Mon("client");
  reserved.mon_id_.my_id_ = my_id{"nlockd-nlm", 0, 0, 0};
  EXPECT_EQ(CallMon(reserved).res_stat, stat_fail);
  EXPECT_EQ(service_->stats().invalid_arguments, 4u);
  EXPECT_TRUE(store_->LoadAll().registrations.empty());
}

TEST_F(NsmServiceTest, RemoteCallersAreRefusedAndCounted) {
  EXPECT_EQ(CallMon(Mon("client"), "192.0.2.9").res_stat, stat_fail);
  EXPECT_EQ(CallMon(Mon("client"), "::1").res_stat, stat_succ);
  sm_stat unmon =
      testutil::RunCoroutine(io_, service_->Unmon(From("192.0.2.9"), Mon("client").mon_id_));
  EXPECT_EQ(unmon.state, service_->state());
  EXPECT_EQ(service_->registry().size(), 1u);
  int32_t before = service_->state();
  testutil::RunCoroutine(io_, service_->SimuCrash(From("192.0.2.9")));
  EXPECT_EQ(service_->state(), before);
  EXPECT_EQ(service_->stats().refused[SM_MON], 1u);
  EXPECT_EQ(service_->stats().refused[SM_UNMON], 1u);
  EXPECT_EQ(service_->stats().refused[SM_SIMU_CRASH], 1u);
  // The result label of nsm_requests_total says why.
  const rpc::CallContext remote = From("192.0.2.9");
  testutil::RunCoroutine(io_, service_->UnmonAll(remote, my_id{"lockd", 100021, 4, 16}));
  EXPECT_EQ(remote.result, "denied");
}

TEST(NsmServiceAllowlist, AllowlistedAddressMayMonitor) {
  asio::io_context io;
  auto store = store::OpenStore("memory:", store::StoreOptions{});
  FakeCaller caller;
  FakeLocal local;
  NsmOptions options;
  options.allowlist = {"192.0.2.9"};
  NsmService service(io.get_executor(), *store, caller, local, options);
  service.Load(store->BumpState(), {});
  sm_stat_res res = testutil::RunCoroutine(io, service.Mon(From("::ffff:192.0.2.9"), Mon("c")));
  EXPECT_EQ(res.res_stat, stat_succ);
}

TEST_F(NsmServiceTest, NewCallerRulesApplyToTheNextCallsAndKeepRegistrations) {
  EXPECT_EQ(CallMon(Mon("client"), "192.0.2.9").res_stat, stat_fail);
  EXPECT_EQ(CallMon(Mon("client", 0, 300100)).res_stat, stat_fail);
  EXPECT_EQ(CallMon(Mon("kept")).res_stat, stat_succ);

  NsmOptions reloaded;
  reloaded.allowlist = {"192.0.2.9"};
  reloaded.callback_programs = {100021, 300100};
  service_->SetCallerRules(reloaded);
  EXPECT_EQ(CallMon(Mon("client"), "192.0.2.9").res_stat, stat_succ);
  EXPECT_EQ(CallMon(Mon("other", 0, 300100)).res_stat, stat_succ);
  EXPECT_EQ(service_->registry().size(), 3u);

  // Taken away again: refused from now on; what was registered stays.
  service_->SetCallerRules(NsmOptions{});
  EXPECT_EQ(CallMon(Mon("third"), "192.0.2.9").res_stat, stat_fail);
  EXPECT_EQ(CallMon(Mon("fourth", 0, 300100)).res_stat, stat_fail);
  EXPECT_EQ(service_->registry().size(), 3u);
}

TEST(NsmServiceLimit, PastTheLimitMonAnswersStatFailButUpdatesStillWork) {
  asio::io_context io;
  auto store = store::OpenStore("memory:", store::StoreOptions{});
  FakeCaller caller;
  FakeLocal local;
  NsmOptions options;
  options.max_registrations = 2;
  NsmService service(io.get_executor(), *store, caller, local, options);
  service.Load(store->BumpState(), {});
  for (const char* name : {"a", "b"}) {
    EXPECT_EQ(testutil::RunCoroutine(io, service.Mon(From("127.0.0.1"), Mon(name))).res_stat,
              stat_succ);
  }
  EXPECT_EQ(testutil::RunCoroutine(io, service.Mon(From("127.0.0.1"), Mon("c"))).res_stat,
            stat_fail);
  EXPECT_EQ(testutil::RunCoroutine(io, service.Mon(From("127.0.0.1"), Mon("a", 5))).res_stat,
            stat_succ);
  EXPECT_EQ(service.stats().registrations_over_limit, 1u);
  EXPECT_EQ(store->LoadAll().registrations.size(), 2u);
}

// What rpc.statd reports to its --ha-callout, in order, as "event arg arg [arg]" lines.
struct RecordedEvents final : MonitorEvents {
  void ClientAdded(const std::string& mon_name, const std::string& my_name) override {
    lines.push_back("add-client " + mon_name + " " + my_name);
  }
  void ClientRemoved(const std::string& mon_name, const std::string& my_name) override {
    lines.push_back("del-client " + mon_name + " " + my_name);
  }
  void NotifyReceived(const std::string& mon_name, const std::string& address,
                      int32_t state) override {
    lines.push_back("sm-notify " + mon_name + " " + address + " " + std::to_string(state));
  }
  std::vector<std::string> lines;
};

TEST_F(NsmServiceTest, ReportsStatdsCalloutEvents) {
  RecordedEvents events;
  service_->SetMonitorEvents(&events);
  CallMon(Mon("a", 1));
  CallMon(Mon("a", 1));  // an identical repeat: nothing new
  CallMon(Mon("a", 2));  // a new cookie
  CallMon(Mon("b"));
  CallMon(Mon("c", 0, 100003));        // refused: no event
  Notify("stranger", 3, "192.0.2.7");  // reported, monitored or not
  testutil::RunCoroutine(io_, service_->Unmon(From("127.0.0.1"), Mon("a").mon_id_));
  testutil::RunCoroutine(io_, service_->Unmon(From("127.0.0.1"), Mon("a").mon_id_));  // gone
  testutil::RunCoroutine(io_,
                         service_->UnmonAll(From("127.0.0.1"), my_id{"localhost", 100021, 4, 16}));
  EXPECT_EQ(events.lines,
            (std::vector<std::string>{"add-client a localhost", "add-client a localhost",
                                      "add-client b localhost", "sm-notify stranger 192.0.2.7 3",
                                      "del-client a localhost", "del-client b localhost"}));
}

TEST_F(NsmServiceTest, UnmonAndUnmonAllRemoveDurably) {
  CallMon(Mon("a"));
  CallMon(Mon("b"));
  mon other = Mon("c");
  other.mon_id_.my_id_.my_name = "other";
  CallMon(other);
  testutil::RunCoroutine(io_, service_->Unmon(From("127.0.0.1"), Mon("a").mon_id_));
  EXPECT_EQ(store_->LoadAll().registrations.size(), 2u);
  sm_stat res = testutil::RunCoroutine(
      io_, service_->UnmonAll(From("127.0.0.1"), my_id{"localhost", 100021, 4, 16}));
  EXPECT_EQ(res.state, service_->state());
  auto stored = store_->LoadAll().registrations;
  ASSERT_EQ(stored.size(), 1u);
  EXPECT_EQ(stored[0].mon_name, "c");
}

TEST_F(NsmServiceTest, RegistrationsSurviveALoad) {
  CallMon(Mon("client", 3));
  testutil::RunCoroutine(io_,
                         service_->MonitorLocal("10.0.0.5", asio::ip::make_address("10.0.0.5"), 0));
  testutil::RunCoroutine(
      io_, service_->MonitorLocal("host-b", asio::ip::make_address("::ffff:10.0.0.6"), 0));
  int32_t before = service_->state();
  Make(NsmOptions{});
  EXPECT_GT(service_->state(), before);
  EXPECT_EQ(service_->state() % 2, 1);
  EXPECT_EQ(service_->registry().size(), 3u);
  // The local registration's address came back from source_address.
  Notify("host-b", 9, "10.0.0.6");
  EXPECT_EQ(local_.rebooted, std::vector<std::string>{"host-b@9"});
}

TEST_F(NsmServiceTest, NotifyCallsBackEveryMatchingRegistrationOnce) {
  CallMon(Mon("10.0.0.5", 4));
  mon second = Mon("10.0.0.5", 5);
  second.mon_id_.my_id_.my_proc = 17;
  CallMon(second);
  testutil::RunCoroutine(io_,
                         service_->MonitorLocal("10.0.0.5", asio::ip::make_address("10.0.0.5"), 3));
  Notify("client5", 5, "10.0.0.5");
  EXPECT_EQ(caller_.calls, (std::vector<std::string>{"localhost/16:10.0.0.5@5 priv0=4",
                                                     "localhost/17:10.0.0.5@5 priv0=5"}));
  EXPECT_EQ(local_.rebooted, std::vector<std::string>{"10.0.0.5@5"});
  EXPECT_EQ(service_->stats().crashes_detected, 1u);
  EXPECT_EQ(service_->stats().callbacks_ok, 2u);
  // The registrations stay: the host is still monitored, now at state 5.
  EXPECT_EQ(service_->registry().size(), 3u);
}

TEST_F(NsmServiceTest, NotifyRejectsUnmonitoredWrongAddressAndReplayedState) {
  testutil::RunCoroutine(io_,
                         service_->MonitorLocal("client", asio::ip::make_address("10.0.0.5"), 3));
  Notify("stranger", 5, "10.0.0.9");
  Notify("client", 5, "10.0.0.9");  // spoofed: not the client's address
  Notify("client", 3, "10.0.0.5");  // the state we know: a replay
  Notify("client", 1, "10.0.0.5");  // older
  EXPECT_TRUE(local_.rebooted.empty());
  EXPECT_EQ(service_->stats().notify_not_monitored, 1u);
  EXPECT_EQ(service_->stats().notify_wrong_address, 1u);
  EXPECT_EQ(service_->stats().notify_replayed, 2u);
  Notify("CLIENT", 5, "10.0.0.5");
  Notify("client", 5, "10.0.0.5");  // the same notification again
  EXPECT_EQ(local_.rebooted, std::vector<std::string>{"client@5"});
}

TEST_F(NsmServiceTest, RegistrationsInMemoryCarryTheirCreationAndUpdateTimes) {
  const auto before = std::chrono::system_clock::now() - std::chrono::seconds(1);
  CallMon(Mon("client", 1));
  auto first = service_->registry().All();
  ASSERT_EQ(first.size(), 1u);
  EXPECT_GT(first[0].created, before);
  EXPECT_EQ(first[0].updated, first[0].created);
  CallMon(Mon("client", 2));
  auto second = service_->registry().All();
  EXPECT_EQ(second[0].created, first[0].created);
  EXPECT_GE(second[0].updated, first[0].updated);
}

TEST_F(NsmServiceTest, APeersLastStateSurvivesARestartSoAReplayIsStillIgnored) {
  testutil::RunCoroutine(io_,
                         service_->MonitorLocal("client", asio::ip::make_address("10.0.0.5"), 3));
  Notify("client", 5, "10.0.0.5");
  ASSERT_EQ(local_.rebooted, std::vector<std::string>{"client@5"});
  auto stored = store_->LoadAll().registrations;
  ASSERT_EQ(stored.size(), 1u);
  EXPECT_EQ(stored[0].peer_state, 5);

  Make({});                         // nlockd restarts on the same store.
  Notify("client", 5, "10.0.0.5");  // the old notification, replayed
  EXPECT_EQ(service_->stats().notify_replayed, 1u);
  // An SM_MON update of the registration keeps the state.
  testutil::RunCoroutine(io_,
                         service_->MonitorLocal("client", asio::ip::make_address("10.0.0.5"), 0));
  EXPECT_EQ(store_->LoadAll().registrations[0].peer_state, 5);
  Notify("client", 7, "10.0.0.5");
  EXPECT_EQ(local_.rebooted, (std::vector<std::string>{"client@5", "client@7"}));
}

TEST(NsmServiceAddressCheck, OffAcceptsANotifyFromAnyAddress) {
  asio::io_context io;
  auto store = store::OpenStore("memory:", store::StoreOptions{});
  FakeCaller caller;
  FakeLocal local;
  NsmOptions options;
  options.check_notifier_address = false;
  NsmService service(io.get_executor(), *store, caller, local, options);
  service.Load(store->BumpState(), {});
  testutil::RunCoroutine(io, service.MonitorLocal("client", asio::ip::make_address("10.0.0.5"), 0));
  service.Notify(From("10.0.0.9"), stat_chge{"client", 7});
  EXPECT_EQ(local.rebooted, std::vector<std::string>{"client@7"});
}

TEST_F(NsmServiceTest, FailedCallbacksAreCounted) {
  caller_.answer = false;
  CallMon(Mon("10.0.0.5"));
  Notify("10.0.0.5", 5, "10.0.0.5");
  EXPECT_EQ(service_->stats().callbacks_failed, 1u);
}

TEST_F(NsmServiceTest, SimuCrashBumpsTheStateOffTheIoThreadAndAsksForARound) {
  int32_t before = service_->state();
  testutil::RunCoroutine(io_, service_->SimuCrash(From("127.0.0.1")));
  EXPECT_EQ(service_->state(), before + 2);
  EXPECT_EQ(hook_.before_bump, std::vector<int32_t>{before + 2}) << "told first";
  EXPECT_EQ(hook_.states, std::vector<int32_t>{before + 2});
  EXPECT_EQ(store_->LoadAll().state, before + 2);
  EXPECT_EQ(testutil::RunCoroutine(io_, service_->Mon(From("127.0.0.1"), Mon("a"))).state,
            before + 2);
}

// The hosts the new state goes to are owed before the state moves: a restart of nlockd after the
// bump, on the same boot, finds them owed and still announces it.
TEST_F(NsmServiceTest, SimuCrashRecordsTheMonitoredHostsAsOwedBeforeItMovesTheState) {
  CallMon(Mon("a"));
  testutil::RunCoroutine(io_, service_->SimuCrash(From("127.0.0.1")));
  const std::vector<store::NotifyOwed> owed = store_->LoadAll().notify_owed;
  ASSERT_EQ(owed.size(), 1u);
  EXPECT_EQ(owed[0].mon_name, "a");
  EXPECT_EQ(owed[0].state, 0) << "not announced yet: the round writes the state it announces";
}

// The server keeps its early-notify file ahead of the store: a file it cannot keep stops the
// bump, and nothing is announced.
TEST_F(NsmServiceTest, SimuCrashDoesNotMoveTheStateWhenTheHookRefusesTheBump) {
  const int32_t before = service_->state();
  hook_.refuse_bump = true;
  testutil::RunCoroutine(io_, service_->SimuCrash(From("127.0.0.1")));
  EXPECT_EQ(hook_.before_bump, std::vector<int32_t>{before + 2});
  EXPECT_EQ(service_->state(), before);
  EXPECT_EQ(store_->LoadAll().state, before);
  EXPECT_TRUE(hook_.states.empty());
  EXPECT_EQ(service_->stats().failed[SM_SIMU_CRASH], 1u);
}

// A store that records the order of writes and refuses the hosts owed.
class RefusesOwedStore final : public store::testutil::WriteOnlyStore {
 public:
  std::vector<std::string> writes;

 private:
  void Submit(store::WriteOp op, store::Done done) override {
    if (std::holds_alternative<store::PutNotifyOwedOp>(op)) {
      writes.emplace_back("owed");
      done(std::make_exception_ptr(Error(ErrorKind::kFailed, "disk full")));
      return;
    }
    if (auto* bump = std::get_if<store::BumpStateOp>(&op)) {
      writes.emplace_back("bump");
      *bump->new_state = 3;
    } else {
      writes.emplace_back("other");
    }
    done(nullptr);
  }
};

TEST(NsmServiceSimuCrash, WithoutTheHostsRecordedAsOwedTheStateDoesNotMove) {
  asio::io_context io;
  RefusesOwedStore store;
  FakeCaller caller;
  FakeLocal local;
  FakeHook hook;
  NsmService service(io.get_executor(), store, caller, local, NsmOptions{});
  service.SetRestartHook(&hook);
  service.Load(1, {});
  testutil::RunCoroutine(io, service.Mon(From("127.0.0.1"), Mon("a")));
  testutil::RunCoroutine(io, service.SimuCrash(From("127.0.0.1")));
  EXPECT_EQ(store.writes, (std::vector<std::string>{"other", "owed"}));
  EXPECT_EQ(service.state(), 1);
  EXPECT_TRUE(hook.states.empty());
  EXPECT_EQ(service.stats().failed[SM_SIMU_CRASH], 1u);
}

TEST(NsmServiceNames, AHostRegisteredByNameIsCheckedAgainstItsResolvedAddresses) {
  asio::io_context io;
  auto store = store::OpenStore("memory:", store::StoreOptions{});
  FakeCaller caller;
  FakeLocal local;
  FakeResolver resolver;
  NsmService service(io.get_executor(), *store, caller, local, NsmOptions{}, &resolver);
  service.Load(store->BumpState(), {});
  testutil::RunCoroutine(io, service.Mon(From("127.0.0.1"), Mon("Client.Example")));
  auto notify = [&](const std::string& from, int32_t state) {
    service.Notify(From(from), stat_chge{"client.example", state});
    io.restart();
    io.run_for(std::chrono::milliseconds(50));
  };
  resolver.addresses = {"10.0.0.6"};
  notify("10.0.0.5", 3);  // the name is not this address
  EXPECT_TRUE(caller.calls.empty());
  EXPECT_EQ(service.stats().notify_wrong_address, 1u);
  resolver.addresses = {"10.0.0.5"};
  notify("10.0.0.5", 3);
  EXPECT_EQ(caller.calls, std::vector<std::string>{"localhost/16:Client.Example@3 priv0=0"});
  EXPECT_EQ(resolver.asked, (std::vector<std::string>{"Client.Example", "Client.Example"}));
  EXPECT_EQ(resolver.purposes,
            (std::vector<LookupFor>{LookupFor::kMonitoredHost, LookupFor::kMonitoredHost}));
  // The address is known now: no second lookup.
  notify("10.0.0.5", 5);
  EXPECT_EQ(resolver.asked.size(), 2u);
  EXPECT_EQ(caller.calls.size(), 2u);
}

TEST(NsmServiceNames, WithoutAResolverAHostKnownOnlyByNameIsRejected) {
  asio::io_context io;
  auto store = store::OpenStore("memory:", store::StoreOptions{});
  FakeCaller caller;
  FakeLocal local;
  NsmService service(io.get_executor(), *store, caller, local, NsmOptions{});
  service.Load(store->BumpState(), {});
  testutil::RunCoroutine(io, service.Mon(From("127.0.0.1"), Mon("client.example")));
  service.Notify(From("10.0.0.5"), stat_chge{"client.example", 3});
  EXPECT_EQ(service.stats().notify_wrong_address, 1u);
  EXPECT_TRUE(caller.calls.empty());
}

// A peer registered by address (Linux's lockd registers its clients so) whose reboot
// notification names it by host name, sent from another of its addresses.
class NsmServiceOtherAddressTest : public NsmServiceTest {
 protected:
  NsmServiceOtherAddressTest() {
    resolver_ = &resolver;
    Make({});
    CallMon(Mon("10.0.0.5", 4));
    testutil::RunCoroutine(
        io_, service_->MonitorLocal("10.0.0.5", asio::ip::make_address("10.0.0.5"), 3));
  }
  FakeResolver resolver;
};

TEST_F(NsmServiceOtherAddressTest, TheResolvedNameFindsThePeerByItsAddress) {
  resolver.by_name["client.example"] = {"10.1.0.5", "10.0.0.5"};
  Notify("client.example", 5, "10.1.0.5");
  EXPECT_EQ(resolver.asked, std::vector<std::string>{"client.example"});
  EXPECT_EQ(caller_.calls, std::vector<std::string>{"localhost/16:10.0.0.5@5 priv0=4"});
  EXPECT_EQ(local_.rebooted, std::vector<std::string>{"10.0.0.5@5"});
  EXPECT_EQ(service_->stats().crashes_detected, 1u);
  EXPECT_EQ(service_->stats().succeeded[SM_NOTIFY], 1u);
  EXPECT_EQ(store_->LoadAll().registrations[0].peer_state, 5);
  // The same notification again: the state rules apply as to any other match.
  Notify("client.example", 5, "10.1.0.5");
  EXPECT_EQ(service_->stats().notify_replayed, 1u);
  EXPECT_EQ(local_.rebooted.size(), 1u);
  Notify("client.example", 7, "10.1.0.5");
  EXPECT_EQ(local_.rebooted, (std::vector<std::string>{"10.0.0.5@5", "10.0.0.5@7"}));
}

TEST_F(NsmServiceOtherAddressTest, TheSourceMustBeAnAddressOfTheNotifiedName) {
  // The name is the peer's, but the notification came from elsewhere: spoofed.
  resolver.by_name["client.example"] = {"10.0.0.5"};
  Notify("client.example", 5, "192.0.2.66");
  EXPECT_TRUE(local_.rebooted.empty());
  EXPECT_TRUE(caller_.calls.empty());
  EXPECT_EQ(service_->stats().notify_wrong_address, 1u);

  NsmOptions unchecked;
  unchecked.check_notifier_address = false;
  service_->SetCallerRules(unchecked);
  Notify("client.example", 5, "192.0.2.66");
  EXPECT_EQ(local_.rebooted, std::vector<std::string>{"10.0.0.5@5"});
}

TEST_F(NsmServiceOtherAddressTest, ANameOfNoMonitoredAddressIsNotMonitored) {
  resolver.by_name["stranger"] = {"10.9.9.9"};
  resolver.by_name["unresolvable"] = {};
  Notify("stranger", 5, "10.9.9.9");
  Notify("unresolvable", 5, "10.9.9.8");
  EXPECT_TRUE(local_.rebooted.empty());
  EXPECT_EQ(service_->stats().notify_not_monitored, 2u);
  EXPECT_EQ(service_->stats().failed[SM_NOTIFY], 2u);
}

TEST_F(NsmServiceOtherAddressTest, AMatchByNameOrSourceLooksNothingUp) {
  resolver.addresses = {"10.0.0.5"};
  Notify("client.example", 5, "10.0.0.5");  // by source address
  Notify("10.0.0.5", 7, "10.0.0.5");        // by name
  Notify("10.0.0.6", 9, "10.0.0.6");        // an address literal: nothing to resolve
  EXPECT_TRUE(resolver.asked.empty());
  EXPECT_EQ(local_.rebooted, (std::vector<std::string>{"10.0.0.5@5", "10.0.0.5@7"}));
  EXPECT_EQ(service_->stats().notify_not_monitored, 1u);
}

TEST_F(NsmServiceTest, WithNothingMonitoredAnUnmatchedNameIsNotLookedUp) {
  FakeResolver resolver;
  resolver_ = &resolver;
  Make({});
  Notify("client.example", 5, "10.1.0.5");
  EXPECT_TRUE(resolver.asked.empty());
  EXPECT_EQ(service_->stats().notify_not_monitored, 1u);
}

TEST_F(NsmServiceTest, LookupsForUnmatchedNotificationsAreBounded) {
  StalledResolver resolver(io_.get_executor());
  resolver_ = &resolver;
  Make({});
  CallMon(Mon("10.0.0.5"));
  for (int i = 0; i < 20; ++i) {
    service_->Notify(From("10.1.0.5"), stat_chge{"made-up-" + std::to_string(i), 5});
  }
  io_.restart();
  io_.run_for(std::chrono::milliseconds(20));
  EXPECT_EQ(resolver.asked.size(), 16u);
  EXPECT_EQ(service_->stats().notify_not_monitored, 4u);
  resolver.release.cancel();
  io_.restart();
  io_.run_for(std::chrono::milliseconds(20));
  EXPECT_EQ(service_->stats().notify_not_monitored, 20u);
  // Room again for the next one.
  service_->Notify(From("10.1.0.5"), stat_chge{"made-up-again", 5});
  io_.restart();
  io_.run_for(std::chrono::milliseconds(20));
  EXPECT_EQ(resolver.asked.size(), 17u);
  resolver.release.cancel();
  io_.restart();
  io_.run_for(std::chrono::milliseconds(20));
}

TEST_F(NsmServiceTest, SimuCrashNeedsAReservedPortAndComesAtMostOncePerInterval) {
  const int32_t before = service_->state();
  // Loopback, but an unreserved port: any local user.
  testutil::RunCoroutine(io_, service_->SimuCrash(From("127.0.0.1", kUnreservedPort)));
  EXPECT_EQ(service_->state(), before);
  EXPECT_EQ(service_->stats().privilege_refusals, 1u);
  EXPECT_TRUE(hook_.states.empty());
  testutil::RunCoroutine(io_, service_->SimuCrash(From("127.0.0.1")));
  EXPECT_EQ(service_->state(), before + 2);
  // Repeated at once (a new xid, so not a retransmission): nothing moves.
  for (int i = 0; i < 5; ++i) testutil::RunCoroutine(io_, service_->SimuCrash(From("127.0.0.1")));
  EXPECT_EQ(service_->state(), before + 2);
  EXPECT_EQ(hook_.states.size(), 1u);
  EXPECT_EQ(service_->stats().simu_crash_limited, 5u);
  clock_.Advance(NsmOptions{}.simu_crash_interval);
  testutil::RunCoroutine(io_, service_->SimuCrash(From("127.0.0.1")));
  EXPECT_EQ(service_->state(), before + 4);
  EXPECT_EQ(hook_.states, (std::vector<int32_t>{before + 2, before + 4}));
}

TEST_F(NsmServiceTest, OnlyAReservedPortChangesOrRemovesARegistrationMadeFromOne) {
  const my_id lockd{"localhost", 100021, 4, 16};
  CallMon(Mon("kernel-client"));  // port 811: the kernel's lockd
  mon user = Mon("user-client");
  ASSERT_EQ(
      testutil::RunCoroutine(io_, service_->Mon(From("127.0.0.1", kUnreservedPort), user)).res_stat,
      stat_succ);
  const rpc::CallContext unprivileged = From("127.0.0.1", kUnreservedPort);
  // Neither SM_MON (a new priv), SM_UNMON nor SM_UNMON_ALL from an unreserved port touches the
  // kernel's registration; the user's own goes.
  EXPECT_EQ(
      testutil::RunCoroutine(io_, service_->Mon(unprivileged, Mon("kernel-client", 9))).res_stat,
      stat_fail);
  EXPECT_EQ(unprivileged.result, "denied");
  testutil::RunCoroutine(io_, service_->Unmon(unprivileged, Mon("kernel-client").mon_id_));
  testutil::RunCoroutine(io_, service_->UnmonAll(unprivileged, lockd));
  auto stored = store_->LoadAll().registrations;
  ASSERT_EQ(stored.size(), 1u);
  EXPECT_EQ(stored[0].mon_name, "kernel-client");
  EXPECT_EQ(stored[0].priv[0], 0);
  EXPECT_EQ(service_->registry().size(), 1u);
  EXPECT_EQ(service_->stats().privilege_refusals, 3u);
  // After a restart the registration is still known to be the kernel's.
  Make(NsmOptions{});
  testutil::RunCoroutine(io_, service_->UnmonAll(unprivileged, lockd));
  EXPECT_EQ(service_->registry().size(), 1u);
  // A reserved port removes it.
  testutil::RunCoroutine(io_, service_->UnmonAll(From("127.0.0.1", 700), lockd));
  EXPECT_EQ(service_->registry().size(), 0u);
  EXPECT_TRUE(store_->LoadAll().registrations.empty());
}

TEST_F(NsmServiceTest, WithoutTheReservedPortRuleAnyLocalCallerMayRemove) {
  NsmOptions options;
  options.protect_privileged_registrations = false;
  Make(options);
  CallMon(Mon("kernel-client"));
  testutil::RunCoroutine(
      io_, service_->Unmon(From("127.0.0.1", kUnreservedPort), Mon("kernel-client").mon_id_));
  EXPECT_EQ(service_->registry().size(), 0u);
  EXPECT_EQ(service_->stats().privilege_refusals, 0u);
}

TEST(MadeFromReservedPort, ReadsThePortRecordedWithTheAddress) {
  auto made_from = [](const std::string& source) {
    store::Registration registration;
    registration.source_address = source;
    return MadeFromReservedPort(registration);
  };
  EXPECT_TRUE(made_from("127.0.0.1:811"));
  EXPECT_FALSE(made_from("127.0.0.1:1024"));
  EXPECT_TRUE(made_from("[::1]:600"));
  EXPECT_FALSE(made_from("[::1]:40000"));
  // Written before ports were recorded: it may be the kernel's.
  EXPECT_TRUE(made_from("127.0.0.1"));
  EXPECT_TRUE(made_from("::1"));
  EXPECT_TRUE(made_from("127.0.0.1:x"));
  EXPECT_EQ(CallerEndpoint(From("::1", 40000)), "[::1]:40000");
  EXPECT_EQ(CallerEndpoint(From("::ffff:10.0.0.1", 811)), "10.0.0.1:811");
}

TEST_F(NsmServiceOtherAddressTest, AnUnmatchedNameIsLookedUpApartFromMonitoredOnes) {
  Notify("stranger", 5, "10.9.9.9");
  EXPECT_EQ(resolver.purposes, std::vector<LookupFor>{LookupFor::kNotifierName});
}

TEST(PrintableName, RefusesControlAndHighBytes) {
  EXPECT_TRUE(PrintableName("host-1.example:~"));
  EXPECT_FALSE(PrintableName(std::string("a\0b", 3)));
  EXPECT_FALSE(PrintableName("caf\xc3\xa9"));
}

}  // namespace
}  // namespace nlockd::nsm

namespace nlockd::nsm {
namespace {

TEST(NsmServiceShutdown, WaitsForACallbackAsLongAsTheCallbackDeadlineAllows) {
  asio::io_context io;
  ManualClock clock;
  auto store = store::OpenStore("memory:", store::StoreOptions{});
  UncancellableCaller caller;
  // Longer than the 5 s default, and the callback's attempt takes longer than that.
  caller.takes = std::chrono::milliseconds(6500);
  FakeLocal local;
  NsmOptions options;
  options.callback_deadline = std::chrono::seconds(8);
  NsmService service(io.get_executor(), *store, caller, local, options, nullptr, &clock);
  EXPECT_EQ(service.shutdown_bound(), std::chrono::seconds(8) + rpc::kShutdownMargin);
  service.Load(store->BumpState(), {});
  testutil::RunCoroutine(io, service.Mon(From("127.0.0.1"), Mon("10.0.0.5")));
  service.Notify(From("10.0.0.5"), stat_chge{"10.0.0.5", 7});
  testutil::CapturedLog log;
  testutil::RunCoroutine(io, service.Shutdown());
  EXPECT_EQ(caller.ended, 1);
  EXPECT_EQ(log.Count("still running"), 0u) << log.text();
}

}  // namespace
}  // namespace nlockd::nsm
