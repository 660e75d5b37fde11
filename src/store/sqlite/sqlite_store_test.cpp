// SPDX-License-Identifier: Apache-2.0
#include "store/sqlite/sqlite_store.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <limits>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/error.hpp"
#include "store/open_store.hpp"
#include "store/testing/conformance.hpp"
#include "store/testing/crash_test_util.hpp"
#include "testutil/temp_dir.hpp"

namespace nlockd::store {

namespace testutil {
INSTANTIATE_TEST_SUITE_P(Sqlite, StoreConformance,
                         ::testing::Values(BackendParam{"Sqlite", MakeSqliteBackend, false},
                                           BackendParam{"SqliteSplitScan",
                                                        MakeSqliteSplitScanBackend, false}),
                         BackendName);
INSTANTIATE_TEST_SUITE_P(Sqlite, PersistentStore,
                         ::testing::Values(BackendParam{"Sqlite", MakeSqliteBackend, false},
                                           BackendParam{"SqliteSplitScan",
                                                        MakeSqliteSplitScanBackend, false}),
                         BackendName);
}  // namespace testutil

namespace {

using nlockd::testutil::TempDir;
using ::testing::AllOf;
using ::testing::HasSubstr;
using testutil::MakeRegistration;
using testutil::Sync;

// Runs sql on the database file directly, as an operator (or a bug) might.
void RawExec(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  char* error = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error);
  const std::string message = error != nullptr ? error : "";
  sqlite3_free(error);
  sqlite3_close(db);
  ASSERT_EQ(rc, SQLITE_OK) << message;
}

// The nlockd::Error that opening path throws (fails the test if none).
Error OpenError(const std::string& path, StoreOptions options = {}) {
  try {
    SqliteStore store(path, std::move(options));
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "opening " << path << " succeeded";
  return Error(ErrorKind::kFailed, "");
}

class SqliteStoreTest : public ::testing::Test {
 protected:
  TempDir dir_{"sqlite-store"};
  std::string path_ = dir_.path() + "/nlockd.db";
};

TEST_F(SqliteStoreTest, CreatesParentDirectories) {
  const std::string path = dir_.path() + "/a/b/nlockd.db";
  SqliteStore store(path, StoreOptions{});
  EXPECT_TRUE(std::filesystem::exists(path));
}

TEST_F(SqliteStoreTest, UsesWalMode) {
  { SqliteStore store(path_, StoreOptions{}); }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &stmt, nullptr), SQLITE_OK);
  ASSERT_EQ(sqlite3_step(stmt), SQLITE_ROW);
  EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0)), "wal");
  sqlite3_finalize(stmt);
  sqlite3_close(db);
}

TEST_F(SqliteStoreTest, ASplitLockScanAndAScanOnOneConnectionLoadTheSameLocks) {
  // Owners whose digests fall on both sides of the split (it is by the digest's first byte).
  std::vector<LockRecord> written;
  {
    SqliteStore store(path_, StoreOptions{});
    std::vector<LockChange> changes;
    for (int i = 0; i < 200; ++i) {
      written.push_back(testutil::MakeLock("fh" + std::to_string(i % 7), "host" + std::to_string(i),
                                           i, static_cast<uint64_t>(i) * 10, 5));
      changes.push_back(PutLock{written.back()});
    }
    Sync([&](Done done) { store.ApplyLockChanges(std::move(changes), std::move(done)); });
  }
  auto sorted = [](std::vector<LockRecord> locks) {
    std::sort(locks.begin(), locks.end(),
              [](const LockRecord& a, const LockRecord& b) { return a.offset < b.offset; });
    return locks;
  };
  for (const uint64_t min_bytes : {uint64_t{0}, std::numeric_limits<uint64_t>::max()}) {
    StoreOptions options;
    options.sqlite_split_scan_min_bytes = min_bytes;
    SqliteStore store(path_, options);
    EXPECT_EQ(sorted(store.LoadAll().locks), sorted(written)) << "split at " << min_bytes;
    // A second load (the split one on the connection the first opened) reads the same.
    EXPECT_EQ(store.LoadAll().locks.size(), written.size());
  }
}

