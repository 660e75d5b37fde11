// SPDX-License-Identifier: Apache-2.0
// AdminBackend over the real services, wired as Server wires them (server.cpp) with the memory
// store: the views and actions against real lock and NSM state. The executor runs on its own
// thread, as in nlockd, and the test calls the backend from the main thread, as the HTTP
// threads do.
#include "server/admin_backend.hpp"

#include <algorithm>
#include <chrono>
#include <functional>
#include <future>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <asio/co_spawn.hpp>
#include <asio/connect.hpp>
#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/ip/udp.hpp>
#include <asio/post.hpp>
#include <asio/read.hpp>
#include <asio/use_future.hpp>
#include <asio/write.hpp>
#include <gtest/gtest.h>

#include "admin/metrics.hpp"
#include "lock/lock_manager.hpp"
#include "nlm/service.hpp"
#include "nsm/notifier.hpp"
#include "nsm/service.hpp"
#include "rpc/client.hpp"
#include "rpc/dispatcher.hpp"
#include "rpc/message.hpp"
#include "rpc/server.hpp"
#include "server/call_metrics.hpp"
#include "server/nsm_bridge.hpp"
#include "store/memory/memory_store.hpp"

namespace nlockd::server {
namespace {

using admin::ApiError;
using admin::ApiErrorKind;
using std::chrono::milliseconds;

constexpr const char* kHostA = "127.0.0.11";
constexpr const char* kHostB = "127.0.0.12";
constexpr const char* kPeer = "127.0.0.20";  // Monitored by an external lock manager.

// Answers every NLM call to a client at once: GRANTED with granted, anything else (_RES) void.
class AcceptingCaller final : public nlm::ClientCaller {
 public:
  asio::awaitable<rpc::CallResult> Call(nlm::ClientAddress client, uint32_t version,
                                        uint32_t procedure, std::vector<uint8_t> args,
                                        milliseconds /*deadline*/) override {
    rpc::CallResult result;
    result.status = rpc::CallStatus::kOk;
    if (procedure == nlm::NLM_GRANTED) {
      nlm::nlm4_testargs granted;
      xdr::Decoder in(args);
      EXPECT_TRUE(Decode(in, version, granted));
      xdr::Encoder out(result.body);
      Encode(out, version, nlm::nlm4_res{granted.cookie, nlm::NLM4_GRANTED});
    }
    {
      std::lock_guard lock(mu_);
      calls_.push_back(client.address.to_string() + ":" + std::to_string(procedure));
    }
    co_return result;
  }
  std::vector<std::string> calls() {
    std::lock_guard lock(mu_);
    return calls_;
  }

