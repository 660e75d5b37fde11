// SPDX-License-Identifier: Apache-2.0
// StoreLockJournal and the start-up recovery decisions, on the memory store.

#include "server/lock_journal_store.hpp"

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <random>

#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <gtest/gtest.h>

#include "base/clock.hpp"
#include "base/error.hpp"
#include "lock/testing/test_util.hpp"
#include "server/recovery.hpp"
#include "store/log/logged_store.hpp"
#include "store/open_store.hpp"
#include "store/testing/write_only_store.hpp"
#include "testutil/run_coroutine.hpp"
#include "testutil/temp_dir.hpp"

namespace nlockd::server {
namespace {

using lock::testing::Req;
using nlm::JournalEntry;

// StoreLockJournal::RecordInline of `entries`, which NLM names by reference.
bool RecordInline(StoreLockJournal& journal, const std::vector<JournalEntry>& entries) {
  const std::vector<nlm::JournalEntryRef> refs(entries.begin(), entries.end());
  return journal.RecordInline(refs);
}

class StoreLockJournalTest : public ::testing::Test {
 protected:
  bool Record(std::vector<JournalEntry> entries) {
    return testutil::RunCoroutine(io_, journal_.Record(std::move(entries)));
  }
  std::vector<store::LockRecord> PersistedLocks() { return PersistedLocks(*store_); }
  // The rows `store` holds, in (file, host, offset) order.
  static std::vector<store::LockRecord> PersistedLocks(store::Store& store) {
    return Sorted(store.LoadAll().locks);
  }
  // The locks `manager` holds (restored ones awaiting reclaim included) as rows, in that order.
  static std::vector<store::LockRecord> HeldRows(const lock::LockManager& manager) {
    std::vector<store::LockRecord> held;
    for (const lock::LockInfo& info : manager.ListLocks()) {
      held.push_back(store::LockRecord{
          info.file.value(), info.owner.host.value(), info.owner.svid, info.owner.oh.value(),
          info.type == lock::LockType::kExclusive, info.range.offset(), info.range.length()});
    }
    return Sorted(std::move(held));
  }
  // As a restart does: `manager` starts a fine-grained grace with the rows of `store` restored,
  // and `journal` remembers them. Returns the restored locks.
  static std::vector<lock::RestoredLock> Restore(store::Store& store, lock::LockManager& manager,
                                                 StoreLockJournal& journal) {
    manager.StartGrace(lock::GraceMode::kFineGrained);
    std::vector<lock::RestoredLock> restored = ToRestoredLocks(store.LoadAll().locks);
    EXPECT_EQ(manager.LoadRestored(restored, {}).locks, restored.size());
    for (const auto& lock : restored) journal.RememberRestoredLock(lock);
    return restored;
  }
  static std::vector<store::LockRecord> Sorted(std::vector<store::LockRecord> rows) {
    std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) {
      return std::tie(a.file_key, a.host, a.offset) < std::tie(b.file_key, b.host, b.offset);
    });
    return rows;
  }

  asio::io_context io_;
  ManualClock clock_;
  lock::LockManager locks_{clock_};
  std::unique_ptr<store::Store> store_ = store::OpenStore("memory:", store::StoreOptions{});
  StoreLockJournal journal_{locks_, *store_};
  const lock::FileKey file_{"fh1"};
  const lock::LockOwner a_{lock::HostId("10.0.0.1"), 7, lock::OwnerHandle("7@a")};
  const lock::LockOwner b_{lock::HostId("10.0.0.2"), 9, lock::OwnerHandle("9@b")};
};