TEST_F(SqliteStoreTest, RefusesAFileThatIsNotADatabase) {
  std::ofstream(path_) << std::string(8192, 'x');
  const Error e = OpenError(path_);
  EXPECT_EQ(e.kind(), ErrorKind::kFailed);
  EXPECT_THAT(e.what(), AllOf(HasSubstr(path_), HasSubstr("damaged or is not a database")));
  std::ifstream in(path_);  // and leaves it alone
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), std::string(8192, 'x'));
}

// Fills the database at path with 200 registrations, ends the run cleanly or not, and
// overwrites two pages in the middle of the file (b-tree pages; the header stays intact).
void FillAndDamage(const std::string& path, bool clean_shutdown) {
  {
    StoreOptions fast;
    fast.sqlite_synchronous = SqliteSync::kOff;  // only the file's contents matter here
    SqliteStore store(path, fast);
    for (int i = 0; i < 200; ++i) {
      Sync([&](Done d) {
        store.PutRegistration(MakeRegistration("host-" + std::to_string(i), "lockd"), std::move(d));
      });
    }
    if (clean_shutdown) store.MarkCleanShutdown();
  }
  const auto size = std::filesystem::file_size(path);
  ASSERT_GT(size, 6U * 4096U);
  std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
  file.seekp(static_cast<std::streamoff>(size / 2 / 4096 * 4096));
  const std::string garbage(2 * 4096, '\x5a');
  file.write(garbage.data(), static_cast<std::streamsize>(garbage.size()));
}

void ExpectDamageReported(const Error& e, const std::string& path) {
  EXPECT_EQ(e.kind(), ErrorKind::kFailed);
  EXPECT_THAT(e.what(), HasSubstr(path));
  EXPECT_THAT(e.what(), ::testing::AnyOf(HasSubstr("integrity check"), HasSubstr("damaged")));
}

TEST_F(SqliteStoreTest, RefusesADatabaseWithDamagedPagesAfterACrash) {
  FillAndDamage(path_, /*clean_shutdown=*/false);
  ExpectDamageReported(OpenError(path_), path_);
}

TEST_F(SqliteStoreTest, RefusesADatabaseWithDamagedPagesWhenAlwaysChecking) {
  FillAndDamage(path_, /*clean_shutdown=*/true);
  StoreOptions options;
  options.sqlite_check = SqliteCheck::kAlways;
  ExpectDamageReported(OpenError(path_, options), path_);
}

TEST_F(SqliteStoreTest, RefusesAPathItCannotOpen) {
  // A directory, inside the test's own so that the lock file beside it goes with it.
  const std::string path = dir_.path() + "/a-directory";
  std::filesystem::create_directory(path);
  const Error e = OpenError(path);
  EXPECT_EQ(e.kind(), ErrorKind::kFailed);
  EXPECT_THAT(e.what(), HasSubstr(path));
}

TEST_F(SqliteStoreTest, RefusesASchemaNewerThanThisBuild) {
  { SqliteStore store(path_, StoreOptions{}); }
  RawExec(path_, "UPDATE schema_version SET version = 99");
  const Error e = OpenError(path_);
  EXPECT_EQ(e.kind(), ErrorKind::kFailed);
  EXPECT_THAT(e.what(),
              AllOf(HasSubstr(path_), HasSubstr("schema version 99"), HasSubstr("newer nlockd")));
}

TEST_F(SqliteStoreTest, RefusesADatabaseOfAnotherProgram) {
  RawExec(path_, "CREATE TABLE photos (id INTEGER)");
  const Error e = OpenError(path_);
  EXPECT_THAT(e.what(), HasSubstr("not an nlockd store"));
}