 private:
  std::mutex mu_;
  std::vector<std::string> calls_;  // "address:procedure"
};

class AcceptingStatusCaller final : public nsm::StatusCaller {
 public:
  asio::awaitable<bool> Call(store::MyId /*target*/, nsm::StatusCallback /*body*/) override {
    co_return true;
  }
};

// A UDP port on loopback where nothing listens: SM_NOTIFY attempts fail at once.
uint16_t ClosedUdpPort() {
  asio::io_context io;
  asio::ip::udp::socket socket(io, asio::ip::udp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  return socket.local_endpoint().port();
}

nsm::NotifierOptions QuickNotifier() {
  nsm::NotifierOptions options;
  options.statd_port = ClosedUdpPort();
  options.attempt_deadline = milliseconds(200);
  options.total_budget = milliseconds(1);  // One attempt per host.
  options.shutdown_grace = milliseconds(200);
  return options;
}

nlm::NlmOptions NlmOptionsForTest() {
  nlm::NlmOptions options;
  options.granted_msg = false;  // GRANTED, answered by AcceptingCaller.
  options.cookie_key = nlm::GrantCookies::Key{1, 2};
  return options;
}

class AdminBackendTest : public ::testing::Test {
 protected:
  AdminBackendTest()
      : client_(io_.get_executor()),
        store_(store::StoreOptions{}),
        locks_(clock_),
        nsm_(io_.get_executor(), store_, status_caller_, bridge_, nsm::NsmOptions{}),
        notifier_(io_.get_executor(), client_, store_, clock_, QuickNotifier()),
        nlm_(io_.get_executor(), locks_, bridge_, nlm_caller_, NlmOptionsForTest()),
        call_metrics_(metrics_),
        backend_(AdminBackendParts{io_.get_executor(),
                                   clock_,
                                   locks_,
                                   nsm_,
                                   notifier_,
                                   nlm_,
                                   bridge_,
                                   metrics_,
                                   "server-a",
                                   false,
                                   nullptr,
                                   {},
                                   {}}) {
    bridge_.Attach(nsm_, nlm_);
    nlm_.Register(dispatcher_);
    dispatcher_.SetObserver(
        [this](const rpc::CallRecord& record) { call_metrics_.Observe(record); });
    nsm_.Load(3, {});
    backend_.MarkStoreLoaded();
    runner_ = std::thread([this] { io_.run(); });
  }

  ~AdminBackendTest() override {
    OnIo(nlm_.Shutdown());
    OnIo(nsm_.Shutdown());
    OnIo(notifier_.Shutdown());
    work_.reset();
    io_.stop();
    runner_.join();
  }

  // Runs `work` on the executor and waits for it.
  template <typename T>
  T OnIo(asio::awaitable<T> work) {
    return asio::co_spawn(io_, std::move(work), asio::use_future).get();
  }
  void OnIo(const std::function<void()>& work) {
    std::promise<void> done;
    asio::post(io_, [&] {
      work();
      done.set_value();
    });
    done.get_future().get();
  }

  static rpc::CallContext From(const char* address) {
    rpc::CallContext context;
    context.transport = rpc::Transport::kUdp;
    context.peer_address = asio::ip::make_address(address);
    context.peer = address;
    context.peer_port = 800;
    context.program = nlm::NLM_PROG;
    context.version = nlm::NLM4_VERS;
    return context;
  }

  static nlm::nlm4_lockargs LockArgs(const char* caller, int32_t svid, const char* fh,
                                     uint64_t offset, uint64_t length, bool block = false) {
    nlm::nlm4_lockargs args;
    args.cookie = "c" + std::to_string(svid);
    args.block = block;
    args.exclusive = true;
    args.alock = nlm::nlm4_lock{caller, fh, "oh-" + std::to_string(svid), svid, offset, length};
    args.state = 1;
    return args;
  }

  nlm::nlm4_stats Lock(const char* address, nlm::nlm4_lockargs args) {
    rpc::CallContext context = From(address);
    return OnIo(nlm_.Lock(context, std::move(args), true)).stat;
  }

  nlm::nlm4_stats Share(const char* address, const char* caller, const char* fh) {
    rpc::CallContext context = From(address);
    nlm::nlm4_shareargs args;
    args.cookie = "s";
    args.share = nlm::nlm4_share{caller, fh, "oh-share", nlm::fsm_DW, nlm::fsa_R};
    return OnIo(nlm_.Share(context, std::move(args))).stat;
  }

  // An external lock manager on this machine asks NSM to watch `mon_name`.
  void Monitor(const char* mon_name, const char* my_name) {
    rpc::CallContext context = From("127.0.0.1");
    nsm::mon args;
    args.mon_id_ = nsm::mon_id{mon_name, nsm::my_id{my_name, 100021, 4, 16}};
    ASSERT_EQ(OnIo(nsm_.Mon(context, std::move(args))).res_stat, nsm::stat_succ);
  }

  // The state most tests start from: host A holds two locks and a share, host B waits behind
  // one of them, and an external lock manager monitors kPeer.
  void Populate() {
    ASSERT_EQ(Lock(kHostA, LockArgs("client-a", 1, "file1", 0, 10)), nlm::NLM4_GRANTED);
    ASSERT_EQ(Lock(kHostA, LockArgs("client-a", 1, "file2", 0, 0)), nlm::NLM4_GRANTED);
    ASSERT_EQ(Share(kHostA, "client-a", "file3"), nlm::NLM4_GRANTED);
    ASSERT_EQ(Lock(kHostB, LockArgs("client-b", 2, "file1", 5, 5, true)), nlm::NLM4_BLOCKED);
    Monitor(kPeer, "lockd-x");
  }

  // Dispatches one NLM call, as the RPC server does; returns whether a reply was made.
  bool Dispatch(const char* address, uint32_t procedure, const nlm::nlm4_lockargs& args) {
    std::vector<uint8_t> message;
    xdr::Encoder enc(message);
    rpc::EncodeCallHeader(enc, ++xid_, nlm::NLM_PROG, nlm::NLM4_VERS, procedure);
    Encode(enc, nlm::NLM4_VERS, args);
    std::vector<uint8_t> reply;
    return OnIo(dispatcher_.Dispatch(From(address), message, reply));
  }

  static std::string Render(const std::vector<admin::LockView>& locks) {
    std::vector<std::string> lines;
    for (const auto& l : locks) {
      lines.push_back(l.host + " " + l.file + " svid=" + std::to_string(l.svid) + " [" +
                      std::to_string(l.offset) + "+" + std::to_string(l.length) + "]" +
                      (l.exclusive ? " x" : " s"));
    }
    std::sort(lines.begin(), lines.end());
    std::string out;
    for (const auto& line : lines) out += line + "; ";
    return out;
  }

  static std::set<std::string> MonNames(const std::vector<admin::RegistrationView>& views) {
    std::set<std::string> names;
    for (const auto& view : views) names.insert(view.mon_name + "/" + view.my_name);
    return names;
  }

  static ApiErrorKind ErrorOf(const std::function<void()>& call) {
    try {
      call();
    } catch (const ApiError& e) {
      return e.kind();
    }
    ADD_FAILURE() << "no ApiError";
    return ApiErrorKind::kInvalidArgument;
  }

  // Polls `done` (on the test thread) until it holds or 5 s pass.
  static bool Eventually(const std::function<bool()>& done) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!done()) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(milliseconds(2));
    }
    return true;
  }

  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_{io_.get_executor()};
  SteadyClock clock_;
  rpc::Client client_;
  store::MemoryStore store_;
  lock::LockManager locks_;
  NsmBridge bridge_;
  AcceptingStatusCaller status_caller_;
  nsm::NsmService nsm_;
  nsm::Notifier notifier_;
  AcceptingCaller nlm_caller_;
  nlm::NlmService nlm_;
  rpc::Dispatcher dispatcher_;
  admin::Metrics metrics_;
  CallMetrics call_metrics_;
  AdminBackend backend_;
  uint32_t xid_ = 0;
  std::thread runner_;
};

