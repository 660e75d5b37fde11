// SPDX-License-Identifier: Apache-2.0
#include "store/log/logged_store.hpp"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <future>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "store/log/old_format_log_test_data.hpp"
#include "store/open_store.hpp"
#include "store/sql/group_commit.hpp"
#include "store/sqlite/sqlite_store.hpp"
#include "store/testing/conformance.hpp"
#include "store/testing/crash_test_util.hpp"
#include "store/testing/write_only_store.hpp"
#include "testutil/temp_dir.hpp"

namespace nlockd::store {

namespace testutil {
INSTANTIATE_TEST_SUITE_P(LoggedSqlite, StoreConformance,
                         ::testing::Values(BackendParam{"LoggedSqlite", MakeLoggedSqliteBackend,
                                                        false}),
                         BackendName);
INSTANTIATE_TEST_SUITE_P(LoggedSqlite, PersistentStore,
                         ::testing::Values(BackendParam{"LoggedSqlite", MakeLoggedSqliteBackend,
                                                        false}),
                         BackendName);
}  // namespace testutil

namespace {

using nlockd::testutil::TempDir;
using testutil::Sync;

LockRecord Lock(uint64_t offset) { return LockRecord{"fh", "client", 1, "oh", true, offset, 1}; }

class LoggedStoreTest : public ::testing::Test {
 protected:
  std::unique_ptr<LoggedStore> Open() {
    return std::make_unique<LoggedStore>(std::make_unique<SqliteStore>(path_, StoreOptions{}),
                                         path_ + ".journal");
  }
  // Writes records into a segment file as a crashed run would have left it.
  void LeaveSegment(uint64_t number, const std::vector<LoggedOp>& ops, std::string tail = "") {
    std::string bytes;
    for (const LoggedOp& op : ops) bytes += EncodeLogRecord(op);
    bytes += tail;
    LogSegment segment(path_ + ".journal." + std::to_string(number));
    segment.Append(bytes);
  }
  std::vector<uint64_t> Offsets(Store& store) {
    std::vector<uint64_t> offsets;
    for (const LockRecord& l : store.LoadAll().locks) offsets.push_back(l.offset);
    std::sort(offsets.begin(), offsets.end());
    return offsets;
  }

