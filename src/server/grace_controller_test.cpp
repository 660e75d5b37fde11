// SPDX-License-Identifier: Apache-2.0
// GraceController: the start-up grace period over a real LockManager and store (memory, and a
// SQLite file where the store's own completeness record matters). Time is a ManualClock; the
// controller's watcher ticks every millisecond of real time.

#include "server/grace_controller.hpp"

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <asio/io_context.hpp>
#include <gtest/gtest.h>
#include <unistd.h>

#include "base/clock.hpp"
#include "lock/testing/test_util.hpp"
#include "server/lock_journal_store.hpp"
#include "store/open_store.hpp"
#include "testutil/run_coroutine.hpp"
#include "testutil/temp_dir.hpp"

namespace nlockd::server {
namespace {

using lock::LockStatus;
using lock::LockType;
using lock::testing::Reclaim;
using lock::testing::Req;
using nlm::JournalEntry;
using std::chrono::seconds;

store::Registration Monitored(const std::string& mon_name) {
  store::Registration registration;
  registration.mon_name = mon_name;
  registration.my_id = store::MyId{"nlockd-nlm", 0, 0, 0};
  return registration;
}

class GraceControllerTest : public ::testing::Test {
 protected:
  // Nothing the controller spawned may outlive it.
  void TearDown() override { EXPECT_TRUE(testutil::RunCoroutine(io_, controller_.Shutdown())); }

  // Before the "crash": a holds f [0,10) and [20,30), b holds g [0,10); all journaled.
  void PersistPreCrashTable() {
    ManualClock before_clock;
    lock::LockManager before{before_clock};
    StoreLockJournal journal{before, *store_};
    ASSERT_EQ(before.Lock(Req(f_, a_, 0, 10)).status, LockStatus::kGranted);
    ASSERT_EQ(before.Lock(Req(f_, a_, 20, 10)).status, LockStatus::kGranted);
    ASSERT_EQ(before.Lock(Req(g_, b_, 0, 10)).status, LockStatus::kGranted);
    ASSERT_TRUE(testutil::RunCoroutine(
        io_, journal.Record({JournalEntry::Locks(f_, a_), JournalEntry::Locks(g_, b_)})));
  }

  store::LoadedState Loaded(std::vector<std::string> monitored) {
    store::LoadedState loaded = store_->LoadAll();
    for (const auto& name : monitored) loaded.registrations.push_back(Monitored(name));
    return loaded;
  }

  void Begin(GracePlan::Kind kind, std::vector<std::string> monitored = {"10.0.0.1", "10.0.0.2"}) {
    controller_.set_journal(&journal_);
    controller_.Begin(GracePlan{kind, "test"}, Loaded(std::move(monitored)));
  }

  // Runs the executor (the watcher ticks every ms) until `done` or 5 s of real time.
  bool RunUntil(const std::function<bool()>& done) {
    const auto deadline = std::chrono::steady_clock::now() + seconds(5);
    while (!done() && std::chrono::steady_clock::now() < deadline) {
      io_.restart();
      io_.run_for(std::chrono::milliseconds(5));
    }
    return done();
  }
  void RunFor(std::chrono::milliseconds real) {
    io_.restart();
    io_.run_for(real);
  }

  size_t PersistedLocksOf(const std::string& host) {
    size_t count = 0;
    for (const auto& row : store_->LoadAll().locks) count += row.host == host ? 1u : 0u;
    return count;
  }

  static GraceControllerOptions Options() {
    GraceControllerOptions options;
    options.duration = seconds(90);
    options.floor = seconds(10);
    options.tick = std::chrono::milliseconds(1);
    return options;
  }

