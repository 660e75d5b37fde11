// SPDX-License-Identifier: Apache-2.0
#include "store/run_record.hpp"

#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/error.hpp"
#include "testutil/temp_dir.hpp"

namespace nlockd::store {
namespace {

RunRecord Previous(bool clean, const std::string& boot, bool locks_complete = true,
                   const std::string& epoch = "") {
  RunRecord record;
  record.state = 7;
  record.boot_id = boot;
  record.storage_epoch = epoch;
  record.clean_shutdown = clean;
  record.locks_complete = locks_complete;
  return record;
}

TEST(BeginRun, ANewStoreIsAFirstRunWithACompleteEmptyLockTable) {
  const RunStart start = BeginRun(std::nullopt, "b1", "");
  EXPECT_TRUE(start.info.persistent);
  EXPECT_TRUE(start.info.first_run);
  EXPECT_TRUE(start.info.lock_table_complete);
  EXPECT_EQ(start.info.state, 0);
  EXPECT_EQ(start.record.boot_id, "b1");
  EXPECT_FALSE(start.record.clean_shutdown);
}

TEST(BeginRun, TrustsTheLockTableAfterACleanShutdownOrAProcessCrash) {
  EXPECT_TRUE(BeginRun(Previous(true, "b0"), "b1", "").info.lock_table_complete);
  EXPECT_TRUE(BeginRun(Previous(false, "b1"), "b1", "").info.lock_table_complete);
  const RunStart start = BeginRun(Previous(false, "b1"), "b1", "");
  EXPECT_EQ(start.info.state, 7);
  EXPECT_EQ(start.record.state, 7);
  EXPECT_EQ(start.info.previous_boot_id, "b1");
}

TEST(BeginRun, DistrustsTheLockTableAfterAnUncleanRunOnAnotherBoot) {
  const RunStart start = BeginRun(Previous(false, "b0"), "b1", "");
  EXPECT_FALSE(start.info.lock_table_complete);
  EXPECT_FALSE(start.record.locks_complete);
}

TEST(BeginRun, ARunThatDoesNotKeepTheLockTableRecordsItIncomplete) {
  // This start may still trust what the previous run left; the next one must not.
  const RunStart start = BeginRun(Previous(true, "b1"), "b1", "", /*keeps_lock_table=*/false);
  EXPECT_TRUE(start.info.lock_table_complete);
  EXPECT_FALSE(start.record.locks_complete);
  EXPECT_FALSE(BeginRun(std::nullopt, "b1", "", false).record.locks_complete);
}

TEST(BeginRun, DistrustIsStickyUntilMarkedComplete) {
  EXPECT_FALSE(BeginRun(Previous(false, "b1", false), "b1", "").info.lock_table_complete);
  EXPECT_FALSE(BeginRun(Previous(true, "b1", false), "b2", "").info.lock_table_complete);
}

TEST(BeginRun, DistrustsTheLockTableAfterAnUncleanRunOnAnotherStorageEpoch) {
  // The PostgreSQL server restarted: commits made without a WAL flush may be gone.
  EXPECT_FALSE(
      BeginRun(Previous(false, "b1", true, "pg-1"), "b1", "pg-2").info.lock_table_complete);
  EXPECT_TRUE(BeginRun(Previous(false, "b1", true, "pg-1"), "b1", "pg-1").info.lock_table_complete);
  EXPECT_TRUE(BeginRun(Previous(true, "b1", true, "pg-1"), "b1", "pg-2").info.lock_table_complete);
  EXPECT_EQ(BeginRun(std::nullopt, "b1", "pg-2").record.storage_epoch, "pg-2");
}

TEST(BeginRun, OnADatabaseServerTheHostThatRanNlockdDoesNotMatter) {
  // kill -9 of an HA node, taken over by another host (or this one rebooted): the database
  // server committed every answered write, whoever asks next.
  EXPECT_TRUE(BeginRun(Previous(false, "b1", true, "pg-1"), "b2", "pg-1").info.lock_table_complete);
  EXPECT_TRUE(BeginRun(Previous(false, "b1", true, "pg-1"), "", "pg-1").info.lock_table_complete);
  EXPECT_FALSE(
      BeginRun(Previous(false, "b1", true, "pg-1"), "b2", "pg-2").info.lock_table_complete);
}

TEST(BeginRun, AnUnknownBootIdIsNeverTheSameBoot) {
  EXPECT_FALSE(BeginRun(Previous(false, ""), "", "").info.lock_table_complete);
}

TEST(BootId, IsTheFirstLineOfTheFile) {
  nlockd::testutil::TempDir dir("run-record");
  const std::string path = dir.path() + "/boot_id";
  std::ofstream(path) << "6e0c1f0a-1234\n";
  EXPECT_EQ(ReadBootId(path), "6e0c1f0a-1234");
  EXPECT_EQ(ReadBootId(dir.path() + "/missing"), "");
}

TEST(BootId, TheKernelsIsReadUnlessInjected) {
  StoreOptions options;
  EXPECT_EQ(CurrentBootId(options), ReadBootId(kBootIdPath));
  options.boot_id = "injected";
  EXPECT_EQ(CurrentBootId(options), "injected");
}

TEST(StoreOptions, NodeIdsAreShortAndPlain) {
  StoreOptions options;
  options.node_id = "node-1.example:a@b_c";
  EXPECT_NO_THROW(ValidateOptions(options));
  for (const std::string& bad :
       std::vector<std::string>{"", "a b", "a'b", std::string(129, 'a'), std::string("a\0b", 3)}) {
    options.node_id = bad;
    EXPECT_THROW(ValidateOptions(options), Error) << bad;
  }
}

TEST(StoreOptions, WallNowIsTruncatedToMicroseconds) {
  StoreOptions options;
  options.wall_clock = [] {
    return std::chrono::system_clock::time_point(std::chrono::nanoseconds(1'234'567'891));
  };
  EXPECT_EQ(WallNow(options).time_since_epoch(), std::chrono::microseconds(1'234'567));
}

}  // namespace
}  // namespace nlockd::store