TEST_F(StoreLockJournalTest, PersistsTheOwnersCurrentRangesAfterSplitAndUnlock) {
  ASSERT_EQ(locks_.Lock(Req(file_, a_, 0, 100, lock::LockType::kExclusive)).status,
            lock::LockStatus::kGranted);
  ASSERT_TRUE(Record({JournalEntry::Locks(file_, a_)}));
  ASSERT_EQ(PersistedLocks().size(), 1u);
  EXPECT_EQ(PersistedLocks()[0].length, 100u);

  // Unlocking the middle splits the lock: the persisted copy follows.
  locks_.Unlock(file_, a_, 40, 10);
  ASSERT_TRUE(Record({JournalEntry::Locks(file_, a_)}));
  auto persisted = PersistedLocks();
  ASSERT_EQ(persisted.size(), 2u);
  EXPECT_EQ(persisted[0].offset, 0u);
  EXPECT_EQ(persisted[0].length, 40u);
  EXPECT_EQ(persisted[1].offset, 50u);
  EXPECT_EQ(persisted[1].length, 50u);
  EXPECT_TRUE(persisted[1].exclusive);

  locks_.Unlock(file_, a_, 0, 0);
  ASSERT_TRUE(Record({JournalEntry::Locks(file_, a_)}));
  EXPECT_TRUE(PersistedLocks().empty());
}

TEST_F(StoreLockJournalTest, OnlyTheNamedOwnerIsRewritten) {
  locks_.Lock(Req(file_, a_, 0, 10, lock::LockType::kShared));
  locks_.Lock(Req(file_, b_, 0, 10, lock::LockType::kShared));
  ASSERT_TRUE(Record({JournalEntry::Locks(file_, a_)}));
  auto persisted = PersistedLocks();
  ASSERT_EQ(persisted.size(), 1u);
  EXPECT_EQ(persisted[0].host, "10.0.0.1");
  EXPECT_FALSE(persisted[0].exclusive);
}

TEST_F(StoreLockJournalTest, HostReleaseIsAppliedInOrderWithLaterEntries) {
  locks_.Lock(Req(file_, a_, 0, 10, lock::LockType::kExclusive));
  ASSERT_TRUE(Record({JournalEntry::Locks(file_, a_)}));
  // The host released everything, then locked again within the same call's entries.
  locks_.ReleaseHost(a_.host);
  locks_.Lock(Req(file_, a_, 20, 5, lock::LockType::kExclusive));
  ASSERT_TRUE(Record({JournalEntry::HostReleased(a_.host), JournalEntry::Locks(file_, a_)}));
  auto persisted = PersistedLocks();
  ASSERT_EQ(persisted.size(), 1u);
  EXPECT_EQ(persisted[0].offset, 20u);
}

TEST_F(StoreLockJournalTest, SharesArePutAndRemoved) {
  lock::LockOwner owner{a_.host, 0, a_.oh};
  lock::ShareRequest share;
  share.file = file_;
  share.owner = owner;
  share.access = lock::ShareAccess::kRead;
  share.deny = lock::ShareDeny::kWrite;
  locks_.Share(share);
  ASSERT_TRUE(Record({JournalEntry::Share(file_, owner)}));
  auto shares = store_->LoadAll().shares;
  ASSERT_EQ(shares.size(), 1u);
  EXPECT_EQ(shares[0].access, 1);
  EXPECT_EQ(shares[0].mode, 2);
  locks_.Unshare(file_, owner);
  ASSERT_TRUE(Record({JournalEntry::Share(file_, owner)}));
  EXPECT_TRUE(store_->LoadAll().shares.empty());
}

TEST_F(StoreLockJournalTest, UnreclaimedRestoredLocksAreRemovedWhenSettled) {
  // a's and b's locks come back from the store; a reclaims, b never does.
  locks_.Lock(Req(file_, a_, 0, 10, lock::LockType::kExclusive));
  locks_.Lock(Req(lock::FileKey("fh2"), b_, 0, 10, lock::LockType::kExclusive));
  ASSERT_TRUE(
      Record({JournalEntry::Locks(file_, a_), JournalEntry::Locks(lock::FileKey("fh2"), b_)}));
  lock::LockManager restarted(clock_);
  StoreLockJournal journal(restarted, *store_);
  ASSERT_EQ(Restore(*store_, restarted, journal).size(), 2u);

  auto reclaim = Req(file_, a_, 0, 10, lock::LockType::kExclusive);
  reclaim.reclaim = true;
  ASSERT_EQ(restarted.Lock(reclaim).status, lock::LockStatus::kGranted);
  restarted.EndGrace(lock::GraceEndReason::kTimer);
  ASSERT_TRUE(testutil::RunCoroutine(io_, journal.SettleRestored()));
  EXPECT_EQ(journal.restored_pending(), 0u);
  auto persisted = PersistedLocks();
  ASSERT_EQ(persisted.size(), 1u);
  EXPECT_EQ(persisted[0].host, "10.0.0.1");
}

