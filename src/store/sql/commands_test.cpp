// SPDX-License-Identifier: Apache-2.0
#include "store/sql/commands.hpp"

#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "store/sql/key_digest.hpp"

namespace nlockd::store {
namespace {

std::vector<SqlCommand> CommandsOf(const WriteOp& op) {
  std::vector<SqlCommand> out;
  AppendCommands(op, "node-1", std::chrono::system_clock::time_point(std::chrono::seconds(5)), out);
  return out;
}

std::vector<Stmt> StatementsOf(const std::vector<SqlCommand>& commands) {
  std::vector<Stmt> out;
  for (const SqlCommand& c : commands) out.push_back(c.stmt);
  return out;
}

// Every write of every kind binds exactly the parameters its statement declares, in type.
TEST(Commands, EveryCommandMatchesItsStatementsParameters) {
  int32_t state = 0;
  const std::vector<WriteOp> ops{
      PutRegistrationOp{Registration{}},
      RemoveRegistrationOp{"m", MyId{}},
      RemoveRegistrationsOfOp{MyId{}},
      PutNotifyOwedOp{{NotifyOwed{}, NotifyOwed{}}},
      ClearOp{},
      BumpStateOp{&state},
      BumpStateOp{&state, 41},  // MoveStateTo's: set_state
      MarkCleanShutdownOp{},
      LockChangesOp{{PutLock{}, RemoveLock{}, ReplaceLocks{"f", "h", 1, "o", {{}, {}}, {}},
                     PutShare{}, RemoveShare{},
                     ReplaceLocks{"f", "h", 1, "o", {}, OffsetSpan{0, 9}}}},
      ReleaseHostOp{"h"},
      RemoveNotifyOwedOp{"m"},
      MarkLockTableCompleteOp{},
  };
  for (const WriteOp& op : ops) {
    for (const SqlCommand& c : CommandsOf(op)) {
      const StatementDef& def = Statement(c.stmt);
      ASSERT_EQ(c.params.size(), def.params.size()) << def.name;
      for (size_t i = 0; i < c.params.size(); ++i) {
        EXPECT_EQ(c.params[i].type, def.params[i]) << def.name << " parameter " << i + 1;
      }
      EXPECT_EQ(c.params[0].bytes, "node-1") << def.name;
    }
  }
}

TEST(Commands, BumpStateReturnsTheStateAndRecordsIt) {
  int32_t state = 0;
  const auto commands = CommandsOf(BumpStateOp{&state});
  EXPECT_EQ(StatementsOf(commands), (std::vector<Stmt>{Stmt::kBumpState, Stmt::kRecordState}));
  EXPECT_EQ(commands[0].returned_state, &state);
  EXPECT_EQ(commands[1].params[1].integer, 5'000'000);  // microseconds
}

TEST(Commands, MoveStateToSetsTheStateAndRecordsIt) {
  int32_t state = 0;
  const auto commands = CommandsOf(BumpStateOp{&state, 41});
  ASSERT_EQ(StatementsOf(commands), (std::vector<Stmt>{Stmt::kSetState, Stmt::kRecordState}));
  EXPECT_EQ(commands[0].returned_state, &state);
  EXPECT_EQ(commands[0].params[1].integer, 41);
}

TEST(Commands, ReplaceLocksDeletesTheOwnersLocksThenPutsEachRange) {
  const auto commands = CommandsOf(
      LockChangesOp{{ReplaceLocks{"f", "h", 7, "o", {{true, 0, 1}, {false, 5, 0}}, {}}}});
  EXPECT_EQ(StatementsOf(commands),
            (std::vector<Stmt>{Stmt::kRemoveOwnerLocks, Stmt::kPutLock, Stmt::kPutLock}));
  const std::string owner = LockOwnerDigest("f", "h", 7, "o");
  EXPECT_EQ(commands[0].params[1].bytes, owner);
  EXPECT_EQ(commands[1].params[1].bytes, owner);
  EXPECT_EQ(commands[2].params[2].integer, 5);
}

TEST(Commands, ReplaceLocksWithinASpanDeletesOnlyThatSpanSplitAtTheSignBit) {
  ReplaceLocks replace{"f", "h", 7, "o", {{true, 10, 1}}, {}};
  replace.within = OffsetSpan{5, 20};
  auto commands = CommandsOf(LockChangesOp{{replace}});
  ASSERT_EQ(StatementsOf(commands),
            (std::vector<Stmt>{Stmt::kRemoveOwnerLocksWithin, Stmt::kPutLock}));
  EXPECT_EQ(commands[0].params[2].integer, 5);
  EXPECT_EQ(commands[0].params[3].integer, 20);

  const uint64_t top = uint64_t{1} << 63;
  replace.within = OffsetSpan{top - 1, top};
  commands = CommandsOf(LockChangesOp{{replace}});
  ASSERT_EQ(StatementsOf(commands),
            (std::vector<Stmt>{Stmt::kRemoveOwnerLocksWithin, Stmt::kRemoveOwnerLocksWithin,
                               Stmt::kPutLock}));
  EXPECT_EQ(commands[0].params[2].integer, std::numeric_limits<int64_t>::max());
  EXPECT_EQ(commands[0].params[3].integer, std::numeric_limits<int64_t>::max());
  EXPECT_EQ(commands[1].params[2].integer, std::numeric_limits<int64_t>::min());
  EXPECT_EQ(commands[1].params[3].integer, std::numeric_limits<int64_t>::min());
}

TEST(Commands, Uint64RangesAreStoredAsTheirInt64BitPattern) {
  const uint64_t max = std::numeric_limits<uint64_t>::max();
  const auto commands =
      CommandsOf(LockChangesOp{{PutLock{LockRecord{"f", "h", 1, "o", true, max, max - 1}}}});
  EXPECT_EQ(commands[0].params[2].integer, -1);
  EXPECT_EQ(commands[0].params[8].integer, -2);
}

TEST(Commands, ClearAndReleaseHostTouchEveryTableTheyMust) {
  EXPECT_EQ(StatementsOf(CommandsOf(ClearOp{})),
            (std::vector<Stmt>{Stmt::kClearRegistrations, Stmt::kClearLocks, Stmt::kClearShares}));
  EXPECT_EQ(StatementsOf(CommandsOf(ReleaseHostOp{"h"})),
            (std::vector<Stmt>{Stmt::kReleaseHostLocks, Stmt::kReleaseHostShares}));
}

TEST(Commands, TimesAreMicrosecondsSinceTheEpoch) {
  const auto t = std::chrono::system_clock::time_point(std::chrono::microseconds(-3));
  EXPECT_EQ(ToMicros(t), -3);
  EXPECT_EQ(FromMicros(ToMicros(t)), t);
}

TEST(Statements, SqlitePlaceholdersAreNumberedLikePostgres) {
  EXPECT_EQ(ToSqlitePlaceholders("a = $1 AND b = $12"), "a = ?1 AND b = ?12");
}

}  // namespace
}  // namespace nlockd::store