TEST_F(AdminBackendTest, StatusCountsWhatTheServicesHold) {
  Populate();
  admin::StatusView status = backend_.Status();
  EXPECT_EQ(status.state_number, 3);
  EXPECT_EQ(status.server_name, "server-a");
  EXPECT_FALSE(status.grace.active);
  EXPECT_EQ(status.registrations, 3u);  // A and B by nlockd's NLM, kPeer by lockd-x.
  EXPECT_EQ(status.monitored_hosts, 3u);
  EXPECT_EQ(status.hosts, 2u);
  EXPECT_EQ(status.locks, 2u);
  EXPECT_EQ(status.shares, 1u);
  EXPECT_EQ(status.waiters, 1u);
  EXPECT_EQ(status.pending_grants, 0u);
  EXPECT_GE(status.uptime_seconds, 0);
}

TEST_F(AdminBackendTest, RegistrationsAreListedFilteredPagedAndFoundById) {
  Populate();
  admin::RegistrationQuery all;
  auto listed = backend_.ListRegistrations(all);
  EXPECT_EQ(listed.total, 3u);
  EXPECT_EQ(MonNames(listed.items), (std::set<std::string>{std::string(kHostA) + "/nlockd-nlm",
                                                           std::string(kHostB) + "/nlockd-nlm",
                                                           std::string(kPeer) + "/lockd-x"}));

  admin::RegistrationQuery by_my_name;
  by_my_name.my_name = "nlockd-nlm";
  EXPECT_EQ(backend_.ListRegistrations(by_my_name).total, 2u);

  admin::RegistrationQuery by_mon_name;
  by_mon_name.mon_name = kPeer;
  auto peer = backend_.ListRegistrations(by_mon_name);
  ASSERT_EQ(peer.items.size(), 1u);
  const admin::RegistrationView& view = peer.items[0];
  EXPECT_EQ(view.my_name, "lockd-x");
  EXPECT_EQ(view.my_prog, 100021);
  EXPECT_EQ(view.my_vers, 4);
  EXPECT_EQ(view.my_proc, 16);
  EXPECT_EQ(view.id, admin::MakeRegistrationId(kPeer, "lockd-x", 100021, 4, 16));
  EXPECT_EQ(view.priv.size(), 16u);

  admin::RegistrationQuery paged;
  paged.page = admin::Page{1, 1};
  auto page = backend_.ListRegistrations(paged);
  EXPECT_EQ(page.total, 3u);
  ASSERT_EQ(page.items.size(), 1u);
  paged.page = admin::Page{3, 10};
  EXPECT_TRUE(backend_.ListRegistrations(paged).items.empty());

  EXPECT_EQ(backend_.GetRegistration(view.id).mon_name, kPeer);
  EXPECT_EQ(ErrorOf([&] { backend_.GetRegistration("0123456789abcdef"); }),
            ApiErrorKind::kNotFound);
}

