// SPDX-License-Identifier: Apache-2.0
// LockManager: the wait-for check of blocking requests (deadlock detection).

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "lock/lock_manager.hpp"
#include "lock/testing/test_util.hpp"

namespace nlockd::lock {
namespace {

using namespace testing;  // NOLINT(google-build-using-namespace): test helpers.

FileKey FileN(size_t i) { return File("fh" + std::to_string(i)); }
// Owner i on host "h<i % hosts>": cycles run across hosts.
LockOwner OwnerN(size_t i, size_t hosts = 3) {
  return Owner("h" + std::to_string(i % hosts), static_cast<int32_t>(i + 1));
}

// Owners 0..n-1 each hold file i, and owners 0..n-2 each block on file i+1: a chain of n
// owners, 0 waiting (through the others) for n-1.
void MakeChain(LockManager& manager, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(manager.Lock(Req(FileN(i), OwnerN(i), 0, 1)).status, LockStatus::kGranted);
  }
  for (size_t i = 0; i + 1 < n; ++i) {
    ASSERT_EQ(manager.Lock(Blocking(FileN(i + 1), OwnerN(i), 0, 1)).status, LockStatus::kBlocked)
        << i;
  }
}

// Owner n-1 blocks on file 0, closing the chain of n owners into a cycle.
LockOutcome CloseChain(LockManager& manager, size_t n) {
  return manager.Lock(Blocking(FileN(0), OwnerN(n - 1), 0, 1));
}

class LockManagerDeadlockTest : public LockManagerFixture {
 protected:
  static void ExpectDeadlock(const LockOutcome& out) {
    EXPECT_EQ(out.status, LockStatus::kDenied);
    EXPECT_TRUE(out.deadlock);
    EXPECT_FALSE(out.waiter);
    EXPECT_TRUE(out.holder);  // The lock it would have waited for, as for any denial.
  }
};

TEST_F(LockManagerDeadlockTest, TheRequestClosingACycleOfTwoIsRefusedAndNothingElseChanges) {
  manager_.Lock(Req(FileN(1), a_, 0, 10));
  manager_.Lock(Req(FileN(2), b_, 0, 10));
  ASSERT_EQ(manager_.Lock(Blocking(FileN(2), a_, 0, 10)).status, LockStatus::kBlocked);
  const std::string before = manager_.DebugString();

  const LockOutcome out = manager_.Lock(Blocking(FileN(1), b_, 5, 1));
  ExpectDeadlock(out);
  EXPECT_EQ(out.holder->owner, a_);
  EXPECT_TRUE(out.waiters_removed.empty());
  EXPECT_TRUE(out.grants.empty());
  EXPECT_EQ(manager_.DebugString(), before);  // a still waits; nobody lost anything.
  EXPECT_EQ(manager_.deadlock_counts().refused, 1u);
  EXPECT_EQ(manager_.hosts().Find(HostId("b"))->waiters, 0u);
}

TEST_F(LockManagerDeadlockTest, CyclesOfThreeAndTenOwnersAcrossHostsAreRefused) {
  for (size_t n : {3u, 10u}) {
    SCOPED_TRACE(n);
    LockManager manager(clock_);
    MakeChain(manager, n);
    const std::string before = manager.DebugString();
    ExpectDeadlock(CloseChain(manager, n));
    EXPECT_EQ(manager.DebugString(), before);
    EXPECT_EQ(manager.Counts().waiters, n - 1);
  }
}

TEST_F(LockManagerDeadlockTest, ACycleOfOwnersOnOneHostAndOfOneSvidOnManyHostsIsFound) {
  // The same svid on two hosts is two owners; so are two svids of one host.
  const LockOwner a1 = Owner("x", 7);
  const LockOwner b1 = Owner("y", 7);
  manager_.Lock(Req(FileN(1), a1, 0, 1));
  manager_.Lock(Req(FileN(2), b1, 0, 1));
  manager_.Lock(Blocking(FileN(2), a1, 0, 1));
  ExpectDeadlock(manager_.Lock(Blocking(FileN(1), b1, 0, 1)));

  const LockOwner c1 = Owner("z", 1);
  const LockOwner c2 = Owner("z", 2);
  manager_.Lock(Req(FileN(3), c1, 0, 1));
  manager_.Lock(Req(FileN(4), c2, 0, 1));
  manager_.Lock(Blocking(FileN(4), c1, 0, 1));
  ExpectDeadlock(manager_.Lock(Blocking(FileN(3), c2, 0, 1)));
}

TEST_F(LockManagerDeadlockTest, AChainThatIsNotACycleWaits) {
  MakeChain(manager_, 10);
  // An owner outside the chain blocks on its head: it waits like any other.
  const LockOutcome out = manager_.Lock(Blocking(FileN(0), Owner("outsider"), 0, 1));
  EXPECT_EQ(out.status, LockStatus::kBlocked);
  EXPECT_FALSE(out.deadlock);
  // So does the tail blocking on a file nobody in the chain waits for.
  manager_.Lock(Req(FileN(99), c_, 0, 1));
  EXPECT_EQ(manager_.Lock(Blocking(FileN(99), OwnerN(9), 0, 1)).status, LockStatus::kBlocked);
  EXPECT_EQ(manager_.deadlock_counts().refused, 0u);
  EXPECT_EQ(manager_.deadlock_counts().gave_up, 0u);
}

TEST_F(LockManagerDeadlockTest, EveryHolderOfAFanIsFollowed) {
  // b waits for both a (shared, not waiting) and c (shared, waiting for d): d blocking on b
  // closes a cycle only through the second holder.
  manager_.Lock(Req(f_, a_, 0, 10, kS));
  manager_.Lock(Req(f_, c_, 0, 10, kS));
  manager_.Lock(Req(FileN(2), d_, 0, 1));
  manager_.Lock(Req(FileN(3), b_, 0, 1));
  ASSERT_EQ(manager_.Lock(Blocking(f_, b_, 0, 10)).status, LockStatus::kBlocked);
  ASSERT_EQ(manager_.Lock(Blocking(FileN(2), c_, 0, 1)).status, LockStatus::kBlocked);
  ExpectDeadlock(manager_.Lock(Blocking(FileN(3), d_, 0, 1)));
}

TEST_F(LockManagerDeadlockTest, EveryWaiterOfAnOwnerIsFollowed) {
  // c has two queued waiters (two threads of one process): only the second leads back to a.
  manager_.Lock(Req(FileN(1), a_, 0, 1));
  manager_.Lock(Req(FileN(2), b_, 0, 1));
  manager_.Lock(Req(FileN(3), c_, 0, 1));
  manager_.Lock(Req(FileN(4), d_, 0, 1));
  ASSERT_EQ(manager_.Lock(Blocking(FileN(4), c_, 0, 1)).status, LockStatus::kBlocked);
  ASSERT_EQ(manager_.Lock(Blocking(FileN(1), c_, 0, 1)).status, LockStatus::kBlocked);
  ASSERT_EQ(manager_.Lock(Blocking(FileN(3), b_, 0, 1)).status, LockStatus::kBlocked);
  ExpectDeadlock(manager_.Lock(Blocking(FileN(2), a_, 0, 1)));
}

TEST_F(LockManagerDeadlockTest, TwoSharedHoldersUpgradingDeadlock) {
  manager_.Lock(Req(f_, a_, 0, 10, kS));
  manager_.Lock(Req(f_, b_, 0, 10, kS));
  ASSERT_EQ(manager_.Lock(Blocking(f_, a_, 0, 10)).status, LockStatus::kBlocked);
  ExpectDeadlock(manager_.Lock(Blocking(f_, b_, 0, 10)));
  // b gives up its shared lock: a's upgrade goes through.
  EXPECT_EQ(Describe(manager_.Unlock(f_, b_, 0, 10).grants), "1:1@a X [0,9]");
}

TEST_F(LockManagerDeadlockTest, AReSentRequestIsRefusedAgainAndItsWaiterIsUntouched) {
  manager_.Lock(Req(FileN(1), a_, 0, 1));
  manager_.Lock(Req(FileN(2), b_, 0, 1));
  const LockOutcome blocked = manager_.Lock(Blocking(FileN(2), a_, 0, 1));
  ExpectDeadlock(manager_.Lock(Blocking(FileN(1), b_, 0, 1)));
  ExpectDeadlock(manager_.Lock(Blocking(FileN(1), b_, 0, 1)));
  // a's retransmissions find the same waiter: its own waiter does not make a cycle.
  for (int i = 0; i < 3; ++i) {
    const LockOutcome again = manager_.Lock(Blocking(FileN(2), a_, 0, 1));
    EXPECT_EQ(again.status, LockStatus::kBlocked);
    EXPECT_EQ(again.waiter, blocked.waiter);
  }
  EXPECT_EQ(manager_.Counts().waiters, 1u);
  EXPECT_EQ(manager_.deadlock_counts().refused, 2u);
}

TEST_F(LockManagerDeadlockTest, ACycleAGrantClosedIsRefusedToTheNextReSentRequest) {
  // b (two threads) waits on fh2 behind c, then a waits there too; b also waits for a on fh1.
  manager_.Lock(Req(FileN(1), a_, 0, 1));
  manager_.Lock(Req(FileN(2), c_, 0, 1));
  const WaiterId b_on_2 = *manager_.Lock(Blocking(FileN(2), b_, 0, 1)).waiter;
  const WaiterId a_on_2 = *manager_.Lock(Blocking(FileN(2), a_, 0, 1)).waiter;
  ASSERT_EQ(manager_.Lock(Blocking(FileN(1), b_, 0, 1)).status, LockStatus::kBlocked);
  // c unlocks: b, the older waiter, gets fh2, and now a waits for b which waits for a.
  ASSERT_EQ(manager_.Unlock(FileN(2), c_, 0, 1).grants.size(), 1u);
  EXPECT_EQ(manager_.deadlock_counts().refused, 0u);
  // a's client re-sends its blocked LOCK (Linux does every 30 s): the cycle is found, and a's
  // waiter goes with the refused request.
  const LockOutcome out = manager_.Lock(Blocking(FileN(2), a_, 0, 1));
  ExpectDeadlock(out);
  EXPECT_EQ(out.waiters_removed, (WaiterIds{a_on_2}));
  EXPECT_EQ(manager_.hosts().Find(HostId("a"))->waiters, 0u);
  // b still holds its grant and still waits for fh1; a can unlock it and b goes on.
  EXPECT_EQ(manager_.Unlock(FileN(1), a_, 0, 1).grants.size(), 1u);
  EXPECT_TRUE(manager_.AcknowledgeGrant(b_on_2));
}

TEST_F(LockManagerDeadlockTest, APendingGrantIsAHeldLock) {
  manager_.Lock(Req(FileN(1), a_, 0, 1));
  manager_.Lock(Req(FileN(2), c_, 0, 1));
  manager_.Lock(Blocking(FileN(2), b_, 0, 1));
  ASSERT_EQ(manager_.Unlock(FileN(2), c_, 0, 1).grants.size(), 1u);  // b's, unacknowledged.
  ASSERT_EQ(manager_.Lock(Blocking(FileN(1), b_, 0, 1)).status, LockStatus::kBlocked);
  ExpectDeadlock(manager_.Lock(Blocking(FileN(2), a_, 0, 1)));
}

TEST_F(LockManagerDeadlockTest, ACycleLongerThanTheBoundIsNotFound) {
  LockManagerOptions options;
  options.wait_for.max_cycle = 10;
  LockManager bounded(clock_, options);
  const auto build = [&](size_t n) {
    for (size_t i = 0; i < n; ++i) bounded.Lock(Req(FileN(i), OwnerN(i, 7), 0, 1));
    for (size_t i = 0; i + 1 < n; ++i) bounded.Lock(Blocking(FileN(i + 1), OwnerN(i, 7), 0, 1));
    return bounded.Lock(Blocking(FileN(0), OwnerN(n - 1, 7), 0, 1));
  };
  // Exactly the bound: found.
  ExpectDeadlock(build(10));
  for (size_t i = 0; i < 10; ++i) bounded.ReleaseHost(OwnerN(i, 7).host);
  ASSERT_EQ(bounded.Counts().locks, 0u);
  // One more owner: the check stops at the bound and the request waits (the deadlock stays
  // until a client gives up, as on a server that does not check).
  const LockOutcome out = build(11);
  EXPECT_EQ(out.status, LockStatus::kBlocked);
  EXPECT_EQ(bounded.deadlock_counts().refused, 1u);
  EXPECT_EQ(bounded.deadlock_counts().gave_up, 1u);
}

TEST_F(LockManagerDeadlockTest, TheDefaultBoundFindsSixteenOwners) {
  MakeChain(manager_, 16);
  ExpectDeadlock(CloseChain(manager_, 16));
}

TEST_F(LockManagerDeadlockTest, AFanWiderThanTheStepLimitStopsTheCheck) {
  LockManagerOptions options;
  options.wait_for.max_steps = 50;
  LockManager bounded(clock_, options);
  // 100 readers on f, the last of which waits for a; a blocking on f would close a cycle, but
  // the check examines 50 entries and gives up.
  for (size_t i = 0; i < 100; ++i) bounded.Lock(Req(f_, OwnerN(i, 5), 0, 1, kS));
  bounded.Lock(Req(FileN(7), a_, 0, 1));
  ASSERT_EQ(bounded.Lock(Blocking(FileN(7), OwnerN(99, 5), 0, 1)).status, LockStatus::kBlocked);
  EXPECT_EQ(bounded.Lock(Blocking(f_, a_, 0, 1)).status, LockStatus::kBlocked);
  EXPECT_EQ(bounded.deadlock_counts().gave_up, 1u);
  // With the default limit it is found.
  for (size_t i = 0; i < 100; ++i) manager_.Lock(Req(f_, OwnerN(i, 5), 0, 1, kS));
  manager_.Lock(Req(FileN(7), a_, 0, 1));
  ASSERT_EQ(manager_.Lock(Blocking(FileN(7), OwnerN(99, 5), 0, 1)).status, LockStatus::kBlocked);
  ExpectDeadlock(manager_.Lock(Blocking(f_, a_, 0, 1)));
}

TEST_F(LockManagerDeadlockTest, WithDetectionOffTheCycleWaits) {
  LockManagerOptions options;
  options.detect_deadlocks = false;
  LockManager unchecked(clock_, options);
  unchecked.Lock(Req(FileN(1), a_, 0, 1));
  unchecked.Lock(Req(FileN(2), b_, 0, 1));
  unchecked.Lock(Blocking(FileN(2), a_, 0, 1));
  EXPECT_EQ(unchecked.Lock(Blocking(FileN(1), b_, 0, 1)).status, LockStatus::kBlocked);
}

TEST_F(LockManagerDeadlockTest, NonBlockingRequestsAndSharesNeverWaitSoNeverDeadlock) {
  manager_.Lock(Req(FileN(1), a_, 0, 1));
  manager_.Lock(Req(FileN(2), b_, 0, 1));
  manager_.Lock(Blocking(FileN(2), a_, 0, 1));
  // b's non-blocking request is an ordinary denial.
  const LockOutcome denied = manager_.Lock(Req(FileN(1), b_, 0, 1));
  EXPECT_EQ(denied.status, LockStatus::kDenied);
  EXPECT_FALSE(denied.deadlock);
  // Share reservations are refused at once on a conflict, never queued: a and b denying each
  // other on fh3 adds no wait, so b blocking behind c (who waits for nobody) just waits.
  ShareRequest share;
  share.file = FileN(3);
  share.owner = LockOwner{HostId("a"), 0, OwnerHandle("a")};
  share.deny = ShareDeny::kReadWrite;
  ASSERT_EQ(manager_.Share(share).status, LockStatus::kGranted);
  share.owner = LockOwner{HostId("b"), 0, OwnerHandle("b")};
  EXPECT_EQ(manager_.Share(share).status, LockStatus::kDenied);
  manager_.Lock(Req(FileN(4), c_, 0, 1));
  EXPECT_EQ(manager_.Lock(Blocking(FileN(4), b_, 0, 1)).status, LockStatus::kBlocked);
  EXPECT_EQ(manager_.deadlock_counts().refused, 0u);
}

TEST_F(LockManagerDeadlockTest, ALockRefusedForGraceIsNotAWaiterButItsRetryAfterGraceIsChecked) {
  // b restored fh2 and has not reclaimed it; a holds fh1.
  manager_.StartGrace(GraceMode::kFineGrained);
  const std::vector<RestoredLock> restored = {{FileN(2), b_, ByteRange::FromFirstLast(0, 0), kX}};
  ASSERT_EQ(manager_.LoadRestored(restored, {}).locks, 1u);
  ASSERT_EQ(manager_.Lock(Req(FileN(1), a_, 0, 1)).status, LockStatus::kGranted);
  // a blocks on fh2: refused for grace, not queued.
  EXPECT_EQ(manager_.Lock(Blocking(FileN(2), a_, 0, 1)).status, LockStatus::kDeniedGrace);
  EXPECT_EQ(manager_.Counts().waiters, 0u);
  // b reclaims fh2 and blocks on fh1: a waits for nothing, so b simply waits.
  ASSERT_EQ(manager_.Lock(Reclaim(FileN(2), b_, 0, 1)).status, LockStatus::kGranted);
  EXPECT_EQ(manager_.Lock(Blocking(FileN(1), b_, 0, 1)).status, LockStatus::kBlocked);
  // a's client retries once grace is over: that request would close the cycle.
  manager_.EndGrace(GraceEndReason::kAdmin);
  ExpectDeadlock(manager_.Lock(Blocking(FileN(2), a_, 0, 1)));
}

TEST_F(LockManagerDeadlockTest, AnOwnersOwnLocksAreNotAWait) {
  // a holds [0,9] shared and blocks on [0,19] exclusive behind b's [10,19]: it waits for b only.
  manager_.Lock(Req(f_, a_, 0, 10, kS));
  manager_.Lock(Req(f_, b_, 10, 10));
  ASSERT_EQ(manager_.Lock(Blocking(f_, a_, 0, 20)).status, LockStatus::kBlocked);
  // c, waiting for a, is no cycle.
  EXPECT_EQ(manager_.Lock(Blocking(f_, c_, 0, 1)).status, LockStatus::kBlocked);
}

TEST_F(LockManagerDeadlockTest, TheWaitForViewShowsAChainToItsHead) {
  MakeChain(manager_, 3);  // 0 waits for 1 on fh1, 1 waits for 2 on fh2, 2 waits for nobody.
  const std::vector<WaitForInfo> view = manager_.ListWaitFor();
  ASSERT_EQ(view.size(), 2u);
  std::vector<std::string> lines;
  for (const WaitForInfo& info : view) {
    ASSERT_EQ(info.blocked_by.size(), 1u);
    const Blocker& b = info.blocked_by[0];
    std::string waits;
    for (WaiterId id : b.holder_waits) waits += " " + std::to_string(id.value());
    lines.push_back(std::to_string(info.waiter.id.value()) + " " + info.waiter.owner.ToString() +
                    " -> " + b.owner.ToString() + " " + b.range.ToString() + " waits:" + waits);
  }
  std::sort(lines.begin(), lines.end());
  EXPECT_EQ(lines, (std::vector<std::string>{"1 h0/1/1@h0 -> h1/2/2@h1 [0,0] waits: 2",
                                             "2 h1/2/2@h1 -> h2/3/3@h2 [0,0] waits:"}));
}

TEST_F(LockManagerDeadlockTest, TheWaitForViewCapsAWideFan) {
  for (size_t i = 0; i < 40; ++i) manager_.Lock(Req(f_, OwnerN(i, 4), 0, 1, kS));
  manager_.Lock(Blocking(f_, a_, 0, 1));
  const std::vector<WaitForInfo> view = manager_.ListWaitFor({}, 8);
  ASSERT_EQ(view.size(), 1u);
  EXPECT_EQ(view[0].blockers, 40u);
  EXPECT_EQ(view[0].blocked_by.size(), 8u);
}

// Random traffic of 12 owners on 4 hosts over 4 files; before every blocking request, the
// cycle it would close is searched for in the manager's own views (ListWaiters, ListLocks),
// with no bound (12 owners are within the default one), and the outcome must agree.
class WaitForViewsOracle {
 public:
  explicit WaitForViewsOracle(const LockManager& manager) : manager_(manager) {}