  asio::io_context io_;
  ManualClock clock_;
  lock::LockManager locks_{clock_};
  std::unique_ptr<store::Store> store_ = store::OpenStore("memory:", store::StoreOptions{});
  StoreLockJournal journal_{locks_, *store_};
  lock::Grants grants_sent_;
  bool round_active_ = false;
  GraceController controller_{io_.get_executor(),
                              clock_,
                              locks_,
                              *store_,
                              GraceHooks{[this](lock::Grants grants) {
                                           grants_sent_.insert(grants_sent_.end(), grants.begin(),
                                                               grants.end());
                                         },
                                         [this] { return round_active_; }},
                              Options()};
  const lock::FileKey f_{"fh1"};
  const lock::FileKey g_{"fh2"};
  const lock::LockOwner a_{lock::HostId("10.0.0.1"), 7, lock::OwnerHandle("7@a")};
  const lock::LockOwner b_{lock::HostId("10.0.0.2"), 9, lock::OwnerHandle("9@b")};
  const lock::LockOwner c_{lock::HostId("10.0.0.3"), 1, lock::OwnerHandle("1@c")};
};

TEST_F(GraceControllerTest, FineGrainedGraceEndsOnceEveryRestoredLockIsReclaimed) {
  PersistPreCrashTable();
  Begin(GracePlan::Kind::kFineGrained);
  ASSERT_TRUE(locks_.grace().IsActive());
  EXPECT_EQ(locks_.AwaitingReclaimCount(), 3u);
  // Unrelated work is served at once; a restored range is not.
  EXPECT_EQ(locks_.Lock(Req(g_, c_, 100, 1)).status, LockStatus::kGranted);
  EXPECT_EQ(locks_.Lock(Req(f_, c_, 5, 1)).status, LockStatus::kDeniedGrace);

  EXPECT_EQ(locks_.Lock(Reclaim(f_, a_, 0, 10)).status, LockStatus::kGranted);
  EXPECT_EQ(locks_.Lock(Reclaim(f_, a_, 20, 10)).status, LockStatus::kGranted);
  RunFor(std::chrono::milliseconds(20));
  EXPECT_TRUE(locks_.grace().IsActive()) << "b has not reclaimed yet";

  EXPECT_EQ(locks_.Lock(Reclaim(g_, b_, 0, 10)).status, LockStatus::kGranted);
  ASSERT_TRUE(RunUntil([&] { return !locks_.grace().IsActive(); }));
  EXPECT_EQ(locks_.grace().last_end_reason(), lock::GraceEndReason::kAllReclaimed);
  EXPECT_EQ(controller_.dropped(), 0u);
  // The reclaimed table is what was persisted before the crash.
  ASSERT_TRUE(RunUntil([&] { return journal_.restored_pending() == 0; }));
  EXPECT_EQ(PersistedLocksOf("10.0.0.1"), 2u);
  EXPECT_EQ(PersistedLocksOf("10.0.0.2"), 1u);
}

TEST_F(GraceControllerTest, TheTimerDropsWhatWasNotReclaimedAndServesItsWaiters) {
  PersistPreCrashTable();
  Begin(GracePlan::Kind::kFineGrained);
  EXPECT_EQ(locks_.Lock(Reclaim(f_, a_, 0, 10)).status, LockStatus::kGranted);
  // c reclaims (blocking) a range b still awaits: it waits for b.
  lock::LockRequest blocked = Reclaim(g_, c_, 5, 1);
  blocked.block = true;
  ASSERT_EQ(locks_.Lock(blocked).status, LockStatus::kBlocked);

  clock_.Advance(seconds(91));
  ASSERT_TRUE(RunUntil([&] { return locks_.grace().last_end_reason().has_value(); }));
  EXPECT_EQ(locks_.grace().last_end_reason(), lock::GraceEndReason::kTimer);
  EXPECT_EQ(controller_.dropped(), 2u);  // a's [20,30) and b's lock
  ASSERT_EQ(grants_sent_.size(), 1u);
  // Settled: the dropped rows are gone from the store, the reclaimed one stays.
  ASSERT_TRUE(RunUntil([&] { return PersistedLocksOf("10.0.0.2") == 0; }));
  EXPECT_EQ(PersistedLocksOf("10.0.0.1"), 1u);
}

TEST_F(GraceControllerTest, AnUnreachableHostLosesOnlyItsRestoredLocks) {
  PersistPreCrashTable();
  Begin(GracePlan::Kind::kFineGrained);
  controller_.HostUnreachable("10.0.0.2");
  EXPECT_EQ(locks_.AwaitingReclaimCount(), 2u);
  EXPECT_EQ(locks_.Lock(Req(g_, c_, 0, 10)).status, LockStatus::kGranted);
  ASSERT_TRUE(RunUntil([&] { return PersistedLocksOf("10.0.0.2") == 0; }));
  EXPECT_EQ(PersistedLocksOf("10.0.0.1"), 2u);
  EXPECT_TRUE(locks_.grace().IsActive());
}

TEST_F(GraceControllerTest, HostsNobodyMonitorsAreNotAwaited) {
  PersistPreCrashTable();
  // b was never monitored (NM_LOCK): nobody will tell it to reclaim.
  Begin(GracePlan::Kind::kFineGrained, {"10.0.0.1"});
  EXPECT_EQ(locks_.AwaitingReclaimCount(), 2u);
  EXPECT_EQ(controller_.dropped(), 1u);
  EXPECT_EQ(controller_.expected(), 3u);
  EXPECT_EQ(locks_.Lock(Reclaim(f_, a_, 0, 10)).status, LockStatus::kGranted);
  EXPECT_EQ(controller_.reclaimed(), 1u);
}

TEST_F(GraceControllerTest, EndingByTheAdminCountsWhatItDrops) {
  PersistPreCrashTable();
  Begin(GracePlan::Kind::kFineGrained);
  EXPECT_EQ(locks_.Lock(Reclaim(f_, a_, 0, 10)).status, LockStatus::kGranted);
  ASSERT_TRUE(controller_.End(lock::GraceEndReason::kAdmin));
  EXPECT_FALSE(controller_.End(lock::GraceEndReason::kAdmin));
  EXPECT_EQ(controller_.dropped(), 2u);
  EXPECT_EQ(controller_.reclaimed(), 1u);
  // The watcher settles the store: the dropped rows go.
  ASSERT_TRUE(RunUntil([&] { return PersistedLocksOf("10.0.0.2") == 0; }));
  EXPECT_EQ(PersistedLocksOf("10.0.0.1"), 1u);
}

TEST_F(GraceControllerTest, RestoredLocksReleasedByAHostRebootAreDroppedNotReclaimed) {
  PersistPreCrashTable();
  Begin(GracePlan::Kind::kFineGrained);
  EXPECT_EQ(locks_.Lock(Reclaim(g_, b_, 0, 10)).status, LockStatus::kGranted);
  // a reboots before it reclaims (SM_NOTIFY): NLM releases everything it held.
  EXPECT_EQ(locks_.ReleaseHost(a_.host).locks, 2u);
  ASSERT_TRUE(RunUntil([&] { return !locks_.grace().IsActive(); }));
  EXPECT_EQ(locks_.grace().last_end_reason(), lock::GraceEndReason::kAllReclaimed);
  EXPECT_EQ(controller_.expected(), 3u);
  EXPECT_EQ(controller_.reclaimed(), 1u) << "only b's reclaim";
  EXPECT_EQ(controller_.dropped(), 2u) << "a's two restored locks";
}

// What the controller reported, rendered for comparison.
class GraceEventsTest : public GraceControllerTest {
 protected:
  GraceEventsTest() {
    controller_.set_events(GraceEvents{
        [this](const GraceStartedEvent& e) {
          events_.push_back("started mode=" + std::string(lock::ToString(e.mode)) +
                            " seconds=" + std::to_string(e.duration.count()) +
                            " reason=" + e.reason + " locks=" + std::to_string(e.restored_locks) +
                            " shares=" + std::to_string(e.restored_shares) +
                            " awaiting=" + std::to_string(e.awaiting_reclaim));
        },
        [this](const GraceEndedEvent& e) {
          events_.push_back("ended reason=" + std::string(lock::ToString(e.reason)) +
                            " reclaimed=" + std::to_string(e.reclaimed) +
                            " dropped=" + std::to_string(e.dropped) + " seconds=" +
                            std::to_string(std::chrono::duration_cast<seconds>(e.lasted).count()));
        }});
  }