TEST_F(AdminBackendTest, DeletingARegistrationRemovesItFromTheRegistryAndTheStore) {
  Populate();
  const std::string id = admin::MakeRegistrationId(kPeer, "lockd-x", 100021, 4, 16);
  backend_.DeleteRegistration(id);
  EXPECT_EQ(backend_.ListRegistrations({}).total, 2u);
  for (const auto& row : store_.LoadAll().registrations) EXPECT_NE(row.mon_name, kPeer);
  EXPECT_EQ(store_.LoadAll().registrations.size(), 2u);
  EXPECT_EQ(ErrorOf([&] { backend_.DeleteRegistration(id); }), ApiErrorKind::kNotFound);
}

TEST_F(AdminBackendTest, NlockdsOwnRegistrationOfAClientHostCannotBeDeleted) {
  Populate();
  const std::string id = admin::MakeRegistrationId(kHostA, "nlockd-nlm", 0, 0, 0);
  EXPECT_EQ(backend_.GetRegistration(id).mon_name, kHostA);
  EXPECT_EQ(ErrorOf([&] { backend_.DeleteRegistration(id); }), ApiErrorKind::kConflict);
  EXPECT_EQ(backend_.ListRegistrations({}).total, 3u);
  EXPECT_EQ(store_.LoadAll().registrations.size(), 3u);
}

TEST_F(AdminBackendTest, AServiceWithoutHaHasNoLeaseToRelease) {
  EXPECT_EQ(ErrorOf([&] { backend_.ReleaseService(); }), ApiErrorKind::kConflict);
}

TEST_F(AdminBackendTest, HostsAreListedInNameOrderWithTheirCountsAndPaged) {
  Populate();
  auto hosts = backend_.ListHosts(admin::Page{});
  EXPECT_EQ(hosts.total, 2u);
  ASSERT_EQ(hosts.items.size(), 2u);
  const admin::HostView& a = hosts.items[0];
  const admin::HostView& b = hosts.items[1];
  EXPECT_EQ(a.name, kHostA);
  EXPECT_EQ(a.label, "client-a");
  EXPECT_TRUE(a.monitored);
  EXPECT_EQ(a.locks, 2u);
  EXPECT_EQ(a.shares, 1u);
  EXPECT_EQ(a.waiters, 0u);
  EXPECT_EQ(b.name, kHostB);
  EXPECT_EQ(b.label, "client-b");
  EXPECT_TRUE(b.monitored);
  EXPECT_EQ(b.locks, 0u);
  EXPECT_EQ(b.waiters, 1u);

  auto second = backend_.ListHosts(admin::Page{1, 1});
  EXPECT_EQ(second.total, 2u);
  ASSERT_EQ(second.items.size(), 1u);
  EXPECT_EQ(second.items[0].name, kHostB);
}