// A reclaim of a restored lock leaves its owner holding exactly the rows the store has: no write,
// and settling after every owner reclaimed writes nothing either. Anything else of the owner is
// written, and from then on the owner is journaled as usual.
TEST_F(StoreLockJournalTest, ReclaimingRestoredLocksWritesNothing) {
  locks_.Lock(Req(file_, a_, 0, 10, lock::LockType::kExclusive));
  locks_.Lock(Req(file_, a_, 20, 10, lock::LockType::kShared));
  locks_.Lock(Req(file_, b_, 40, 10, lock::LockType::kExclusive));
  ASSERT_TRUE(Record({JournalEntry::Locks(file_, a_), JournalEntry::Locks(file_, b_)}));
  const std::vector<store::LockRecord> before = PersistedLocks();
  ASSERT_EQ(before.size(), 3u);
  lock::LockManager restarted(clock_);
  StoreLockJournal journal(restarted, *store_);
  ASSERT_EQ(Restore(*store_, restarted, journal).size(), 3u);

  auto reclaim = [&](const lock::LockOwner& owner, uint64_t offset, lock::LockType type) {
    auto request = Req(file_, owner, offset, 10, type);
    request.reclaim = true;
    EXPECT_EQ(restarted.Lock(request).status, lock::LockStatus::kGranted);
    return JournalEntry::Locks(file_, owner, lock::ByteRange::FromOffsetLength(offset, 10));
  };
  EXPECT_EQ(journal.PlanWrites({reclaim(a_, 0, lock::LockType::kExclusive)}).changes, 0u);
  EXPECT_EQ(journal.PlanWrites({reclaim(a_, 20, lock::LockType::kShared)}).changes, 0u);
  // b also takes a new lock: that changes its rows, so it is written (now and later).
  const JournalEntry b_reclaim = reclaim(b_, 40, lock::LockType::kExclusive);
  EXPECT_EQ(journal.PlanWrites({b_reclaim}).changes, 0u);
  ASSERT_EQ(restarted.Lock(Req(file_, b_, 60, 5, lock::LockType::kExclusive)).status,
            lock::LockStatus::kGranted);
  const JournalEntry b_new =
      JournalEntry::Locks(file_, b_, lock::ByteRange::FromOffsetLength(60, 5));
  ASSERT_TRUE(testutil::RunCoroutine(io_, journal.Record({b_new})));
  EXPECT_EQ(PersistedLocks().size(), 4u);
  EXPECT_EQ(journal.PlanWrites({b_reclaim}).changes, 1u) << "b's rows are no longer known";

  restarted.EndGrace(lock::GraceEndReason::kAllReclaimed);
  ASSERT_TRUE(testutil::RunCoroutine(io_, journal.SettleRestored()));
  EXPECT_EQ(journal.restored_pending(), 0u);
  EXPECT_EQ(PersistedLocks().size(), 4u);
}