  std::vector<std::string> events_;
};

TEST_F(GraceEventsTest, StartAndEarlyEndAreReportedWithTheirCounts) {
  PersistPreCrashTable();
  Begin(GracePlan::Kind::kFineGrained, {"10.0.0.1"});  // b is not monitored: dropped at once.
  ASSERT_EQ(events_, (std::vector<std::string>{
                         "started mode=fine-grained seconds=90 reason=test locks=3 shares=0 "
                         "awaiting=2"}));
  clock_.Advance(seconds(3));
  EXPECT_EQ(locks_.Lock(Reclaim(f_, a_, 0, 10)).status, LockStatus::kGranted);
  EXPECT_EQ(locks_.Lock(Reclaim(f_, a_, 20, 10)).status, LockStatus::kGranted);
  ASSERT_TRUE(RunUntil([&] { return events_.size() == 2; }));
  EXPECT_EQ(events_[1], "ended reason=all-reclaimed reclaimed=2 dropped=1 seconds=3");
  RunFor(std::chrono::milliseconds(20));
  EXPECT_EQ(events_.size(), 2u);  // Once.
}

TEST_F(GraceEventsTest, TheTimersEndIsReported) {
  PersistPreCrashTable();
  Begin(GracePlan::Kind::kFineGrained);
  clock_.Advance(seconds(91));
  ASSERT_TRUE(RunUntil([&] { return events_.size() == 2; }));
  EXPECT_EQ(events_[1], "ended reason=timer reclaimed=0 dropped=3 seconds=91");
}

TEST_F(GraceEventsTest, TheAdminsEndIsReportedAtOnceAndOnlyOnce) {
  PersistPreCrashTable();
  Begin(GracePlan::Kind::kFineGrained);
  EXPECT_EQ(locks_.Lock(Reclaim(g_, b_, 0, 10)).status, LockStatus::kGranted);
  ASSERT_TRUE(controller_.End(lock::GraceEndReason::kAdmin));
  // Before the watcher ran: the admin API's caller hears of it in the same turn.
  ASSERT_EQ(events_.size(), 2u);
  EXPECT_EQ(events_[1], "ended reason=admin reclaimed=1 dropped=2 seconds=0");
  RunFor(std::chrono::milliseconds(20));
  EXPECT_EQ(events_.size(), 2u);
}

TEST_F(GraceEventsTest, NoWindowReportsNothing) {
  Begin(GracePlan::Kind::kNone);
  RunFor(std::chrono::milliseconds(20));
  EXPECT_TRUE(events_.empty());
}

TEST_F(GraceEventsTest, AWindowOpenAtShutdownReportsNoEnd) {
  PersistPreCrashTable();
  Begin(GracePlan::Kind::kFineGrained);
  ASSERT_EQ(events_.size(), 1u);
  controller_.Stop();
  clock_.Advance(seconds(91));
  RunFor(std::chrono::milliseconds(20));
  EXPECT_EQ(events_.size(), 1u);
}

TEST_F(GraceControllerTest, ShutdownLeavesNoCoroutineBehindAndGraceAsItIs) {
  PersistPreCrashTable();
  Begin(GracePlan::Kind::kFineGrained);
  RunFor(std::chrono::milliseconds(5));
  EXPECT_TRUE(testutil::RunCoroutine(io_, controller_.Shutdown()));
  EXPECT_TRUE(locks_.grace().IsActive());
  EXPECT_EQ(locks_.AwaitingReclaimCount(), 3u);
  // The watcher is gone: nothing is left for the executor, and the timer ends nothing.
  io_.restart();
  EXPECT_EQ(io_.poll(), 0u);
  clock_.Advance(seconds(91));
  RunFor(std::chrono::milliseconds(10));
  EXPECT_EQ(PersistedLocksOf("10.0.0.1"), 2u);
}

TEST_F(GraceControllerTest, NoGraceClearsTheStaleTable) {
  PersistPreCrashTable();
  Begin(GracePlan::Kind::kNone);
  EXPECT_FALSE(locks_.grace().IsActive());
  EXPECT_EQ(locks_.Counts().locks, 0u);
  ASSERT_TRUE(RunUntil([&] { return store_->LoadAll().locks.empty(); }));
}

// Classic grace over a SQLite file whose previous run ended on another boot.
class ClassicGraceControllerTest : public ::testing::Test {
 protected:
  std::unique_ptr<store::Store> Open(const std::string& boot_id) {
    store::StoreOptions options;
    options.boot_id = boot_id;
    return store::OpenStore(uri_, options);
  }