TEST_F(AdminBackendTest, AHostsDetailHasItsLocksSharesAndWaiters) {
  Populate();
  admin::HostDetail a = backend_.GetHost(kHostA);
  EXPECT_EQ(a.host.name, kHostA);
  EXPECT_EQ(a.host.locks, 2u);
  EXPECT_EQ(Render(a.locks), "127.0.0.11 file1 svid=1 [0+10] x; 127.0.0.11 file2 svid=1 [0+0] x; ");
  ASSERT_EQ(a.shares.size(), 1u);
  EXPECT_EQ(a.shares[0].file, "file3");
  EXPECT_EQ(a.shares[0].owner, "oh-share");
  EXPECT_EQ(a.shares[0].access, "read");
  EXPECT_EQ(a.shares[0].deny, "write");
  EXPECT_TRUE(a.waiters.empty());

  admin::HostDetail b = backend_.GetHost(kHostB);
  EXPECT_TRUE(b.locks.empty());
  ASSERT_EQ(b.waiters.size(), 1u);
  const admin::WaiterView& waiter = b.waiters[0];
  EXPECT_EQ(waiter.file, "file1");
  EXPECT_EQ(waiter.svid, 2);
  EXPECT_EQ(waiter.owner, "oh-2");
  EXPECT_EQ(waiter.offset, 5u);
  EXPECT_EQ(waiter.length, 5u);
  EXPECT_TRUE(waiter.exclusive);
  EXPECT_FALSE(waiter.granted);

  EXPECT_EQ(ErrorOf([&] { backend_.GetHost("192.0.2.99"); }), ApiErrorKind::kNotFound);
}

TEST_F(AdminBackendTest, EachWaiterShowsTheLocksItWaitsForAndWhetherTheirHoldersWait) {
  Populate();  // B's owner 2 waits for A's owner 1 on file1, and A waits for nobody.
  ASSERT_EQ(Lock(kHostB, LockArgs("client-b", 3, "file4", 0, 1)), nlm::NLM4_GRANTED);
  ASSERT_EQ(Lock(kHostA, LockArgs("client-a", 1, "file4", 0, 1, true)), nlm::NLM4_BLOCKED);
  // Now A waits for B's owner 3, which waits for nobody: the chain B/2 -> A/1 -> B/3.
  std::vector<std::string> edges;
  for (const admin::WaiterView& w : backend_.ListWaiters({}).items) {
    ASSERT_EQ(w.blocked_by.size(), 1u);
    ASSERT_EQ(w.blockers, 1u);
    const admin::BlockerView& held = w.blocked_by[0];
    std::string edge = std::to_string(w.id) + " " + w.host + "/" + std::to_string(w.svid) + " -> " +
                       held.host + "/" + std::to_string(held.svid) + " [" +
                       std::to_string(held.offset) + "+" + std::to_string(held.length) +
                       "] waiting:";
    for (uint64_t id : held.waiting) edge += " " + std::to_string(id);
    edges.push_back(edge);
  }
  std::sort(edges.begin(), edges.end());
  EXPECT_EQ(edges, (std::vector<std::string>{"1 127.0.0.12/2 -> 127.0.0.11/1 [0+10] waiting: 2",
                                             "2 127.0.0.11/1 -> 127.0.0.12/3 [0+1] waiting:"}));
}