// With restored rows, whatever the owners do (reclaim some, lock, unlock), the persisted rows
// equal the locks the manager holds (restored ones awaiting reclaim included) after each write,
// and after settling they equal the locks held.
TEST_F(StoreLockJournalTest, RestoredRowsStayEqualToTheLocksHeldWhateverTheOwnersDo) {
  std::mt19937 random(815);
  auto pick = [&](uint64_t n) { return std::uniform_int_distribution<uint64_t>(0, n - 1)(random); };
  for (int round = 0; round < 20; ++round) {
    std::unique_ptr<store::Store> store = store::OpenStore("memory:", store::StoreOptions{});
    lock::LockManager before(clock_);
    StoreLockJournal first(before, *store);
    std::vector<JournalEntry> entries;
    for (const lock::LockOwner* owner : {&a_, &b_}) {
      for (uint64_t offset = 0; offset < 60; offset += 10) {
        if (pick(2) == 0) continue;
        const auto type = pick(2) == 0 ? lock::LockType::kShared : lock::LockType::kExclusive;
        if (before.Lock(Req(file_, *owner, offset + (owner == &b_ ? 5 : 0), 3, type)).status ==
            lock::LockStatus::kGranted) {
          entries.push_back(JournalEntry::Locks(file_, *owner));
        }
      }
    }
    ASSERT_TRUE(testutil::RunCoroutine(io_, first.Record(entries)));

    lock::LockManager after(clock_);
    StoreLockJournal journal(after, *store);
    const std::vector<lock::RestoredLock> restored = Restore(*store, after, journal);
    for (int step = 0; step < 30; ++step) {
      const lock::LockOwner& owner = pick(2) == 0 ? a_ : b_;
      uint64_t offset = pick(70);
      uint64_t length = 1 + pick(5);
      if (pick(2) == 0 && !restored.empty()) {  // a reclaim of a restored lock
        const lock::RestoredLock& lock = restored[pick(restored.size())];
        auto request = Req(file_, lock.owner, lock.range.offset(), lock.range.length(), lock.type);
        request.reclaim = true;
        after.Lock(request);
        ASSERT_TRUE(testutil::RunCoroutine(
            io_, journal.Record({JournalEntry::Locks(file_, lock.owner, lock.range)})));
      } else if (pick(3) == 0) {
        after.Unlock(file_, owner, offset, length);
        ASSERT_TRUE(testutil::RunCoroutine(
            io_, journal.Record({JournalEntry::Locks(
                     file_, owner, lock::ByteRange::FromOffsetLength(offset, length))})));
      } else {
        const auto type = pick(2) == 0 ? lock::LockType::kShared : lock::LockType::kExclusive;
        after.Lock(Req(file_, owner, offset, length, type));
        ASSERT_TRUE(testutil::RunCoroutine(
            io_, journal.Record({JournalEntry::Locks(
                     file_, owner, lock::ByteRange::FromOffsetLength(offset, length))})));
      }
      ASSERT_EQ(PersistedLocks(*store), HeldRows(after)) << "round " << round << " step " << step;
    }
    after.EndGrace(lock::GraceEndReason::kTimer);
    ASSERT_TRUE(testutil::RunCoroutine(io_, journal.SettleRestored()));
    ASSERT_EQ(PersistedLocks(*store), HeldRows(after)) << "round " << round << " after settling";
  }
}

// The journal rewrites only the rows near each call's range; whatever the calls do, the persisted
// rows must equal the manager's locks. Random LOCKs and UNLOCKs of two owners on a small file,
// several calls journaled in one write now and then.
TEST_F(StoreLockJournalTest, RangedWritesKeepThePersistedRowsEqualToTheLocksHeld) {
  std::mt19937 random(4711);
  auto pick = [&](uint64_t n) { return std::uniform_int_distribution<uint64_t>(0, n - 1)(random); };
  std::vector<JournalEntry> pending;
  for (int step = 0; step < 3000; ++step) {
    const lock::LockOwner& owner = pick(2) == 0 ? a_ : b_;
    const uint64_t offset = pick(40);
    const uint64_t length = pick(8) == 0 ? 0 : 1 + pick(6);  // 0: to the end of the file
    if (pick(3) == 0) {
      if (locks_.Unlock(file_, owner, offset, length).status != lock::LockStatus::kGranted) {
        continue;
      }
    } else {
      const auto type = pick(2) == 0 ? lock::LockType::kShared : lock::LockType::kExclusive;
      if (locks_.Lock(Req(file_, owner, offset, length, type)).status !=
          lock::LockStatus::kGranted) {
        continue;
      }
    }
    pending.push_back(
        JournalEntry::Locks(file_, owner, lock::ByteRange::FromOffsetLength(offset, length)));
    if (pick(4) != 0) continue;  // Journal several calls at once now and then.
    ASSERT_TRUE(Record(std::move(pending)));
    pending.clear();

    ASSERT_EQ(PersistedLocks(), HeldRows(locks_)) << "after step " << step;
  }
}