TEST_F(SqliteStoreTest, MigratesAnOlderSchemaKeepingItsRows) {
  const std::vector<Migration> v1(SchemaMigrations().begin(), SchemaMigrations().end());
  {
    SqliteStore store(path_, StoreOptions{}, v1);
    Sync([&](Done d) { store.PutRegistration(MakeRegistration("a", "lockd"), std::move(d)); });
  }
  std::vector<Migration> v2 = v1;
  v2.push_back(Migration{static_cast<int64_t>(v1.size()) + 1, "test step",
                         "CREATE TABLE test_step (id {BYTES} NOT NULL)"});
  {
    SqliteStore store(path_, StoreOptions{}, v2);
    EXPECT_EQ(store.Counts().registrations, 1U);
  }
  RawExec(path_, "INSERT INTO test_step (id) VALUES (x'00')");
  // The newer database is now refused by the older build.
  EXPECT_THAT(OpenError(path_).what(), HasSubstr("newer nlockd"));
}

// Before schema version 3 the run record's boot stood for the boot of the state's last bump (a
// restart on the same boot kept the state): a store migrated from version 2 keeps meaning that.
TEST_F(SqliteStoreTest, AStoreFromBeforeStateBootIdsTakesItsRunRecordsBoot) {
  StoreOptions options;
  options.boot_id = "boot-old";
  {
    SqliteStore store(path_, options);
    EXPECT_EQ(store.BumpState(), 1);
  }
  // The file as version 2 left it.
  RawExec(path_, "ALTER TABLE node_state DROP COLUMN state_boot_id");
  RawExec(path_, "UPDATE schema_version SET version = 2");
  options.boot_id = "boot-new";
  SqliteStore store(path_, options);
  EXPECT_EQ(store.startup().previous_boot_id, "boot-old");
  EXPECT_EQ(store.startup().state_boot_id, "boot-old");
  EXPECT_EQ(store.startup().state, 1);
}

TEST_F(SqliteStoreTest, GroupCommitPutsConcurrentWritesInFewTransactions) {
  constexpr int kWrites = 256;
  SqliteStore store(path_, StoreOptions{});
  std::atomic<int> left{kWrites};
  std::promise<void> all;
  for (int i = 0; i < kWrites; ++i) {
    store.PutRegistration(MakeRegistration("h" + std::to_string(i), "lockd"),
                          [&](std::exception_ptr error) {
                            EXPECT_FALSE(error);
                            if (--left == 0) all.set_value();
                          });
  }
  all.get_future().wait();
  const auto stats = store.writer_stats();
  EXPECT_EQ(stats.writes, static_cast<uint64_t>(kWrites));
  EXPECT_LT(stats.transactions, stats.writes);
  EXPECT_EQ(store.Counts().registrations, static_cast<size_t>(kWrites));
}

TEST_F(SqliteStoreTest, WithoutGroupCommitEachWriteIsOneTransaction) {
  StoreOptions options;
  options.group_commit = false;
  options.sqlite_synchronous = SqliteSync::kNormal;  // keep the test fast
  SqliteStore store(path_, options);
  for (int i = 0; i < 20; ++i) {
    store.PutRegistration(MakeRegistration("h" + std::to_string(i), "lockd"),
                          [](std::exception_ptr) {});
  }
  EXPECT_EQ(store.BumpState(), 1);
  EXPECT_EQ(store.writer_stats().transactions, 21U);
}