TEST_F(AdminBackendTest, LocksSharesAndWaitersAreFilteredByHostAndFile) {
  Populate();
  ASSERT_EQ(Lock(kHostB, LockArgs("client-b", 3, "file4", 0, 1)), nlm::NLM4_GRANTED);
  admin::StateQuery all;
  EXPECT_EQ(Render(backend_.ListLocks(all).items),
            "127.0.0.11 file1 svid=1 [0+10] x; 127.0.0.11 file2 svid=1 [0+0] x; "
            "127.0.0.12 file4 svid=3 [0+1] x; ");
  admin::StateQuery host_b;
  host_b.host = kHostB;
  EXPECT_EQ(Render(backend_.ListLocks(host_b).items), "127.0.0.12 file4 svid=3 [0+1] x; ");
  admin::StateQuery file1;
  file1.file = "file1";
  EXPECT_EQ(Render(backend_.ListLocks(file1).items), "127.0.0.11 file1 svid=1 [0+10] x; ");
  admin::StateQuery both;
  both.host = kHostB;
  both.file = "file1";
  EXPECT_TRUE(backend_.ListLocks(both).items.empty());
  admin::StateQuery paged;
  paged.page = admin::Page{2, 5};
  auto page = backend_.ListLocks(paged);
  EXPECT_EQ(page.total, 3u);
  EXPECT_EQ(page.items.size(), 1u);

  EXPECT_EQ(backend_.ListShares(all).total, 1u);
  EXPECT_EQ(backend_.ListShares(host_b).total, 0u);

  auto waiters = backend_.ListWaiters(file1);
  ASSERT_EQ(waiters.items.size(), 1u);
  EXPECT_EQ(waiters.items[0].host, kHostB);
  admin::StateQuery host_a;
  host_a.host = kHostA;
  EXPECT_EQ(backend_.ListWaiters(host_a).total, 0u);
}

TEST_F(AdminBackendTest, ReleasingAHostDropsItsStateAndGrantsTheWaitersItBlocked) {
  Populate();
  admin::ReleaseResult released = backend_.ReleaseHost(kHostA);
  EXPECT_EQ(released.locks, 2u);
  EXPECT_EQ(released.shares, 1u);
  EXPECT_EQ(released.waiters, 0u);
  EXPECT_EQ(released.waiters_granted, 1u);

  admin::StateQuery host_a;
  host_a.host = kHostA;
  EXPECT_EQ(backend_.ListLocks(host_a).total, 0u);
  EXPECT_EQ(backend_.ListShares(host_a).total, 0u);
  // B's waiter was granted and its GRANTED callback acknowledged: B holds the lock.
  ASSERT_TRUE(Eventually([&] { return backend_.Status().pending_grants == 0; }));
  EXPECT_EQ(Render(backend_.ListLocks({}).items), "127.0.0.12 file1 svid=2 [5+5] x; ");
  EXPECT_EQ(backend_.ListWaiters({}).total, 0u);
  const std::vector<std::string> calls = nlm_caller_.calls();
  EXPECT_NE(std::find(calls.begin(), calls.end(),
                      std::string(kHostB) + ":" + std::to_string(nlm::NLM_GRANTED)),
            calls.end());

  EXPECT_EQ(ErrorOf([&] { backend_.ReleaseHost("192.0.2.99"); }), ApiErrorKind::kNotFound);
}

// The admin release names hosts as a reboot notification does: by key or by caller_name, so
// that under host_key caller_name ("client-a@127.0.0.11") the name the operator sees works.
TEST_F(AdminBackendTest, ReleasingByCallerNameReleasesTheHostsThatSentIt) {
  Populate();
  admin::ReleaseResult released = backend_.ReleaseHost("CLIENT-A");
  EXPECT_EQ(released.locks, 2u);
  EXPECT_EQ(released.shares, 1u);
  admin::StateQuery host_a;
  host_a.host = kHostA;
  EXPECT_EQ(backend_.ListLocks(host_a).total, 0u);
  EXPECT_EQ(ErrorOf([&] { backend_.ReleaseHost("client-z"); }), ApiErrorKind::kNotFound);
}

TEST_F(AdminBackendTest, NotifyQueuesSmNotifyToMonitoredHosts) {
  Populate();
  EXPECT_EQ(backend_.Notify(std::nullopt).hosts, 3u);
  EXPECT_EQ(backend_.Notify(std::string(kPeer)).hosts, 1u);
  EXPECT_EQ(ErrorOf([&] { backend_.Notify(std::string("192.0.2.99")); }), ApiErrorKind::kNotFound);
  // Each round reaches the hosts (their statd port is closed: every attempt fails, once).
  ASSERT_TRUE(Eventually([&] {
    std::promise<nsm::NotifierStats> stats;
    asio::post(io_, [&] { stats.set_value(notifier_.stats()); });
    return stats.get_future().get().attempts >= 4;
  }));
}