  TempDir dir_{"logged-store"};
  std::string path_ = dir_.path() + "/nlockd.db";
};

TEST_F(LoggedStoreTest, ALockWriteIsAcknowledgedBeforeItReturns) {
  auto store = Open();
  bool done = false;
  store->ApplyLockChanges({PutLock{Lock(1)}}, [&](std::exception_ptr error) {
    EXPECT_FALSE(error);
    done = true;
  });
  EXPECT_TRUE(done);
  EXPECT_EQ(Offsets(*store), std::vector<uint64_t>{1});  // reads wait for the wrapped store
}

TEST_F(LoggedStoreTest, WritesFromTwoThreadsAcrossFullBunchesReachTheStoreAsWritten) {
  auto store = Open();
  // Each thread locks its own offsets and removes every other one, over more than a full
  // bunch each (kHandOnBatch), so that the hand-on thread decodes bunches the writers keep
  // appending to.
  constexpr uint64_t kPerThread = 3 * LoggedStore::kHandOnBatch;
  auto write = [&](uint64_t base) {
    for (uint64_t i = 0; i < kPerThread; ++i) {
      store->ApplyLockChanges({PutLock{Lock(base + i)}},
                              [](std::exception_ptr error) { EXPECT_FALSE(error); });
      if (i % 2 == 1) {
        store->ApplyLockChanges({RemoveLock{Lock(base + i)}},
                                [](std::exception_ptr error) { EXPECT_FALSE(error); });
      }
    }
  };
  std::thread other(write, 1'000'000);
  write(0);
  other.join();
  std::vector<uint64_t> expected;
  for (const uint64_t base : {uint64_t{0}, uint64_t{1'000'000}}) {
    for (uint64_t i = 0; i < kPerThread; i += 2) expected.push_back(base + i);
  }
  EXPECT_EQ(Offsets(*store), expected);
}

TEST_F(LoggedStoreTest, ReplaysWhatACrashedRunLeftInOrderAndRemovesIt) {
  { SqliteStore create(path_, StoreOptions{}); }
  LockChangesOp first{{PutLock{Lock(1)}, PutLock{Lock(2)}}};
  LockChangesOp second{{RemoveLock{Lock(1)}, PutLock{Lock(3)}}};
  LeaveSegment(4, {first});
  LeaveSegment(5, {second, ReleaseHostOp{"other"}}, std::string("\x10\0\0\0torn", 8));
  auto store = Open();
  EXPECT_EQ(store->replayed(), 3U);
  EXPECT_EQ(Offsets(*store), (std::vector<uint64_t>{2, 3}));
  // The old segments are gone; the new one is numbered after them.
  EXPECT_EQ(store->SegmentPaths(), std::vector<std::string>{path_ + ".journal.6"});
}

// An nlockd of the first log format killed, then upgraded: the new build replays what the old
// one acknowledged (its own bytes, old_format_log_test_data.hpp).
TEST_F(LoggedStoreTest, ReplaysALogTheFirstFormatLeft) {
  { SqliteStore create(path_, StoreOptions{}); }
  {
    LogSegment segment(path_ + ".journal.3");
    segment.Append(testdata::kOldFormatLog);
  }
  auto store = Open();
  EXPECT_EQ(store->replayed(), 3U);
  const LoadedState state = store->LoadAll();
  std::vector<std::string> rows;
  for (const LockRecord& l : state.locks) {
    rows.push_back(fmt::format("{} {} {} {} {} {}+{}", l.file_key, l.host, l.svid, l.owner_handle,
                               l.exclusive ? "X" : "S", l.offset, l.length));
  }
  std::sort(rows.begin(), rows.end());
  EXPECT_EQ(rows, (std::vector<std::string>{"fh-1 client-a 7 oh-a S 20+5",
                                            "fh-1 client-a 7 oh-a X 0+10"}));
  ASSERT_EQ(state.shares.size(), 1U);
  EXPECT_EQ(state.shares[0].host, "client-b");
  EXPECT_EQ(state.shares[0].mode, 1);
  EXPECT_EQ(state.shares[0].access, 2);
  EXPECT_EQ(store->SegmentPaths(), std::vector<std::string>{path_ + ".journal.4"});
}

TEST_F(LoggedStoreTest, ARecordAppendedAsEncodedIsAcknowledgedAppliedAndReplayed) {
  std::string bytes;
  {
    auto store = Open();
    LockChangesRecord record(bytes);
    const std::vector<LockRange> ranges = {{true, 5, 1}};
    record.Add(ReplaceLocksView{"fh", "client", 1, "oh", ranges, std::nullopt});
    record.Finish();
    EXPECT_EQ(store->AppendLockChanges(bytes), nullptr);
    EXPECT_EQ(Offsets(*store), std::vector<uint64_t>{5});
    // What a crash now would replay: the record as appended.
    EXPECT_EQ(ReadLogFile(store->SegmentPaths().back()).substr(0, bytes.size()), bytes);
  }
  LeaveSegment(7, DecodeLogRecords(bytes));
  auto store = Open();
  EXPECT_EQ(store->replayed(), 1U);
  EXPECT_EQ(Offsets(*store), std::vector<uint64_t>{5});
}

TEST_F(LoggedStoreTest, ReplayingRecordsTheStoreHasAlreadyIsHarmless) {
  {
    auto store = Open();
    Sync([&](Done d) { store->ApplyLockChanges({PutLock{Lock(1)}, PutLock{Lock(2)}}, d); });
    Sync([&](Done d) { store->ApplyLockChanges({RemoveLock{Lock(2)}}, d); });
  }
  LeaveSegment(0, {LockChangesOp{{PutLock{Lock(1)}, PutLock{Lock(2)}}},
                   LockChangesOp{{RemoveLock{Lock(2)}}}});
  auto store = Open();
  EXPECT_EQ(Offsets(*store), std::vector<uint64_t>{1});
}

TEST_F(LoggedStoreTest, ACleanEndLeavesNoLog) {
  {
    auto store = Open();
    Sync([&](Done d) { store->ApplyLockChanges({PutLock{Lock(1)}}, d); });
    store->MarkCleanShutdown();
  }
  std::vector<std::string> left;
  for (const auto& entry : std::filesystem::directory_iterator(dir_.path())) {
    const std::string name = entry.path().filename().string();
    if (name.find(".journal") != std::string::npos) left.push_back(name);
  }
  EXPECT_TRUE(left.empty()) << left.front();
  auto store = Open();
  EXPECT_EQ(store->replayed(), 0U);
  EXPECT_EQ(Offsets(*store), std::vector<uint64_t>{1});
}

TEST_F(LoggedStoreTest, AfterAClearTheLogHoldsNothingFromBeforeIt) {
  auto store = Open();
  Sync([&](Done d) { store->ApplyLockChanges({PutLock{Lock(1)}}, d); });
  Sync([&](Done d) { store->Clear(d); });
  Sync([&](Done d) { store->ApplyLockChanges({PutLock{Lock(2)}}, d); });
  // What a crash now would replay: only the write after the Clear.
  std::vector<uint64_t> logged;
  for (const std::string& path : store->SegmentPaths()) {
    for (const LoggedOp& op : DecodeLogRecords(ReadLogFile(path))) {
      for (const LockChange& change : std::get<LockChangesOp>(op).changes) {
        logged.push_back(std::get<PutLock>(change).lock.offset);
      }
    }
  }
  EXPECT_EQ(logged, std::vector<uint64_t>{2});
  EXPECT_EQ(Offsets(*store), std::vector<uint64_t>{2});
}

TEST_F(LoggedStoreTest, SegmentsAreRemovedOnceApplied) {
  auto store = Open();
  const std::string owner(2000, 'o');
  // Each write is about 2 kB: enough for several segments.
  const size_t writes = 3 * LoggedStore::kSegmentBytes / 2000;
  for (size_t i = 0; i < writes; ++i) {
    LockRecord lock = Lock(i);
    lock.owner_handle = owner;
    store->ApplyLockChanges({PutLock{lock}}, [](std::exception_ptr e) { ASSERT_FALSE(e); });
  }
  EXPECT_EQ(store->Counts().locks, writes);  // waits for the wrapped store
  EXPECT_LE(store->SegmentPaths().size(), 2U);
}

// A wrapped store whose write queue holds two writes, and whose commits of a RemoveNotifyOwed
// wait until released: so a logged write can be refused at once (queue full) while an earlier
// one still waits to be committed.
class SmallQueueStore final : public testutil::WriteOnlyStore {
 public:
  SmallQueueStore()
      : committer_(
            [this](std::span<const QueuedWrite> batch, Durability) {
              std::unique_lock lock(mu_);
              if (std::holds_alternative<RemoveNotifyOwedOp>(batch[0].op)) {
                changed_.wait(lock, [this] { return !held_; });
              }
            },
            GroupCommitOptions{true, 1024, /*max_queued=*/2}) {}
  void WaitForSubmitted(int n) {
    std::unique_lock lock(mu_);
    changed_.wait(lock, [&] { return submitted_ >= n; });
  }
  void Release() {
    std::lock_guard lock(mu_);
    held_ = false;
    changed_.notify_all();
  }