// A store that keeps every write it is given, and acknowledges (or fails) them when told.
class HeldWritesStore final : public store::testutil::WriteOnlyStore {
 public:
  std::vector<store::WriteOp> ops;
  void CompleteAll(const std::exception_ptr& error = nullptr) {
    auto pending = std::move(dones_);
    dones_.clear();
    for (auto& done : pending) done(error);
  }

 protected:
  void Submit(store::WriteOp op, store::Done done) override {
    ops.push_back(std::move(op));
    dones_.push_back(std::move(done));
  }

 private:
  std::vector<store::Done> dones_;
};

class GroupJournalTest : public ::testing::Test {
 protected:
  // Starts Record(entries) as its own coroutine; its result lands in results_[slot].
  void Start(size_t slot, std::vector<JournalEntry> entries) {
    asio::co_spawn(io_, journal_.Record(std::move(entries)),
                   [this, slot](std::exception_ptr error, bool ok) {
                     ASSERT_FALSE(error);
                     results_[slot] = ok;
                   });
  }
  void Drain() {
    io_.restart();
    io_.poll();
  }
  static size_t ChangesIn(const store::WriteOp& op) {
    return std::get<store::LockChangesOp>(op).changes.size();
  }

  asio::io_context io_;
  ManualClock clock_;
  lock::LockManager locks_{clock_};
  HeldWritesStore store_;
  StoreLockJournal journal_{locks_, store_};
  std::map<size_t, bool> results_;
  const lock::FileKey file_{"fh1"};
  const lock::LockOwner a_{lock::HostId("10.0.0.1"), 7, lock::OwnerHandle("7@a")};
  const lock::LockOwner b_{lock::HostId("10.0.0.2"), 9, lock::OwnerHandle("9@b")};
};

// NLM gathers the calls of a turn (nlm::JournalBarrier) and records them at once: one Record is
// one store write, written at once, duplicates removed, and the call resumes only once it is done.
TEST_F(GroupJournalTest, OneRecordIsOneStoreWriteAndResumesWhenItIsDone) {
  locks_.Lock(Req(file_, a_, 0, 10, lock::LockType::kExclusive));
  locks_.Lock(Req(file_, b_, 20, 10, lock::LockType::kExclusive));
  // a twice: written once, as it is now.
  Start(0, {JournalEntry::Locks(file_, a_), JournalEntry::Locks(file_, b_),
            JournalEntry::Locks(file_, a_)});
  Drain();
  ASSERT_EQ(store_.ops.size(), 1u);
  EXPECT_EQ(ChangesIn(store_.ops[0]), 2u);
  EXPECT_TRUE(results_.empty()) << "nobody may resume before the write is done";

  store_.CompleteAll();
  Drain();
  EXPECT_EQ(results_, (std::map<size_t, bool>{{0, true}}));

  // The next Record is the next write.
  Start(1, {JournalEntry::Locks(file_, b_)});
  Drain();
  ASSERT_EQ(store_.ops.size(), 2u);
  store_.CompleteAll();
  Drain();
  EXPECT_TRUE(results_.at(1));
}

TEST_F(GroupJournalTest, AFailedWriteFailsItsRecord) {
  locks_.Lock(Req(file_, a_, 0, 10, lock::LockType::kExclusive));
  Start(0, {JournalEntry::Locks(file_, a_), JournalEntry::Locks(file_, b_)});
  Drain();
  store_.CompleteAll(std::make_exception_ptr(Error(ErrorKind::kDisconnected, "disk gone")));
  Drain();
  EXPECT_EQ(results_, (std::map<size_t, bool>{{0, false}}));
  EXPECT_EQ(journal_.failures(), 1u);
}

TEST_F(GroupJournalTest, AHostReleaseIsWrittenAfterTheWritesRecordedBeforeIt) {
  locks_.Lock(Req(file_, a_, 0, 10, lock::LockType::kExclusive));
  Start(0, {JournalEntry::Locks(file_, a_)});
  Start(1, {JournalEntry::HostReleased(b_.host)});
  Drain();
  ASSERT_EQ(store_.ops.size(), 2u);
  EXPECT_EQ(ChangesIn(store_.ops[0]), 1u);
  EXPECT_EQ(std::get<store::ReleaseHostOp>(store_.ops[1]).host, b_.host.value());
  store_.CompleteAll();
  Drain();
  EXPECT_EQ(results_, (std::map<size_t, bool>{{0, true}, {1, true}}));
}