TEST_F(SqliteStoreTest, LockedPastItsBusyTimeoutTheDatabaseFailsTheQueuedWritesAfterOneWait) {
  constexpr int kWrites = 100;
  StoreOptions options;
  options.max_batch = 8;
  // Long enough that every write is queued before the first transaction gives up.
  options.sqlite_busy_timeout = std::chrono::milliseconds(1000);
  SqliteStore store(path_, options);
  // Another connection holds the write lock, as a hung process or an operator's shell might.
  sqlite3* other = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &other), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(other, "BEGIN EXCLUSIVE", nullptr, nullptr, nullptr), SQLITE_OK);
  std::mutex mu;
  int overloaded = 0;
  int untried = 0;
  std::atomic<int> left{kWrites};
  std::promise<void> all;
  for (int i = 0; i < kWrites; ++i) {
    store.PutRegistration(
        MakeRegistration("h" + std::to_string(i), "lockd"), [&](std::exception_ptr error) {
          try {
            if (error) std::rethrow_exception(error);
          } catch (const Error& e) {
            std::lock_guard lock(mu);
            if (e.kind() == ErrorKind::kOverloaded) ++overloaded;
            if (std::string_view(e.what()).find("not tried") != std::string_view::npos) {
              ++untried;
            }
          }
          if (--left == 0) all.set_value();
        });
  }
  all.get_future().wait();
  // One transaction waited out the busy timeout; the writes queued behind it (all but at most
  // one batch) failed with it rather than waiting in turn, batch after batch.
  EXPECT_EQ(overloaded, kWrites);
  EXPECT_GE(untried, kWrites - 8);
  ASSERT_EQ(sqlite3_exec(other, "ROLLBACK", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(other);
  // The lock gone, writes go through again.
  Sync([&](Done done) {
    store.PutRegistration(MakeRegistration("after", "lockd"), std::move(done));
  });
  EXPECT_EQ(store.Counts().registrations, 1U);
}

TEST_F(SqliteStoreTest, OpenThroughTheFactory) {
  std::unique_ptr<Store> store = OpenStore("sqlite:" + path_, StoreOptions{});
  EXPECT_TRUE(store->startup().persistent);
}

TEST_F(SqliteStoreTest, ASecondStoreOnTheFileInThisProcessIsRefusedNamingThePid) {
  SqliteStore first(path_, StoreOptions{});
  const Error e = OpenError(path_);
  EXPECT_EQ(e.kind(), ErrorKind::kFailed);
  EXPECT_THAT(e.what(), AllOf(HasSubstr(path_), HasSubstr("in use by another nlockd"),
                              HasSubstr(fmt::format("pid {},", getpid()))));
}

TEST_F(SqliteStoreTest, TheFileIsFreeAgainOnceItsStoreIsClosed) {
  { SqliteStore first(path_, StoreOptions{}); }
  SqliteStore second(path_, StoreOptions{});
  EXPECT_FALSE(second.startup().previous_run_clean);  // never marked clean
}

TEST_F(SqliteStoreTest, AStoreHeldByAnotherProcessIsRefusedUntilThatProcessDies) {
  testutil::StoreChild child;
  testutil::StartStoreChild("sqlite:" + path_, "default", child);
  ASSERT_TRUE(child.AwaitFirstAck());
  const Error e = OpenError(path_);
  EXPECT_THAT(e.what(), HasSubstr(fmt::format("pid {},", child.pid)));
  child.KillNine();  // the kernel drops the lock with the process
  SqliteStore store(path_, StoreOptions{});
  EXPECT_FALSE(store.startup().previous_run_clean);
}

TEST_F(SqliteStoreTest, AnotherProcessCannotOpenAStoreThisOneHolds) {
  SqliteStore held(path_, StoreOptions{});
  testutil::StoreChild child;
  testutil::StartStoreChild("sqlite:" + path_, "default", child);
  std::string errors;
  const int status = child.AwaitExit(&errors);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1) << status;
  EXPECT_THAT(errors, HasSubstr(fmt::format("in use by another nlockd (pid {},", getpid())));
}

TEST_F(SqliteStoreTest, AcknowledgedRegistrationsSurviveKillNine) {
  testutil::RunCrashTest("sqlite:" + path_, 500);
}

}  // namespace
}  // namespace nlockd::store
