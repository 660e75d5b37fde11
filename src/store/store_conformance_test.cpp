// SPDX-License-Identifier: Apache-2.0
// The conformance suite every Store implementation passes; the backends' own test files
// instantiate it.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <future>
#include <limits>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "base/error.hpp"
#include "store/testing/conformance.hpp"

namespace nlockd::store::testutil {

void StoreConformance::SetUp() {
  if (GetParam().needs_pg && !PgTestUri()) {
    GTEST_SKIP() << "NLOCKD_TEST_PG_URI is not set; run under scripts/with-postgres.sh";
  }
  backend_ = GetParam().make();
  options_.boot_id = "boot-1";
  options_.wall_clock = clock_.AsFunction();
  store_ = backend_->Open(options_);
}

void StoreConformance::Reopen(const std::string& boot_id) {
  store_.reset();
  options_.boot_id = boot_id;
  store_ = backend_->Open(options_);
}

void StoreConformance::Put(const Registration& registration) {
  Sync([&](Done done) { store_->PutRegistration(registration, std::move(done)); });
}

void StoreConformance::Apply(std::vector<LockChange> changes) {
  Sync([&](Done done) { store_->ApplyLockChanges(std::move(changes), std::move(done)); });
}

namespace {

constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();

TEST_P(StoreConformance, NewStoreReportsItsFirstRun) {
  const StartupInfo& info = store_->startup();
  EXPECT_EQ(info.persistent, backend_->persistent());
  EXPECT_TRUE(info.first_run);
  EXPECT_FALSE(info.previous_run_clean);
  EXPECT_EQ(info.previous_boot_id, "");
  EXPECT_EQ(info.boot_id, "boot-1");
  EXPECT_EQ(info.state, 0);
  EXPECT_EQ(info.lock_table_complete, backend_->persistent());
  EXPECT_EQ(DumpStore(), "state 0\n");
}

TEST_P(StoreConformance, RegistrationRoundTripsEveryField) {
  Registration r = MakeRegistration("client-a", "lockd", 16);
  for (size_t i = 0; i < r.priv.size(); ++i) r.priv[i] = static_cast<uint8_t>(0xF0 + i);
  r.source_address = "::ffff:10.0.0.1";
  r.peer_state = -7;  // Any int32: states wrap (serial-number arithmetic).
  clock_.Set(1'700'000'000'123'456);
  Put(r);

  const LoadedState loaded = Load();
  ASSERT_EQ(loaded.registrations.size(), 1U);
  Registration expected = r;
  expected.created = clock_.Now();
  expected.updated = clock_.Now();
  EXPECT_EQ(loaded.registrations[0], expected);
}

TEST_P(StoreConformance, SecondPutOfSameKeyUpdatesPrivAddressAndTimeButKeepsCreated) {
  clock_.Set(1'000'000);
  Put(MakeRegistration("client-a", "lockd", 16, 0x11));
  const auto created = clock_.Now();
  clock_.Set(2'000'000);
  Registration again = MakeRegistration("client-a", "lockd", 16, 0x22);
  again.source_address = "10.9.9.9";
  again.peer_state = 5;
  Put(again);

  const LoadedState loaded = Load();
  ASSERT_EQ(loaded.registrations.size(), 1U);
  EXPECT_EQ(loaded.registrations[0].priv[0], 0x22);
  EXPECT_EQ(loaded.registrations[0].source_address, "10.9.9.9");
  EXPECT_EQ(loaded.registrations[0].peer_state, 5);
  EXPECT_EQ(loaded.registrations[0].created, created);
  EXPECT_EQ(loaded.registrations[0].updated, clock_.Now());
}

TEST_P(StoreConformance, RegistrationsDifferingInAnyKeyFieldAreDistinct) {
  const Registration base = MakeRegistration("m", "n", 16);
  Put(base);
  Registration r = base;
  r.mon_name = "m2";
  Put(r);
  r = base;
  r.my_id.my_name = "n2";
  Put(r);
  r = base;
  r.my_id.my_prog = 100099;
  Put(r);
  r = base;
  r.my_id.my_vers = 1;
  Put(r);
  r = base;
  r.my_id.my_proc = 17;
  Put(r);
  EXPECT_EQ(store_->Counts().registrations, 6U);
}

TEST_P(StoreConformance, BinaryAndMaximumLengthFieldsRoundTrip) {
  // Names and handles come off the wire: any bytes, up to 1 KiB each (the protocols' bounds).
  const std::string binary("a\0b\xff\x80z", 6);
  const std::string big_a(1024, 'a');
  const std::string big_b(1024, '\xfe');
  Registration r = MakeRegistration(big_a, big_b);
  r.source_address = binary;
  Put(r);
  Put(MakeRegistration(binary, binary));
  Put(MakeRegistration("", ""));
  Apply({PutLock{LockRecord{big_a, big_b, -7, big_a + "x", true, 1, 2}},
         PutLock{LockRecord{binary, binary, 0, "", false, 0, 0}},
         PutShare{ShareRecord{big_b, big_a, big_b, 3, 1}}});
  Sync([&](Done d) { store_->PutNotifyOwed({NotifyOwed{big_a, binary, 5, 1}}, std::move(d)); });

  const LoadedState loaded = Load();
  auto regs = loaded.registrations;
  ASSERT_EQ(regs.size(), 3U);
  EXPECT_EQ(std::count_if(regs.begin(), regs.end(),
                          [&](const Registration& x) {
                            return x.mon_name == big_a && x.my_id.my_name == big_b &&
                                   x.source_address == binary;
                          }),
            1);
  EXPECT_EQ(std::count_if(regs.begin(), regs.end(),
                          [&](const Registration& x) { return x.mon_name == binary; }),
            1);
  EXPECT_EQ(std::count_if(regs.begin(), regs.end(),
                          [&](const Registration& x) { return x.mon_name.empty(); }),
            1);
  ASSERT_EQ(loaded.locks.size(), 2U);
  EXPECT_EQ(std::count(loaded.locks.begin(), loaded.locks.end(),
                       LockRecord{big_a, big_b, -7, big_a + "x", true, 1, 2}),
            1);
  EXPECT_EQ(std::count(loaded.locks.begin(), loaded.locks.end(),
                       LockRecord{binary, binary, 0, "", false, 0, 0}),
            1);
  ASSERT_EQ(loaded.shares.size(), 1U);
  EXPECT_EQ(loaded.shares[0], (ShareRecord{big_b, big_a, big_b, 3, 1}));
  ASSERT_EQ(loaded.notify_owed.size(), 1U);
  EXPECT_EQ(loaded.notify_owed[0], (NotifyOwed{big_a, binary, 5, 1}));
}

TEST_P(StoreConformance, RemoveRegistrationRemovesOnlyThatKey) {
  Put(MakeRegistration("a", "lockd", 16));
  Put(MakeRegistration("a", "lockd", 17));
  Put(MakeRegistration("b", "lockd", 16));
  Sync([&](Done d) {
    store_->RemoveRegistration("a", MyId{"lockd", 100021, 4, 16}, std::move(d));
  });
  Sync([&](Done d) {  // absent: no error
    store_->RemoveRegistration("zzz", MyId{"lockd", 100021, 4, 16}, std::move(d));
  });
  EXPECT_EQ(DumpStore(),
            "state 0\n"
            "reg a -> lockd/100021/4/17 priv=00000000000000000000000000000000 from=127.0.0.1\n"
            "reg b -> lockd/100021/4/16 priv=00000000000000000000000000000000 from=127.0.0.1\n");
}

TEST_P(StoreConformance, RemoveRegistrationsOfRemovesEveryRegistrationOfThatMyId) {
  Put(MakeRegistration("a", "lockd", 16));
  Put(MakeRegistration("b", "lockd", 16));
  Put(MakeRegistration("c", "lockd", 17));
  Put(MakeRegistration("d", "other", 16));
  Sync([&](Done d) { store_->RemoveRegistrationsOf(MyId{"lockd", 100021, 4, 16}, std::move(d)); });
  EXPECT_EQ(DumpStore(),
            "state 0\n"
            "reg c -> lockd/100021/4/17 priv=00000000000000000000000000000000 from=127.0.0.1\n"
            "reg d -> other/100021/4/16 priv=00000000000000000000000000000000 from=127.0.0.1\n");
}

TEST_P(StoreConformance, PutLockInsertsOrUpdatesByOwnerFileAndOffset) {
  Apply({PutLock{MakeLock("f", "h", 1, 0, 10)}, PutLock{MakeLock("f", "h", 1, 20, 5)},
         PutLock{MakeLock("f", "h", 1, 0, 15, false)}});
  EXPECT_EQ(DumpStore(),
            "state 0\n"
            "lock f h/1/oh-h ex 20+5\n"
            "lock f h/1/oh-h sh 0+15\n");
}

TEST_P(StoreConformance, OffsetsAndLengthsKeepAllSixtyFourBits) {
  Apply({PutLock{MakeLock("f", "h", 1, kMax, kMax)}, PutLock{MakeLock("f", "h", 2, kMax - 1, 0)},
         PutLock{MakeLock("f", "h", 3, uint64_t{1} << 63, (uint64_t{1} << 63) - 1)}});
  EXPECT_EQ(DumpStore(),
            "state 0\n"
            "lock f h/1/oh-h ex 18446744073709551615+18446744073709551615\n"
            "lock f h/2/oh-h ex 18446744073709551614+0\n"
            "lock f h/3/oh-h ex 9223372036854775808+9223372036854775807\n");
  Apply({RemoveLock{MakeLock("f", "h", 1, kMax, 0)}});
  EXPECT_EQ(store_->Counts().locks, 2U);
}

TEST_P(StoreConformance, RemoveLockMatchesOwnerFileAndOffsetOnly) {
  Apply({PutLock{MakeLock("f", "h", 1, 0, 10)}, PutLock{MakeLock("f", "h", 2, 0, 10)},
         PutLock{MakeLock("g", "h", 1, 0, 10)}});
  Apply(
      {RemoveLock{MakeLock("f", "h", 1, 0, 999, false)}, RemoveLock{MakeLock("f", "h", 1, 5, 1)}});
  EXPECT_EQ(DumpStore(),
            "state 0\n"
            "lock f h/2/oh-h ex 0+10\n"
            "lock g h/1/oh-h ex 0+10\n");
}

TEST_P(StoreConformance, ReplaceLocksSetsOneOwnersLocksOnOneFile) {
  Apply({PutLock{MakeLock("f", "h", 1, 0, 10)}, PutLock{MakeLock("f", "h", 1, 50, 10)},
         PutLock{MakeLock("f", "h", 2, 0, 10)}, PutLock{MakeLock("g", "h", 1, 0, 10)}});
  Apply({ReplaceLocks{"f", "h", 1, "oh-h", {{false, 0, 4}, {true, 4, 0}}, {}}});
  EXPECT_EQ(DumpStore(),
            "state 0\n"
            "lock f h/1/oh-h ex 4+0\n"
            "lock f h/1/oh-h sh 0+4\n"
            "lock f h/2/oh-h ex 0+10\n"
            "lock g h/1/oh-h ex 0+10\n");
  Apply({ReplaceLocks{"f", "h", 1, "oh-h", {}, {}}});
  EXPECT_EQ(DumpStore(),
            "state 0\n"
            "lock f h/2/oh-h ex 0+10\n"
            "lock g h/1/oh-h ex 0+10\n");
}

TEST_P(StoreConformance, ReplaceLocksWithinASpanLeavesTheOwnersOtherLocks) {
  Apply({PutLock{MakeLock("f", "h", 1, 0, 10)}, PutLock{MakeLock("f", "h", 1, 50, 10)},
         PutLock{MakeLock("f", "h", 1, 100, 10)}, PutLock{MakeLock("f", "h", 2, 50, 10)}});
  ReplaceLocks replace{"f", "h", 1, "oh-h", {{false, 45, 20}}, {}};
  replace.within = OffsetSpan{40, 70};
  Apply({replace});
  EXPECT_EQ(DumpStore(),
            "state 0\n"
            "lock f h/1/oh-h ex 0+10\n"
            "lock f h/1/oh-h ex 100+10\n"
            "lock f h/1/oh-h sh 45+20\n"
            "lock f h/2/oh-h ex 50+10\n");
  // Offsets past 2^63 are stored with the int64 bits: a span across 2^63 still covers both halves.
  const uint64_t top = uint64_t{1} << 63;
  Apply({PutLock{MakeLock("g", "h", 1, top - 5, 2)}, PutLock{MakeLock("g", "h", 1, top + 5, 2)},
         PutLock{MakeLock("g", "h", 1, kMax, 0)}});
  ReplaceLocks across{"g", "h", 1, "oh-h", {{true, top, 1}}, {}};
  across.within = OffsetSpan{top - 10, top + 10};
  Apply({across});
  EXPECT_EQ(DumpStore(),
            "state 0\n"
            "lock f h/1/oh-h ex 0+10\n"
            "lock f h/1/oh-h ex 100+10\n"
            "lock f h/1/oh-h sh 45+20\n"
            "lock f h/2/oh-h ex 50+10\n"
            "lock g h/1/oh-h ex 18446744073709551615+0\n"
            "lock g h/1/oh-h ex 9223372036854775808+1\n");
}

TEST_P(StoreConformance, LockChangesApplyInOrder) {
  Apply({PutLock{MakeLock("f", "h", 1, 0, 10)}, RemoveLock{MakeLock("f", "h", 1, 0, 10)},
         PutLock{MakeLock("f", "h", 1, 0, 7)},
         ReplaceLocks{"f", "h", 2, "oh-h", {{true, 1, 1}}, {}}, PutShare{MakeShare("f", "h", 1, 2)},
         RemoveShare{MakeShare("f", "h", 0, 0)}, PutShare{MakeShare("f", "h", 3, 3)}});
  EXPECT_EQ(DumpStore(),
            "state 0\n"
            "lock f h/1/oh-h ex 0+7\n"
            "lock f h/2/oh-h ex 1+1\n"
            "share f h/oh-h mode=3 access=3\n");
}

TEST_P(StoreConformance, SharesAreKeyedByFileHostAndOwner) {
  Apply({PutShare{MakeShare("f", "h", 1, 2)}, PutShare{MakeShare("f", "h", 3, 1)},
         PutShare{MakeShare("f", "i", 1, 1)}, PutShare{MakeShare("g", "h", 1, 1)}});
  Apply({RemoveShare{MakeShare("g", "h", 0, 0)}});
  EXPECT_EQ(DumpStore(),
            "state 0\n"
            "share f h/oh-h mode=3 access=1\n"
            "share f i/oh-i mode=1 access=1\n");
}

TEST_P(StoreConformance, ReleaseHostRemovesItsLocksAndSharesOnly) {
  Put(MakeRegistration("h", "lockd"));
  Apply({PutLock{MakeLock("f", "h", 1, 0, 10)}, PutLock{MakeLock("g", "h", 2, 0, 10)},
         PutLock{MakeLock("f", "other", 1, 20, 10)}, PutShare{MakeShare("f", "h", 1, 1)},
         PutShare{MakeShare("f", "other", 1, 1)}});
  Sync([&](Done d) { store_->ReleaseHost("h", std::move(d)); });
  EXPECT_EQ(DumpStore(),
            "state 0\n"
            "lock f other/1/oh-other ex 20+10\n"
            "reg h -> lockd/100021/4/16 priv=00000000000000000000000000000000 from=127.0.0.1\n"
            "share f other/oh-other mode=1 access=1\n");
}

TEST_P(StoreConformance, NotifyOwedIsUpsertedAndRemovedByMonName) {
  Sync([&](Done d) {
    store_->PutNotifyOwed({{"a", "10.0.0.1", 3, 0}, {"b", "10.0.0.2", 3, 0}}, std::move(d));
  });
  Sync([&](Done d) { store_->PutNotifyOwed({{"a", "10.0.0.9", 3, 4}}, std::move(d)); });
  Sync([&](Done d) { store_->RemoveNotifyOwed("b", std::move(d)); });
  EXPECT_EQ(DumpStore(), "state 0\nowed a at=10.0.0.9 state=3 attempts=4\n");
}

TEST_P(StoreConformance, BumpStateMovesToTheNextOddNumberAndRecordsHistory) {
  clock_.Set(1'000'000);
  EXPECT_EQ(store_->BumpState(), 1);
  clock_.Set(2'000'000);
  EXPECT_EQ(store_->BumpState(), 3);
  EXPECT_EQ(Load().state, 3);
  clock_.Set(3'000'000);
  store_->MarkCleanShutdown();
  EXPECT_EQ(Load().state, 4);
  const std::vector<StateChange> expected{
      {1, std::chrono::system_clock::time_point(std::chrono::seconds(1))},
      {3, std::chrono::system_clock::time_point(std::chrono::seconds(2))},
      {4, std::chrono::system_clock::time_point(std::chrono::seconds(3))}};
  EXPECT_EQ(store_->StateHistory(), expected);
}

TEST_P(StoreConformance, MoveStateToJumpsInOneStepAcrossTheWrapAndRecordsHistory) {
  clock_.Set(1'000'000);
  EXPECT_EQ(store_->BumpState(), 1);
  clock_.Set(2'000'000);
  EXPECT_EQ(store_->MoveStateTo(200'001), 200'001);
  EXPECT_EQ(Load().state, 200'001);
  EXPECT_EQ(store_->BumpState(), 200'003);
  // The largest state, then past the wrap, as the next odd numbers go.
  EXPECT_EQ(store_->MoveStateTo(std::numeric_limits<int32_t>::max()),
            std::numeric_limits<int32_t>::max());
  EXPECT_EQ(store_->BumpState(), std::numeric_limits<int32_t>::min() + 1);
  EXPECT_EQ(store_->MoveStateTo(-7), -7);
  EXPECT_EQ(Load().state, -7);
  const std::vector<StateChange> history = store_->StateHistory();
  ASSERT_EQ(history.size(), 6U);
  EXPECT_EQ(history[1],
            (StateChange{200'001, std::chrono::system_clock::time_point(std::chrono::seconds(2))}));
  EXPECT_EQ(history.back().state, -7);
  EXPECT_THROW(store_->MoveStateTo(8), Error) << "an even state is a caller's bug";
  EXPECT_EQ(Load().state, -7);
}

TEST_P(StoreConformance, ClearRemovesRegistrationsLocksAndSharesButKeepsStateAndOwed) {
  EXPECT_EQ(store_->BumpState(), 1);
  Put(MakeRegistration("a", "lockd"));
  Apply({PutLock{MakeLock("f", "h", 1, 0, 10)}, PutShare{MakeShare("f", "h", 1, 1)}});
  Sync([&](Done d) { store_->PutNotifyOwed({{"a", "10.0.0.1", 1, 0}}, std::move(d)); });
  Sync([&](Done d) { store_->Clear(std::move(d)); });
  EXPECT_EQ(DumpStore(), "state 1\nowed a at=10.0.0.1 state=1 attempts=0\n");
}

TEST_P(StoreConformance, CountsCountThisNodesRows) {
  Put(MakeRegistration("a", "lockd"));
  Put(MakeRegistration("b", "lockd"));
  Apply({PutLock{MakeLock("f", "h", 1, 0, 10)}, PutLock{MakeLock("f", "h", 1, 10, 10)},
         PutLock{MakeLock("f", "h", 1, 20, 10)}, PutShare{MakeShare("f", "h", 1, 1)}});
  const StoreCounts counts = store_->Counts();
  EXPECT_EQ(counts.registrations, 2U);
  EXPECT_EQ(counts.locks, 3U);
  EXPECT_EQ(counts.shares, 1U);
  EXPECT_EQ(counts.notify_owed, 0U);
}

TEST_P(StoreConformance, NodesSharingALocationSeeOnlyTheirOwnRows) {
  if (backend_->uri().starts_with("sqlite:")) {
    GTEST_SKIP() << "a SQLite file serves one process, and so one node (FileHolder)";
  }
  StoreOptions other_options = options_;
  other_options.node_id = UniqueNodeId("other");
  std::unique_ptr<Store> other = backend_->Open(other_options);
  Put(MakeRegistration("mine", "lockd"));
  Sync([&](Done d) { other->PutRegistration(MakeRegistration("theirs", "lockd"), std::move(d)); });
  Sync([&](Done d) {
    other->ApplyLockChanges({PutLock{MakeLock("f", "h", 1, 0, 1)}}, std::move(d));
  });
  EXPECT_EQ(other->BumpState(), 1);
  Sync([&](Done d) { other->Clear(std::move(d)); });
  EXPECT_EQ(DumpStore(),
            "state 0\n"
            "reg mine -> lockd/100021/4/16 priv=00000000000000000000000000000000 from=127.0.0.1\n");
  EXPECT_EQ(Dump(other->LoadAll()), "state 1\n");
}

TEST_P(StoreConformance, ConcurrentWritersAreAllAcknowledgedAndStored) {
  constexpr int kThreads = 8;
  constexpr int kWritesPerThread = 100;
  std::atomic<int> acknowledged{0};
  std::atomic<int> failed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kWritesPerThread; ++i) {
        const std::string host = "h" + std::to_string(t) + "-" + std::to_string(i);
        Sync([&](Done d) {
          if (i % 2 == 0) {
            store_->PutRegistration(MakeRegistration(host, "lockd"), std::move(d));
          } else {
            store_->ApplyLockChanges({PutLock{MakeLock("f", host, t, 0, 1)}}, std::move(d));
          }
        });
        ++acknowledged;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(acknowledged.load(), kThreads * kWritesPerThread);
  EXPECT_EQ(failed.load(), 0);
  const StoreCounts counts = store_->Counts();
  EXPECT_EQ(counts.registrations, static_cast<size_t>(kThreads * kWritesPerThread / 2));
  EXPECT_EQ(counts.locks, static_cast<size_t>(kThreads * kWritesPerThread / 2));
}

TEST_P(StoreConformance, AsynchronousWritesCompleteOnceEachInOrder) {
  constexpr int kWrites = 300;
  std::mutex mu;
  std::vector<int> completed;
  std::promise<void> all_done;
  for (int i = 0; i < kWrites; ++i) {
    store_->ApplyLockChanges({PutLock{MakeLock("f", "h", 1, static_cast<uint64_t>(i), 1)}},
                             [&, i](std::exception_ptr error) {
                               EXPECT_FALSE(error);
                               std::lock_guard lock(mu);
                               completed.push_back(i);
                               if (completed.size() == kWrites) all_done.set_value();
                             });
  }
  all_done.get_future().wait();
  std::vector<int> expected(kWrites);
  for (int i = 0; i < kWrites; ++i) expected[static_cast<size_t>(i)] = i;
  std::lock_guard lock(mu);
  EXPECT_EQ(completed, expected);
}

// Restarts: only a persistent store keeps anything.

TEST_P(PersistentStore, ReopenKeepsEverything) {
  EXPECT_EQ(store_->BumpState(), 1);
  Put(MakeRegistration("a", "lockd"));
  Apply({PutLock{MakeLock("f", "h", 1, 0, 10)}, PutShare{MakeShare("f", "h", 1, 1)}});
  Sync([&](Done d) { store_->PutNotifyOwed({{"a", "10.0.0.1", 1, 0}}, std::move(d)); });
  const std::string before = DumpStore();
  Reopen("boot-1");
  EXPECT_EQ(DumpStore(), before);
  EXPECT_FALSE(store_->startup().first_run);
  EXPECT_EQ(store_->startup().state, 1);
  EXPECT_EQ(store_->BumpState(), 3);
}

// The boot a state was announced on is the bump's, not merely the last run's: a run that stopped
// on a new boot before announcing leaves the earlier boot's.
TEST_P(PersistentStore, RecordsTheBootOnWhichTheStateWasLastBumped) {
  EXPECT_EQ(store_->startup().state_boot_id, "");
  EXPECT_EQ(store_->BumpState(), 1);
  Reopen("boot-2");
  EXPECT_EQ(store_->startup().state_boot_id, "boot-1");
  Reopen("boot-2");  // boot-2's run stopped before its bump
  EXPECT_EQ(store_->startup().previous_boot_id, "boot-2");
  EXPECT_EQ(store_->startup().state_boot_id, "boot-1");
  EXPECT_EQ(store_->BumpState(), 3);
  Reopen("boot-3");
  store_->MarkCleanShutdown();  // a clean stop moves the state, but announces nothing
  Reopen("boot-3");
  EXPECT_EQ(store_->startup().state_boot_id, "boot-2");
  EXPECT_EQ(store_->MoveStateTo(41), 41);  // a jump announces, as a bump does
  Reopen("boot-4");
  EXPECT_EQ(store_->startup().state, 41);
  EXPECT_EQ(store_->startup().state_boot_id, "boot-3");
}

TEST_P(PersistentStore, ReportsEachCommittedTransactionToItsCommitObserver) {
  std::mutex mu;
  std::vector<size_t> batch_sizes;
  store_->SetCommitObserver([&](const CommitRecord& record) {
    std::lock_guard lock(mu);
    batch_sizes.push_back(record.writes);
  });
  Put(MakeRegistration("a", "lockd"));
  Apply({PutLock{MakeLock("f", "h", 1, 0, 10)}, PutShare{MakeShare("f", "h", 1, 1)}});
  store_->SetCommitObserver({});
  Put(MakeRegistration("b", "lockd"));
  std::lock_guard lock(mu);
  // Each write ran alone (its Done was awaited before the next): two transactions of one.
  EXPECT_EQ(batch_sizes, (std::vector<size_t>{1, 1}));
}

TEST_P(PersistentStore, UncleanRestartOnTheSameBootTrustsTheLockTable) {
  Apply({PutLock{MakeLock("f", "h", 1, 0, 10)}});
  Reopen("boot-1");  // the process crashed; the kernel kept its page cache
  const StartupInfo& info = store_->startup();
  EXPECT_FALSE(info.first_run);
  EXPECT_FALSE(info.previous_run_clean);
  EXPECT_EQ(info.previous_boot_id, "boot-1");
  EXPECT_TRUE(info.lock_table_complete);
}

TEST_P(PersistentStore, UncleanRestartOnANewBootDistrustsTheLockTableUntilMarkedComplete) {
  Apply({PutLock{MakeLock("f", "h", 1, 0, 10)}});
  Reopen("boot-2");  // the host crashed
  EXPECT_EQ(store_->startup().previous_boot_id, "boot-1");
  if (backend_->on_database_server()) {
    // The database server committed every answered write, whichever host asks next.
    EXPECT_TRUE(store_->startup().lock_table_complete);
    return;
  }
  EXPECT_FALSE(store_->startup().lock_table_complete);
  Reopen("boot-2");  // crashed again during grace: the table is still the incomplete one
  EXPECT_FALSE(store_->startup().lock_table_complete);
  Sync([&](Done d) { store_->MarkLockTableComplete(std::move(d)); });
  Reopen("boot-2");
  EXPECT_TRUE(store_->startup().lock_table_complete);
}

TEST_P(PersistentStore, CleanShutdownIsTrustedOnANewBoot) {
  EXPECT_EQ(store_->BumpState(), 1);
  store_->MarkCleanShutdown();
  Reopen("boot-2");
  const StartupInfo& info = store_->startup();
  EXPECT_TRUE(info.previous_run_clean);
  EXPECT_TRUE(info.lock_table_complete);
  EXPECT_EQ(info.state, 2);
  EXPECT_EQ(store_->BumpState(), 3);
  Reopen("boot-3");  // this run did not shut down cleanly
  EXPECT_FALSE(store_->startup().previous_run_clean);
  EXPECT_EQ(store_->startup().lock_table_complete, backend_->on_database_server());
}

}  // namespace
}  // namespace nlockd::store::testutil