TEST_F(GroupJournalTest, AfterAFailedWriteTheOwnersNextWriteReplacesAllItsRows) {
  locks_.Lock(Req(file_, a_, 0, 10, lock::LockType::kExclusive));
  locks_.Lock(Req(file_, b_, 20, 10, lock::LockType::kExclusive));
  const auto range_a = lock::ByteRange::FromOffsetLength(0, 10);
  const auto range_b = lock::ByteRange::FromOffsetLength(20, 10);
  auto within = [&](size_t op, size_t change) {
    const auto& changes = std::get<store::LockChangesOp>(store_.ops[op]).changes;
    return std::get<store::ReplaceLocks>(changes.at(change)).within.has_value();
  };
  Start(0, {JournalEntry::Locks(file_, a_, range_a)});
  Drain();
  ASSERT_TRUE(within(0, 0)) << "a call's range bounds what is rewritten";
  store_.CompleteAll(std::make_exception_ptr(Error(ErrorKind::kDisconnected, "disk gone")));
  Drain();

  Start(1, {JournalEntry::Locks(file_, a_, range_a), JournalEntry::Locks(file_, b_, range_b)});
  Drain();
  ASSERT_EQ(store_.ops.size(), 2u);
  // Sorted by owner: a (unsynced: all its rows), then b (in sync: near its range only).
  EXPECT_FALSE(within(1, 0));
  EXPECT_TRUE(within(1, 1));
  store_.CompleteAll();
  Drain();

  Start(3, {JournalEntry::Locks(file_, a_, range_a)});
  Drain();
  EXPECT_TRUE(within(2, 0)) << "a is in sync again";
  store_.CompleteAll();
  Drain();
  EXPECT_EQ(results_, (std::map<size_t, bool>{{0, false}, {1, true}, {3, true}}));
}

// A store that acknowledges lock writes within the call, as the lock log does, and fails them
// while told to.
class AtOnceStore final : public store::testutil::WriteOnlyStore {
 public:
  std::vector<store::WriteOp> ops;
  std::exception_ptr failure;
  bool AcknowledgesLockChangesAtOnce() const override { return true; }

 protected:
  void Submit(store::WriteOp op, store::Done done) override {
    ops.push_back(std::move(op));
    done(failure);
  }
};

// Where the store acknowledges at once, NLM writes each call inline (RecordInline), without a
// coroutine; over the lock log the rows are the same as Record writes.
TEST(InlineJournal, OnlyAStoreThatAcknowledgesAtOnceIsWrittenInline) {
  ManualClock clock;
  lock::LockManager locks{clock};
  std::unique_ptr<store::Store> memory = store::OpenStore("memory:", store::StoreOptions{});
  EXPECT_FALSE(StoreLockJournal(locks, *memory).records_inline());

  testutil::TempDir dir("inline-journal");
  store::LoggedStore logged(store::OpenStore("memory:", store::StoreOptions{}),
                            dir.path() + "/journal");
  StoreLockJournal journal(locks, logged);
  ASSERT_TRUE(journal.records_inline());
  const lock::FileKey file("fh1");
  const lock::LockOwner owner{lock::HostId("10.0.0.1"), 7, lock::OwnerHandle("7@a")};
  locks.Lock(Req(file, owner, 0, 10, lock::LockType::kExclusive));
  locks.Lock(Req(file, owner, 20, 10, lock::LockType::kShared));
  EXPECT_TRUE(RecordInline(journal, {JournalEntry::Locks(file, owner)}));
  std::vector<store::LockRecord> rows = logged.LoadAll().locks;
  ASSERT_EQ(rows.size(), 2u);
  locks.Unlock(file, owner, 0, 10);
  EXPECT_TRUE(RecordInline(
      journal, {JournalEntry::Locks(file, owner, lock::ByteRange::FromOffsetLength(0, 10))}));
  rows = logged.LoadAll().locks;
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].offset, 20u);
  EXPECT_FALSE(rows[0].exclusive);
}