  bool WouldDeadlock(const LockRequest& request) const {
    const ByteRange range = *ByteRange::FromOffsetLength(request.offset, request.length);
    const std::vector<LockInfo> locks = manager_.ListLocks();
    const std::vector<WaiterInfo> waiters = manager_.ListWaiters();
    const auto holders = [&](const LockOwner& owner, const FileKey& file, const ByteRange& over,
                             LockType type) {
      std::vector<LockOwner> out;
      for (const LockInfo& l : locks) {
        if (l.file == file && l.owner != owner && l.range.Overlaps(over) &&
            TypesConflict(l.type, type)) {
          out.push_back(l.owner);
        }
      }
      return out;
    };
    std::vector<LockOwner> todo = holders(request.owner, request.file, range, request.type);
    std::vector<LockOwner> seen;
    while (!todo.empty()) {
      const LockOwner p = todo.back();
      todo.pop_back();
      if (p == request.owner) return true;
      if (std::find(seen.begin(), seen.end(), p) != seen.end()) continue;
      seen.push_back(p);
      for (const WaiterInfo& w : waiters) {
        if (w.granted || w.owner != p) continue;
        for (const LockOwner& q : holders(p, w.file, w.range, w.type)) todo.push_back(q);
      }
    }
    return false;
  }

 private:
  const LockManager& manager_;
};

TEST(LockManagerDeadlockModel, RefusesExactlyTheRequestsThatCloseACycleAcrossFilesAndHosts) {
  size_t refused = 0;
  for (uint64_t seed : {1u, 2u, 3u, 4u}) {
    SCOPED_TRACE(seed);
    ManualClock clock;
    LockManager manager(clock);
    const WaitForViewsOracle oracle(manager);
    std::mt19937_64 rng(seed);
    const auto pick = [&](uint64_t n) { return rng() % n; };
    for (int step = 0; step < 4000; ++step) {
      SCOPED_TRACE(step);
      const LockOwner owner = OwnerN(pick(12), 4);
      const FileKey file = FileN(pick(4));
      const uint64_t offset = pick(8);
      const uint64_t length = 1 + pick(4);
      const LockType type = pick(3) == 0 ? kS : kX;
      const uint64_t op = pick(100);
      if (op < 50) {
        const LockRequest request = Req(file, owner, offset, length, type, op < 40);
        const bool expected = request.block &&
                              manager.Test(request).status == LockStatus::kDenied &&
                              oracle.WouldDeadlock(request);
        const LockOutcome out = manager.Lock(request);
        ASSERT_EQ(out.deadlock, expected) << manager.DebugString();
        if (expected) ++refused;
      } else if (op < 85) {
        manager.Unlock(file, owner, offset, length);
      } else if (op < 97) {
        // Acknowledge or revoke some pending grant.
        for (const WaiterInfo& w : manager.ListWaiters()) {
          if (!w.granted) continue;
          if (pick(2) == 0) {
            manager.AcknowledgeGrant(w.id);
          } else {
            manager.RevokeGrant(w.id);
          }
          break;
        }
      } else {
        manager.ReleaseHost(owner.host);
      }
    }
  }
  EXPECT_GT(refused, 20u);
}

}  // namespace
}  // namespace nlockd::lock
