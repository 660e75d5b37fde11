// SPDX-License-Identifier: Apache-2.0
#include "lock/lock_table.hpp"

#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace nlockd::lock {
namespace {

constexpr uint64_t kMax = ByteRange::kMaxOffset;
constexpr LockType kS = LockType::kShared;
constexpr LockType kX = LockType::kExclusive;
const OwnerId kA(0);
const OwnerId kB(1);

ByteRange R(uint64_t first, uint64_t last) { return ByteRange::FromFirstLast(first, last); }

// "A X [0,9], B S [5,end]*" in table order (* marks awaiting reclaim).
std::string Render(const LockTable& table) {
  std::string out;
  table.ForEach([&](const LockEntry& e) {
    if (!out.empty()) out += ", ";
    out += static_cast<char>('A' + e.owner.value());
    out += e.type == kX ? " X " : " S ";
    out += e.range.ToString();
    if (e.awaiting_reclaim) out += "*";
  });
  return out;
}

class LockTableTest : public ::testing::Test {
 protected:
  LockTable table_{42};
};

TEST_F(LockTableTest, FirstLockAddsOneEntry) {
  const TableDelta delta = table_.Lock(kA, R(0, 9), kX, false);
  EXPECT_EQ(delta.entries, 1);
  EXPECT_FALSE(delta.released);
  EXPECT_EQ(Render(table_), "A X [0,9]");
  EXPECT_EQ(table_.size(), 1u);
}

TEST_F(LockTableTest, AdjacentSharedRangesOfOneOwnerMerge) {
  table_.Lock(kA, R(0, 9), kS, false);
  const TableDelta delta = table_.Lock(kA, R(10, 19), kS, false);
  EXPECT_EQ(delta.entries, 0);
  EXPECT_EQ(Render(table_), "A S [0,19]");
}

TEST_F(LockTableTest, OverlappingRangesOfOneTypeMergeIntoOne) {
  table_.Lock(kA, R(0, 9), kX, false);
  table_.Lock(kA, R(20, 29), kX, false);
  table_.Lock(kA, R(5, 24), kX, false);
  EXPECT_EQ(Render(table_), "A X [0,29]");
}

TEST_F(LockTableTest, AdjacentRangesOfDifferentTypesStaySeparate) {
  table_.Lock(kA, R(0, 9), kS, false);
  table_.Lock(kA, R(10, 19), kX, false);
  EXPECT_EQ(Render(table_), "A S [0,9], A X [10,19]");
}

TEST_F(LockTableTest, UpgradingTheMiddleSplitsASharedLockInThree) {
  table_.Lock(kA, R(0, 29), kS, false);
  const TableDelta delta = table_.Lock(kA, R(10, 19), kX, false);
  EXPECT_EQ(delta.entries, 2);
  EXPECT_FALSE(delta.released);
  EXPECT_EQ(Render(table_), "A S [0,9], A X [10,19], A S [20,29]");
}

TEST_F(LockTableTest, DowngradeReportsTheBytesItReleased) {
  table_.Lock(kA, R(0, 29), kX, false);
  const TableDelta delta = table_.Lock(kA, R(10, 39), kS, false);
  EXPECT_EQ(Render(table_), "A X [0,9], A S [10,39]");
  ASSERT_TRUE(delta.released);
  EXPECT_EQ(*delta.released, R(10, 29));
}

TEST_F(LockTableTest, DowngradeMergesWithNeighbouringSharedRanges) {
  table_.Lock(kA, R(0, 9), kS, false);
  table_.Lock(kA, R(10, 19), kX, false);
  table_.Lock(kA, R(20, 29), kS, false);
  table_.Lock(kA, R(10, 19), kS, false);
  EXPECT_EQ(Render(table_), "A S [0,29]");
}

TEST_F(LockTableTest, UpgradeOverSeveralRangesReplacesThemAll) {
  table_.Lock(kA, R(0, 4), kS, false);
  table_.Lock(kA, R(10, 14), kS, false);
  table_.Lock(kA, R(20, 24), kX, false);
  table_.Lock(kA, R(2, 22), kX, false);
  EXPECT_EQ(Render(table_), "A S [0,1], A X [2,24]");
}

TEST_F(LockTableTest, RelockingAHeldRangeChangesNothing) {
  table_.Lock(kA, R(0, 99), kX, false);
  const TableDelta delta = table_.Lock(kA, R(10, 19), kX, false);
  EXPECT_EQ(delta.entries, 0);
  EXPECT_FALSE(delta.released);
  EXPECT_EQ(Render(table_), "A X [0,99]");
  EXPECT_TRUE(table_.Holds(kA, R(10, 19), kX, false));
  EXPECT_FALSE(table_.Holds(kA, R(10, 19), kS, false));
  EXPECT_FALSE(table_.Holds(kA, R(90, 100), kX, false));
}

TEST_F(LockTableTest, UnlockingTheMiddleSplitsInTwo) {
  table_.Lock(kA, R(0, 29), kX, false);
  const TableDelta delta = table_.Unlock(kA, R(10, 19));
  EXPECT_EQ(delta.entries, 1);
  ASSERT_TRUE(delta.released);
  EXPECT_EQ(*delta.released, R(10, 19));
  EXPECT_EQ(Render(table_), "A X [0,9], A X [20,29]");
}

TEST_F(LockTableTest, UnlockingWhatIsNotHeldChangesNothing) {
  table_.Lock(kA, R(0, 9), kX, false);
  const TableDelta delta = table_.Unlock(kA, R(10, 19));
  EXPECT_EQ(delta.entries, 0);
  EXPECT_FALSE(delta.released);
  table_.Unlock(kB, R(0, 9));
  EXPECT_EQ(Render(table_), "A X [0,9]");
}

TEST_F(LockTableTest, UnlockAcrossSeveralRangesTrimsTheEnds) {
  table_.Lock(kA, R(0, 9), kS, false);
  table_.Lock(kA, R(10, 19), kX, false);
  table_.Lock(kA, R(30, 39), kS, false);
  table_.Unlock(kA, R(5, 34));
  EXPECT_EQ(Render(table_), "A S [0,4], A S [35,39]");
}

TEST_F(LockTableTest, ToEndRangesSplitAndMergeAtTheLastByte) {
  table_.Lock(kA, R(10, kMax), kX, false);
  table_.Unlock(kA, R(20, kMax));
  EXPECT_EQ(Render(table_), "A X [10,19]");
  table_.Lock(kA, R(kMax, kMax), kX, false);
  table_.Lock(kA, R(kMax - 5, kMax - 1), kX, false);
  EXPECT_EQ(Render(table_), "A X [10,19], A X [18446744073709551610,end]");
  table_.Unlock(kA, R(kMax, kMax));
  EXPECT_EQ(Render(table_), "A X [10,19], A X [18446744073709551610,18446744073709551614]");
  table_.Lock(kA, R(0, kMax), kS, false);
  EXPECT_EQ(Render(table_), "A S [0,end]");
}

TEST_F(LockTableTest, ALockAtOffsetZeroMergesWithoutUnderflow) {
  table_.Lock(kA, R(1, 5), kS, false);
  table_.Lock(kA, R(0, 0), kS, false);
  EXPECT_EQ(Render(table_), "A S [0,5]");
}

TEST_F(LockTableTest, OwnersOverlapOnlyThroughTheCallersChecks) {
  table_.Lock(kA, R(0, 9), kS, false);
  table_.Lock(kB, R(5, 14), kS, false);
  EXPECT_EQ(Render(table_), "A S [0,9], B S [5,14]");
  EXPECT_EQ(table_.FindConflict(kB, R(0, 3), kS), nullptr);
  const LockEntry* conflict = table_.FindConflict(kB, R(0, 3), kX);
  ASSERT_NE(conflict, nullptr);
  EXPECT_EQ(conflict->owner, kA);
  EXPECT_EQ(table_.FindConflict(kA, R(0, 3), kX), nullptr);  // Own lock.
  EXPECT_EQ(table_.FindConflict(kA, R(15, kMax), kX), nullptr);
}

TEST_F(LockTableTest, FindConflictReturnsTheLowestStartingConflict) {
  table_.Lock(kB, R(50, 59), kX, false);
  table_.Lock(kB, R(20, 29), kS, false);
  table_.Lock(kA, R(0, 100), kS, false);
  const LockEntry* conflict = table_.FindConflict(OwnerId(2), R(25, 55), kX);
  ASSERT_NE(conflict, nullptr);
  EXPECT_EQ(conflict->range, R(0, 100));
  conflict = table_.FindConflict(OwnerId(2), R(25, 55), kS);
  ASSERT_NE(conflict, nullptr);
  EXPECT_EQ(conflict->range, R(50, 59));
}

TEST_F(LockTableTest, AwaitingEntriesDoNotMergeWithHeldOnesAndAreCounted) {
  table_.Lock(kA, R(0, 9), kX, true);
  table_.Lock(kA, R(10, 19), kX, false);
  EXPECT_EQ(Render(table_), "A X [0,9]*, A X [10,19]");
  EXPECT_EQ(table_.awaiting_count(), 1u);
  const TableDelta delta = table_.Lock(kA, R(5, 9), kX, false);
  EXPECT_EQ(delta.awaiting, 0);  // The awaiting piece [0,4] stays.
  EXPECT_EQ(Render(table_), "A X [0,4]*, A X [5,19]");
}

TEST_F(LockTableTest, RemoveIfReturnsWhatItRemoved) {
  table_.Lock(kA, R(0, 9), kX, false);
  table_.Lock(kB, R(10, 19), kX, true);
  table_.Lock(kA, R(20, 29), kS, false);
  const std::vector<LockEntry> removed =
      table_.RemoveIf([](const LockEntry& e) { return e.owner == kA; });
  ASSERT_EQ(removed.size(), 2u);
  EXPECT_EQ(removed[0].range, R(0, 9));
  EXPECT_EQ(Render(table_), "B X [10,19]*");
  table_.RemoveIf([](const LockEntry&) { return true; });
  EXPECT_TRUE(table_.empty());
  EXPECT_EQ(table_.awaiting_count(), 0u);
}

// The treap against a plain list: random locks and unlocks by a few owners (each owner's
// entries may overlap others' — the table does not check conflicts), then every query compared.
TEST(LockTableRandomized, AgreesWithALinearScanOnEveryQuery) {
  LockTable table(7);
  std::vector<LockEntry> model;
  std::mt19937_64 rng(12345);
  auto random_range = [&] {
    const uint64_t first = rng() % 10000;
    const uint64_t len = 1 + rng() % 200;
    return rng() % 20 == 0 ? R(first, kMax) : R(first, first + len - 1);
  };
  for (int step = 0; step < 4000; ++step) {
    const OwnerId owner(static_cast<uint32_t>(rng() % 8));
    const ByteRange range = random_range();
    const LockType type = rng() % 2 ? kX : kS;
    if (rng() % 3 == 0) {
      table.Unlock(owner, range);
    } else {
      table.Lock(owner, range, type, false);
    }
    if (step % 40 != 0) continue;
    model.clear();
    table.ForEach([&](const LockEntry& e) { model.push_back(e); });
    ASSERT_EQ(model.size(), table.size());
    for (size_t i = 1; i < model.size(); ++i) {
      ASSERT_LE(model[i - 1].range.first(), model[i].range.first());
    }
    for (int q = 0; q < 50; ++q) {
      const ByteRange probe = random_range();
      const OwnerId requester(static_cast<uint32_t>(rng() % 9));
      const LockType want = rng() % 2 ? kX : kS;
      const LockEntry* expected = nullptr;
      for (const LockEntry& e : model) {
        if (e.range.Overlaps(probe) && e.owner != requester && TypesConflict(e.type, want)) {
          expected = &e;
          break;
        }
      }
      const LockEntry* found = table.FindConflict(requester, probe, want);
      ASSERT_EQ(found == nullptr, expected == nullptr);
      if (found != nullptr) {
        ASSERT_EQ(*found, *expected);
      }
    }
  }
}

}  // namespace
}  // namespace nlockd::lock