TEST(InlineJournal, AFailedInlineWriteIsCountedAndTheOwnersNextWriteReplacesAllItsRows) {
  ManualClock clock;
  lock::LockManager locks{clock};
  AtOnceStore store;
  StoreLockJournal journal(locks, store);
  const lock::FileKey file("fh1");
  const lock::LockOwner owner{lock::HostId("10.0.0.1"), 7, lock::OwnerHandle("7@a")};
  const auto range = lock::ByteRange::FromOffsetLength(0, 10);
  locks.Lock(Req(file, owner, 0, 10, lock::LockType::kExclusive));
  auto within = [&](size_t op) {
    const auto& changes = std::get<store::LockChangesOp>(store.ops.at(op)).changes;
    return std::get<store::ReplaceLocks>(changes.at(0)).within.has_value();
  };

  store.failure = std::make_exception_ptr(Error(ErrorKind::kDisconnected, "disk gone"));
  EXPECT_FALSE(RecordInline(journal, {JournalEntry::Locks(file, owner, range)}));
  EXPECT_EQ(journal.failures(), 1u);
  EXPECT_TRUE(within(0)) << "a call's range bounds what is rewritten";

  store.failure = nullptr;
  EXPECT_TRUE(RecordInline(journal, {JournalEntry::Locks(file, owner, range)}));
  EXPECT_FALSE(within(1)) << "after a failed write, all of the owner's rows";
  EXPECT_TRUE(RecordInline(journal, {JournalEntry::Locks(file, owner, range)}));
  EXPECT_TRUE(within(2)) << "in sync again";
}

// Over the lock log itself the record is encoded from the manager's state (AppendInline): a
// write the log cannot take fails the call, and the owner's next write replaces all its rows.
TEST(InlineJournal, AWriteTheLockLogCannotTakeFailsAndTheNextReplacesAllTheOwnersRows) {
  ManualClock clock;
  lock::LockManager locks{clock};
  testutil::TempDir dir("inline-journal-log");
  const std::string logs = dir.path() + "/logs";
  std::filesystem::create_directory(logs);
  store::LoggedStore logged(store::OpenStore("memory:", store::StoreOptions{}), logs + "/journal");
  StoreLockJournal journal(locks, logged);
  const lock::FileKey file("fh1");
  const lock::LockOwner owner{lock::HostId("10.0.0.1"), 7, lock::OwnerHandle("7@a")};
  const auto range = lock::ByteRange::FromOffsetLength(0, 10);
  locks.Lock(Req(file, owner, 0, 10, lock::LockType::kExclusive));
  // The last record the log holds, as its ReplaceLocks.
  auto last = [&] {
    std::vector<store::LoggedOp> ops =
        store::DecodeLogRecords(store::ReadLogFile(logged.SegmentPaths().back()));
    EXPECT_FALSE(ops.empty());
    return std::get<store::ReplaceLocks>(std::get<store::LockChangesOp>(ops.back()).changes.at(0));
  };
  EXPECT_TRUE(RecordInline(journal, {JournalEntry::Locks(file, owner, range)}));
  EXPECT_TRUE(last().within.has_value()) << "a call's range bounds what is rewritten";

  // A write that fills the segment, with the log's directory gone: no next segment can begin.
  std::filesystem::remove_all(logs);
  store::LockRecord big{"fh2", "10.0.0.2", 1, std::string(store::LoggedStore::kSegmentBytes, 'o'),
                        true,  0,          1};
  logged.ApplyLockChanges({store::PutLock{big}}, [](std::exception_ptr e) { EXPECT_FALSE(e); });
  EXPECT_FALSE(RecordInline(journal, {JournalEntry::Locks(file, owner, range)}));
  EXPECT_EQ(journal.failures(), 1u);

  std::filesystem::create_directory(logs);
  EXPECT_TRUE(RecordInline(journal, {JournalEntry::Locks(file, owner, range)}));
  EXPECT_FALSE(last().within.has_value()) << "after a failed write, all of the owner's rows";
  EXPECT_TRUE(RecordInline(journal, {JournalEntry::Locks(file, owner, range)}));
  EXPECT_TRUE(last().within.has_value()) << "in sync again";
  EXPECT_EQ(logged.Counts().locks, 2u);
}