TEST_F(AdminBackendTest, RefreshReadsTheServicesOwnCountersIntoTheMetrics) {
  OnIo([&] { locks_.StartGrace(lock::GraceMode::kClassic); });
  auto reclaim = LockArgs("client-a", 1, "file1", 0, 10);
  reclaim.reclaim = true;
  auto fresh = LockArgs("client-b", 2, "file2", 0, 10);
  auto reclaim_msg = LockArgs("client-a", 1, "file3", 0, 10);
  reclaim_msg.reclaim = true;
  EXPECT_TRUE(Dispatch(kHostA, nlm::NLM_LOCK, reclaim));
  EXPECT_TRUE(Dispatch(kHostB, nlm::NLM_LOCK, fresh));  // Not a reclaim, in grace: refused.
  EXPECT_TRUE(Dispatch(kHostA, nlm::NLM_LOCK_MSG, reclaim_msg));

  const std::string lock_res = R"(nlm_callbacks_total{kind="lock_res",result="ok"} 1)";
  // Status() is a view: it feeds no metric.
  ASSERT_TRUE(Eventually([&] { return backend_.Status().locks == 2; }));
  EXPECT_NE(metrics_.Serialize().find("nlm_reclaims_total 0"), std::string::npos);
  EXPECT_NE(metrics_.Serialize().find("nlm_deadlocks_refused_total 0"), std::string::npos);
  std::string text;
  ASSERT_TRUE(Eventually([&] {
    metrics_.Refresh(backend_.Status());
    text = metrics_.Serialize();
    return text.find(lock_res) != std::string::npos;
  })) << text;
  EXPECT_NE(text.find(R"(nlm_requests_total{procedure="LOCK",result="granted",version="4"} 1)"),
            std::string::npos)
      << text;
  EXPECT_NE(
      text.find(
          R"(nlm_requests_total{procedure="LOCK",result="denied_grace_period",version="4"} 1)"),
      std::string::npos);
  EXPECT_NE(text.find(R"(nlm_requests_total{procedure="LOCK_MSG",result="granted",version="4"} 1)"),
            std::string::npos);
  EXPECT_NE(text.find("nlm_reclaims_total 2"), std::string::npos);
  // The owners' values, however often they are read.
  metrics_.Refresh(backend_.Status());
  metrics_.Refresh(backend_.Status());
  EXPECT_NE(metrics_.Serialize().find("nlm_reclaims_total 2"), std::string::npos);
  EXPECT_NE(metrics_.Serialize().find(lock_res), std::string::npos);
}