  testutil::TempDir dir_{"grace-controller"};
  const std::string uri_ = "sqlite:" + dir_.path() + "/nlockd.db";
};

TEST_F(ClassicGraceControllerTest, EndsEarlyOnlyAfterTheNotificationsAndTheFloor) {
  asio::io_context io;
  const lock::FileKey f{"fh1"};
  const lock::LockOwner a{lock::HostId("10.0.0.1"), 7, lock::OwnerHandle("7@a")};
  {
    auto store = Open("boot-1");
    ManualClock clock;
    lock::LockManager before{clock};
    StoreLockJournal journal{before, *store};
    ASSERT_EQ(before.Lock(Req(f, a, 0, 10)).status, LockStatus::kGranted);
    ASSERT_TRUE(testutil::RunCoroutine(io, journal.Record({JournalEntry::Locks(f, a)})));
    store->PutRegistration(Monitored("10.0.0.1"), [](std::exception_ptr) {});
  }  // No clean shutdown: a crash.

  auto store = Open("boot-2");  // The host rebooted: the table may be incomplete.
  ASSERT_FALSE(store->startup().lock_table_complete);
  ManualClock clock;
  lock::LockManager locks{clock};
  StoreLockJournal journal{locks, *store};
  bool round_active = true;
  GraceControllerOptions options;
  options.floor = seconds(10);
  options.tick = std::chrono::milliseconds(1);
  GraceController controller(io.get_executor(), clock, locks, *store,
                             GraceHooks{[](lock::Grants) {}, [&] { return round_active; }},
                             options);
  controller.set_journal(&journal);
  store::LoadedState loaded = store->LoadAll();
  ASSERT_EQ(loaded.locks.size(), 1u);
  controller.Begin(DecideGrace(store->startup(), loaded, seconds(90)), loaded);
  ASSERT_EQ(locks.grace().mode(), lock::GraceMode::kClassic);
  auto run = [&](int ms) {
    io.restart();
    io.run_for(std::chrono::milliseconds(ms));
  };

  ASSERT_EQ(locks.Lock(Reclaim(f, a, 0, 10)).status, LockStatus::kGranted);
  run(20);
  EXPECT_TRUE(locks.grace().IsActive()) << "notifications are still being retried";
  round_active = false;
  controller.NotificationAnswered("10.0.0.1");
  clock.Advance(seconds(9));
  run(20);
  EXPECT_TRUE(locks.grace().IsActive()) << "the floor has not passed";
  clock.Advance(seconds(2));
  for (int i = 0; i < 500 && locks.grace().IsActive(); ++i) run(5);
  EXPECT_FALSE(locks.grace().IsActive());
  EXPECT_EQ(locks.grace().last_end_reason(), lock::GraceEndReason::kAllReclaimed);
  for (int i = 0; i < 500 && journal.restored_pending() > 0; ++i) run(5);
  run(50);  // MarkLockTableComplete follows the settle.
  EXPECT_TRUE(testutil::RunCoroutine(io, controller.Shutdown()));
  store.reset();
  // The next start trusts the table again (process crash on the same boot).
  EXPECT_TRUE(Open("boot-2")->startup().lock_table_complete);
}

}  // namespace
}  // namespace nlockd::server