// The record encoded straight from the manager's state (AppendInline) keeps the lock log's rows
// equal to the locks held, call after call, as Record does through store changes.
TEST_F(StoreLockJournalTest, InlineRecordsEncodedFromTheManagersStateKeepTheRowsEqualToTheLocks) {
  testutil::TempDir dir("inline-journal-model");
  store::LoggedStore logged(store::OpenStore("memory:", store::StoreOptions{}),
                            dir.path() + "/journal");
  StoreLockJournal journal(locks_, logged);
  std::mt19937 random(4712);
  auto pick = [&](uint64_t n) { return std::uniform_int_distribution<uint64_t>(0, n - 1)(random); };
  for (int step = 0; step < 2000; ++step) {
    const lock::LockOwner& owner = pick(2) == 0 ? a_ : b_;
    const uint64_t offset = pick(40);
    const uint64_t length = pick(8) == 0 ? 0 : 1 + pick(6);  // 0: to the end of the file
    const auto type = pick(2) == 0 ? lock::LockType::kShared : lock::LockType::kExclusive;
    const lock::LockStatus status =
        pick(3) == 0 ? locks_.Unlock(file_, owner, offset, length).status
                     : locks_.Lock(Req(file_, owner, offset, length, type)).status;
    if (status != lock::LockStatus::kGranted) continue;
    ASSERT_TRUE(RecordInline(
        journal,
        {JournalEntry::Locks(file_, owner, lock::ByteRange::FromOffsetLength(offset, length))}));
    if (pick(8) != 0) continue;
    ASSERT_EQ(Sorted(logged.LoadAll().locks), HeldRows(locks_)) << "after step " << step;
  }
}

TEST(DecideGrace, FollowsWhatTheStoreKnows) {
  store::StartupInfo startup;
  store::LoadedState loaded;
  const std::chrono::seconds grace(90);
  using Kind = GracePlan::Kind;

  EXPECT_EQ(DecideGrace(startup, loaded, grace).kind, Kind::kClassic) << "memory store";
  EXPECT_EQ(DecideGrace(startup, loaded, std::chrono::seconds(0)).kind, Kind::kNone);

  startup.persistent = true;
  startup.first_run = true;
  EXPECT_EQ(DecideGrace(startup, loaded, grace).kind, Kind::kNone) << "new store";

  startup.first_run = false;
  EXPECT_EQ(DecideGrace(startup, loaded, grace).kind, Kind::kNone) << "nothing recorded";

  loaded.locks.push_back(store::LockRecord{"fh", "h", 1, "1@h", true, 0, 10});
  startup.lock_table_complete = true;
  EXPECT_EQ(DecideGrace(startup, loaded, grace).kind, Kind::kFineGrained);

  startup.lock_table_complete = false;
  startup.previous_boot_id = "boot-1";
  startup.boot_id = "boot-2";
  EXPECT_EQ(DecideGrace(startup, loaded, grace).kind, Kind::kClassic) << "host crash";
}

TEST(ToRestored, SkipsCorruptRows) {
  std::vector<store::LockRecord> rows = {
      {"fh", "h", 1, "1@h", true, 0, 0},            // to the end: fine
      {"fh", "h", 2, "2@h", false, UINT64_MAX, 2},  // overflows: corrupt
  };
  auto locks = ToRestoredLocks(rows);
  ASSERT_EQ(locks.size(), 1u);
  EXPECT_TRUE(locks[0].range.ToEnd());
  std::vector<store::ShareRecord> shares = {{"fh", "h", "oh", 1, 3}, {"fh", "h", "x", 9, 1}};
  EXPECT_EQ(ToRestoredShares(shares).size(), 1u);
}

}  // namespace
}  // namespace nlockd::server