// A blocking TCP client of one listener: NULL calls and raw record headers.
class RecordClient {
 public:
  explicit RecordClient(uint16_t port) : socket_(io_) {
    socket_.connect(asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
  }
  // Sends procedure 0 of `program` and returns the reply's length.
  size_t CallNull(uint32_t xid, uint32_t program, uint32_t version) {
    std::vector<uint8_t> call;
    xdr::Encoder enc(call);
    rpc::EncodeCallHeader(enc, xid, program, version, 0);
    SendHeader(static_cast<uint32_t>(call.size()));
    asio::write(socket_, asio::buffer(call));
    std::array<uint8_t, 4> header{};
    asio::read(socket_, asio::buffer(header));
    const uint32_t length = ((uint32_t{header[0]} & 0x7f) << 24) | (uint32_t{header[1]} << 16) |
                            (uint32_t{header[2]} << 8) | uint32_t{header[3]};
    std::vector<uint8_t> reply(length);
    asio::read(socket_, asio::buffer(reply));
    return length;
  }
  // Announces a last fragment of `length` bytes.
  void SendHeader(uint32_t length) {
    const uint32_t marked = length | 0x80000000U;
    const std::array<uint8_t, 4> header = {
        static_cast<uint8_t>(marked >> 24), static_cast<uint8_t>(marked >> 16),
        static_cast<uint8_t>(marked >> 8), static_cast<uint8_t>(marked)};
    asio::write(socket_, asio::buffer(header));
  }
  // True once the server closed the connection.
  bool Closed() {
    std::array<uint8_t, 1> byte{};
    asio::error_code ec;
    asio::read(socket_, asio::buffer(byte), ec);
    return ec == asio::error::eof || ec == asio::error::connection_reset;
  }

 private:
  asio::io_context io_;
  asio::ip::tcp::socket socket_;
};

TEST_F(AdminBackendTest, RpcCountersSumEveryListener) {
  // As nlockd with --nsm-listen: NLM on one port, NSM on another.
  std::vector<std::unique_ptr<rpc::Server>> servers;
  OnIo([&] {
    nsm_.Register(dispatcher_);
    rpc::ServerOptions nlm_options;
    nlm_options.programs = {nlm::NLM_PROG};
    rpc::ServerOptions nsm_options;
    nsm_options.programs = {nsm::SM_PROG};
    nsm_options.max_record_size = 4096;
    for (auto* options : {&nlm_options, &nsm_options}) {
      servers.push_back(std::make_unique<rpc::Server>(io_.get_executor(), dispatcher_, *options));
      servers.back()->Listen(asio::ip::make_address("127.0.0.1"), 0);
      servers.back()->Start();
    }
  });
  backend_.MarkListening(servers);

  RecordClient to_nlm(servers[0]->port());
  RecordClient to_nsm(servers[1]->port());
  EXPECT_GT(to_nlm.CallNull(1, nlm::NLM_PROG, nlm::NLM4_VERS), 0u);
  EXPECT_GT(to_nsm.CallNull(2, nsm::SM_PROG, nsm::SM_VERS), 0u);
  EXPECT_GT(to_nsm.CallNull(3, nsm::SM_PROG, nsm::SM_VERS), 0u);
  RecordClient oversized(servers[1]->port());
  oversized.SendHeader(1 << 20);
  EXPECT_TRUE(oversized.Closed());

  rpc::ServerStats nlm_port;
  rpc::ServerStats nsm_port;
  ASSERT_TRUE(Eventually([&] {
    OnIo([&] {
      nlm_port = servers[0]->stats();
      nsm_port = servers[1]->stats();
    });
    return nsm_port.records_too_large == 1 && nlm_port.open_connections == 1 &&
           nsm_port.open_connections == 1;
  }));
  EXPECT_GT(nlm_port.bytes_received, 0u);
  EXPECT_GT(nsm_port.bytes_received, nlm_port.bytes_received);
  metrics_.Refresh(backend_.Status());
  const std::string text = metrics_.Serialize();
  const auto line = [](const std::string& name, uint64_t value) {
    return "\n" + name + " " + std::to_string(value) + "\n";
  };
  EXPECT_NE(text.find(line("rpc_bytes_received_total",
                           nlm_port.bytes_received + nsm_port.bytes_received)),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(line("rpc_bytes_sent_total", nlm_port.bytes_sent + nsm_port.bytes_sent)),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(line("rpc_connections", 2)), std::string::npos) << text;
  EXPECT_NE(text.find(R"(rpc_malformed_requests_total{reason="record_too_large"} 1)"),
            std::string::npos)
      << text;

  for (auto& server : servers) OnIo(server->Shutdown());
  OnIo([&] { servers.clear(); });
}

TEST_F(AdminBackendTest, ReadinessAndCallsBeforeListeningAndAfterClose) {
  admin::ReadinessView readiness = backend_.Readiness();
  EXPECT_TRUE(readiness.store_loaded);
  EXPECT_FALSE(readiness.listening);
  EXPECT_FALSE(readiness.ready());
  backend_.Close();
  EXPECT_EQ(ErrorOf([&] { backend_.Status(); }), ApiErrorKind::kUnavailable);
  EXPECT_EQ(ErrorOf([&] { backend_.ListHosts(admin::Page{}); }), ApiErrorKind::kUnavailable);
  EXPECT_FALSE(backend_.Readiness().listening);
}

}  // namespace
}  // namespace nlockd::server