 protected:
  void Submit(WriteOp op, Done done) override {
    committer_.Submit(std::move(op), std::move(done));
    std::lock_guard lock(mu_);
    ++submitted_;
    changed_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable changed_;
  bool held_ = true;
  int submitted_ = 0;
  GroupCommitter committer_;  // last: its writer thread uses the members above
};

TEST_F(LoggedStoreTest, AWriteRefusedBeforeAnEarlierOneIsAppliedDoesNotStallReads) {
  auto inner = std::make_unique<SmallQueueStore>();
  SmallQueueStore& wrapped = *inner;
  LoggedStore store(std::move(inner), path_ + ".journal");
  store.RemoveNotifyOwed("a", [](std::exception_ptr) {});  // held in its commit
  store.ReleaseHost("h1", [](std::exception_ptr) {});      // logged: 1
  store.RemoveNotifyOwed("b", [](std::exception_ptr) {});  // hands h1 on; the queue is full
  store.ReleaseHost("h2", [](std::exception_ptr) {});      // logged: 2, refused when handed on
  wrapped.WaitForSubmitted(4);
  wrapped.Release();
  // h2's refusal completed before h1's commit: a read must still find everything handed on
  // settled, not wait for an applied sequence that went back to 1.
  auto counts = std::async(std::launch::async, [&] { store.Counts(); });
  ASSERT_EQ(counts.wait_for(std::chrono::seconds(30)), std::future_status::ready)
      << "a read waits for writes that were all completed";
}

TEST_F(LoggedStoreTest, AcknowledgedLockWritesSurviveKillNine) {
  testutil::RunLockCrashTest("sqlite:" + path_, 2000);
}

}  // namespace
}  // namespace nlockd::store
