#include "store/sqlite/wal_checkpointer.hpp"

#include <chrono>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>
#include <sqlite3.h>

#include "store/testing/store_test_util.hpp"

namespace nlockd::store {
namespace {

using testutil::TempDir;

int WalFrames(SqliteDb& db) {
  int frames = 0;
  int copied = 0;
  // A checkpoint of nothing (mode PASSIVE, no frames to copy beyond what is done) reports the
  // WAL's size.
  EXPECT_EQ(sqlite3_wal_checkpoint_v2(db.get(), nullptr, SQLITE_CHECKPOINT_PASSIVE, &frames,
                                      &copied),
            SQLITE_OK);
  return frames;
}

TEST(WalCheckpointer, CheckpointsOnItsOwnThreadOnceTheWalReachesItsThresholdAndTheWalStartsOver) {
  TempDir dir;
  const std::string path = (dir.path() / "db").string();
  SqliteDb writer(path);
  ASSERT_EQ(writer.QueryText("PRAGMA journal_mode = WAL"), "wal");
  writer.Exec("CREATE TABLE t (k INTEGER PRIMARY KEY, v BLOB)");

  {
    WalCheckpointer checkpointer(path, "NORMAL", /*threshold_frames=*/20);
    checkpointer.Attach(writer);
    // One transaction of 40 rows of 3,000 bytes: one commit that takes the WAL past the
    // threshold, which wakes the checkpointer's thread (nothing is checkpointed inline).
    writer.Exec("BEGIN");
    for (int i = 0; i < 40; ++i) {
      writer.Exec("INSERT INTO t (v) VALUES (zeroblob(3000))");
    }
    writer.Exec("COMMIT");
    EXPECT_GE(checkpointer.WaitForCompleteCheckpoints(1, std::chrono::seconds(10)), 1u);
    WalCheckpointer::Detach(writer);
  }  // Its thread has stopped: no checkpoint of its runs beside the one WalFrames makes.

  // The writer's next transaction started the WAL over once everything was copied.
  writer.Exec("INSERT INTO t (v) VALUES (zeroblob(10))");
  EXPECT_LT(WalFrames(writer), 20);
  EXPECT_EQ(writer.QueryText("SELECT count(*) FROM t"), "41");
}

TEST(WalCheckpointer, BelowTheThresholdNothingIsCheckpointed) {
  TempDir dir;
  const std::string path = (dir.path() / "db").string();
  SqliteDb writer(path);
  ASSERT_EQ(writer.QueryText("PRAGMA journal_mode = WAL"), "wal");
  writer.Exec("CREATE TABLE t (k INTEGER PRIMARY KEY)");
  WalCheckpointer checkpointer(path, "NORMAL", /*threshold_frames=*/1000);
  checkpointer.Attach(writer);
  for (int i = 0; i < 10; ++i) writer.Exec("INSERT INTO t DEFAULT VALUES");
  EXPECT_EQ(checkpointer.WaitForCompleteCheckpoints(1, std::chrono::milliseconds(200)), 0u);
  WalCheckpointer::Detach(writer);
}

}  // namespace
}  // namespace nlockd::store
