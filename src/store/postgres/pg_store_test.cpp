// SPDX-License-Identifier: Apache-2.0
// Needs a PostgreSQL server: run under scripts/with-postgres.sh (ctest label "db").
#include "store/postgres/pg_store.hpp"

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <future>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/error.hpp"
#include "store/open_store.hpp"
#include "store/postgres/pg_conn.hpp"
#include "store/postgres/pg_lease.hpp"
#include "store/testing/conformance.hpp"
#include "store/testing/crash_test_util.hpp"

namespace nlockd::store {

namespace testutil {
INSTANTIATE_TEST_SUITE_P(Postgres, StoreConformance,
                         ::testing::Values(BackendParam{"Postgres", MakePgBackend, true}),
                         BackendName);
INSTANTIATE_TEST_SUITE_P(Postgres, PersistentStore,
                         ::testing::Values(BackendParam{"Postgres", MakePgBackend, true}),
                         BackendName);
}  // namespace testutil

namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using testutil::MakeRegistration;
using testutil::PgTestUri;
using testutil::Sync;

class PgStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!PgTestUri()) {
      GTEST_SKIP() << "NLOCKD_TEST_PG_URI is not set; run under scripts/with-postgres.sh";
    }
    options_.node_id = testutil::UniqueNodeId("pg");
  }

  StoreOptions options_;
};

Error OpenError(const std::string& uri, const StoreOptions& options) {
  try {
    PgStore store(uri, options);
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "opening succeeded";
  return Error(ErrorKind::kFailed, "");
}

TEST_F(PgStoreTest, RefusesASchemaNewerThanThisBuild) {
  const std::string uri = testutil::FreshPgSchemaUri("newer");
  { PgStore store(uri, options_); }
  testutil::PgExec(uri, "UPDATE schema_version SET version = 99");
  const Error e = OpenError(uri, options_);
  EXPECT_EQ(e.kind(), ErrorKind::kFailed);
  EXPECT_THAT(e.what(), AllOf(HasSubstr("schema version 99"), HasSubstr("newer nlockd")));
}

TEST_F(PgStoreTest, MigratesAnOlderSchemaKeepingItsRows) {
  const std::string uri = testutil::FreshPgSchemaUri("migrate");
  const std::vector<Migration> v1(SchemaMigrations().begin(), SchemaMigrations().end());
  {
    PgStore store(uri, options_, v1);
    Sync([&](Done d) { store.PutRegistration(MakeRegistration("a", "lockd"), std::move(d)); });
  }
  std::vector<Migration> v2 = v1;
  v2.push_back(Migration{static_cast<int64_t>(v1.size()) + 1, "test step",
                         "CREATE TABLE test_step (id {BYTES} NOT NULL)"});
  {
    PgStore store(uri, options_, v2);
    EXPECT_EQ(store.Counts().registrations, 1U);
  }
  testutil::PgExec(uri, "INSERT INTO test_step (id) VALUES ('\\x00'::bytea)");
  EXPECT_THAT(OpenError(uri, options_).what(), HasSubstr("newer nlockd"));
}

TEST_F(PgStoreTest, WrongPasswordIsAClearErrorWithoutThePassword) {
  std::string uri = *PgTestUri();
  const size_t at = uri.find('@');
  const size_t colon = uri.rfind(':', at);
  ASSERT_NE(at, std::string::npos);
  uri = uri.substr(0, colon + 1) + "not-the-password" + uri.substr(at);
  const Error e = OpenError(uri, options_);
  EXPECT_EQ(e.kind(), ErrorKind::kDisconnected);
  EXPECT_THAT(e.what(), AllOf(HasSubstr("cannot connect to PostgreSQL"),
                              HasSubstr("password authentication failed"),
                              Not(HasSubstr("not-the-password"))));
}

TEST_F(PgStoreTest, GroupCommitPutsConcurrentWritesInFewTransactions) {
  constexpr int kWrites = 256;
  PgStore store(*PgTestUri(), options_);
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
  EXPECT_LT(store.writer_stats().transactions, store.writer_stats().writes);
  EXPECT_EQ(store.Counts().registrations, static_cast<size_t>(kWrites));
}

TEST_F(PgStoreTest, ASecondStoreOfTheNodeInThisProcessIsRefusedNamingThePid) {
  PgStore first(*PgTestUri(), options_);
  const Error e = OpenError(*PgTestUri(), options_);
  EXPECT_EQ(e.kind(), ErrorKind::kFailed);
  EXPECT_THAT(e.what(), AllOf(HasSubstr("'" + options_.node_id + "' is in use by another nlockd"),
                              HasSubstr(fmt::format("'nlockd pid {} on ", getpid()))));
  StoreOptions other = options_;
  other.node_id = testutil::UniqueNodeId("pg-other");
  PgStore other_node(*PgTestUri(), other);  // another node of the same database is free
}

TEST_F(PgStoreTest, ANodeIsFreeAgainOnceItsStoreIsClosed) {
  { PgStore first(*PgTestUri(), options_); }
  PgStore second(*PgTestUri(), options_);
}

TEST_F(PgStoreTest, ANodeHeldByAnotherProcessIsRefusedUntilThatProcessDies) {
  testutil::StoreChild child;
  testutil::StartStoreChild(*PgTestUri(), options_.node_id, child);
  ASSERT_TRUE(child.AwaitFirstAck());
  const Error e = OpenError(*PgTestUri(), options_);
  EXPECT_THAT(e.what(), HasSubstr(fmt::format("'nlockd pid {} on ", child.pid)));
  child.KillNine();
  // The server ends the dead client's session (and its lock) once it reads the closed socket;
  // the new holder retries meanwhile.
  auto store = std::make_unique<PgStore>(*PgTestUri(), options_);
  EXPECT_FALSE(store->startup().previous_run_clean);
}

TEST_F(PgStoreTest, AnotherProcessCannotOpenANodeThisOneHolds) {
  PgStore held(*PgTestUri(), options_);
  testutil::StoreChild child;
  testutil::StartStoreChild(*PgTestUri(), options_.node_id, child);
  std::string errors;
  const int status = child.AwaitExit(&errors);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1) << status;
  EXPECT_THAT(errors, HasSubstr(fmt::format("'nlockd pid {} on ", getpid())));
}

TEST_F(PgStoreTest, AcknowledgedRegistrationsSurviveKillNine) {
  testutil::RunCrashTest(*PgTestUri(), 500);
}

// Keeps `in_flight` registrations outstanding against a store, recording which were
// acknowledged and how the others failed, until Stop(). Completions run on the store's writer
// thread and issue the next write from there.
class WriteLoad {
 public:
  WriteLoad(Store& store, int in_flight) : store_(store) {
    std::vector<int> ids;
    {
      std::lock_guard lock(mu_);
      in_flight_ = in_flight;
      for (int i = 0; i < in_flight; ++i) ids.push_back(next_++);
    }
    for (int id : ids) Issue(id);
  }
  ~WriteLoad() { Stop(); }

  // Blocks until `count` more writes than now have been acknowledged.
  void WaitForMoreAcks(size_t count) {
    std::unique_lock lock(mu_);
    const size_t target = acked_.size() + count;
    changed_.wait(lock, [&] { return acked_.size() >= target; });
  }
  // Stops issuing and waits for the writes in flight to finish.
  void Stop() {
    std::unique_lock lock(mu_);
    stopping_ = true;
    changed_.wait(lock, [&] { return in_flight_ == 0; });
  }
  std::set<int> acked() {
    std::lock_guard lock(mu_);
    return acked_;
  }
  std::vector<ErrorKind> error_kinds() {
    std::lock_guard lock(mu_);
    return error_kinds_;
  }

 private:
  void Issue(int id) {
    store_.PutRegistration(MakeRegistration("load-" + std::to_string(id), "lockd"),
                           [this, id](std::exception_ptr error) { Completed(id, error); });
  }
  void Completed(int id, const std::exception_ptr& error) {
    std::unique_lock lock(mu_);
    if (!error) {
      acked_.insert(id);
    } else {
      try {
        std::rethrow_exception(error);
      } catch (const Error& e) {
        error_kinds_.push_back(e.kind());
      }
    }
    if (stopping_) {
      --in_flight_;  // after this, Stop() may return and this object go: touch nothing more
      changed_.notify_all();
      return;
    }
    changed_.notify_all();
    const int next = next_++;
    lock.unlock();
    Issue(next);  // still counted in flight, so the object is alive
  }

  Store& store_;
  std::mutex mu_;  // guards everything below
  std::condition_variable changed_;
  int next_ = 0;
  int in_flight_ = 0;
  bool stopping_ = false;
  std::set<int> acked_;
  std::vector<ErrorKind> error_kinds_;
};

TEST_F(PgStoreTest, ServerRestartUnderLoadLosesNothingAcknowledged) {
  const char* pg_ctl = std::getenv("NLOCKD_TEST_PG_CTL");
  if (pg_ctl == nullptr) {
    GTEST_SKIP() << "NLOCKD_TEST_PG_CTL is not set; run under scripts/with-postgres.sh";
  }
  options_.pg_backoff_initial = std::chrono::milliseconds(20);
  options_.pg_backoff_max = std::chrono::milliseconds(200);
  PgStore store(*PgTestUri(), options_);
  std::set<int> acked;
  {
    WriteLoad load(store, 32);
    load.WaitForMoreAcks(200);
    const std::string restart = std::string(pg_ctl) + " -m fast restart >/dev/null";
    ASSERT_EQ(std::system(restart.c_str()), 0);
    load.WaitForMoreAcks(200);  // writes resume on a new connection
    load.Stop();
    acked = load.acked();
    for (ErrorKind kind : load.error_kinds()) {
      EXPECT_EQ(kind, ErrorKind::kDisconnected);  // a failure is clean, never a wrong answer
    }
    ::testing::Test::RecordProperty("failed_writes", static_cast<int>(load.error_kinds().size()));
  }
  std::set<std::string> stored;
  for (const Registration& r : store.LoadAll().registrations) stored.insert(r.mon_name);
  size_t missing = 0;
  for (int id : acked) missing += stored.count("load-" + std::to_string(id)) == 0 ? 1U : 0U;
  EXPECT_EQ(missing, 0U) << "of " << acked.size() << " acknowledged";
}

// NLOCKD_TEST_PG_CTL, or "" (the test then skips).
std::string PgCtl() {
  const char* pg_ctl = std::getenv("NLOCKD_TEST_PG_CTL");
  return pg_ctl != nullptr ? pg_ctl : "";
}

void RestartServer() {
  ASSERT_EQ(std::system((PgCtl() + " -m fast restart >/dev/null").c_str()), 0);
}

void PutOneLock(Store& store, uint64_t offset) {
  Sync([&](Done d) {
    store.ApplyLockChanges({PutLock{testutil::MakeLock("f", "h", 1, offset, 1)}}, std::move(d));
  });
}

TEST_F(PgStoreTest, AServerRestartBetweenUncleanRunsMakesTheLockTableIncomplete) {
  if (PgCtl().empty()) GTEST_SKIP() << "NLOCKD_TEST_PG_CTL is not set";
  options_.boot_id = "boot-1";
  {
    PgStore store(*PgTestUri(), options_);
    PutOneLock(store, 0);
  }  // unclean
  RestartServer();
  PgStore again(*PgTestUri(), options_);
  EXPECT_FALSE(again.startup().previous_run_clean);
  EXPECT_FALSE(again.startup().lock_table_complete);  // same boot, but not the same server
}

TEST_F(PgStoreTest, AServerRestartUnderARunningStoreMakesTheLockTableIncomplete) {
  if (PgCtl().empty()) GTEST_SKIP() << "NLOCKD_TEST_PG_CTL is not set";
  options_.boot_id = "boot-1";
  options_.pg_backoff_initial = std::chrono::milliseconds(20);
  {
    PgStore store(*PgTestUri(), options_);
    PutOneLock(store, 0);
    RestartServer();
    PutOneLock(store, 1);  // on a new connection, to a new server incarnation
    store.MarkCleanShutdown();
  }
  PgStore again(*PgTestUri(), options_);
  EXPECT_TRUE(again.startup().previous_run_clean);
  EXPECT_FALSE(again.startup().lock_table_complete);  // a clean end cannot vouch for lost writes
  Sync([&](Done d) { again.MarkLockTableComplete(std::move(d)); });
}

TEST_F(PgStoreTest, WritesFailCleanlyWhenTheServerStaysAway) {
  const char* pg_ctl = std::getenv("NLOCKD_TEST_PG_CTL");
  if (pg_ctl == nullptr) {
    GTEST_SKIP() << "NLOCKD_TEST_PG_CTL is not set; run under scripts/with-postgres.sh";
  }
  options_.pg_retry_for = std::chrono::milliseconds(300);
  options_.pg_backoff_initial = std::chrono::milliseconds(20);
  PgStore store(*PgTestUri(), options_);
  Sync([&](Done d) { store.PutRegistration(MakeRegistration("before", "lockd"), std::move(d)); });
  ASSERT_EQ(std::system((std::string(pg_ctl) + " -m fast stop >/dev/null").c_str()), 0);
  try {
    Sync([&](Done d) { store.PutRegistration(MakeRegistration("during", "lockd"), std::move(d)); });
    ADD_FAILURE() << "a write was acknowledged while the server was down";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kDisconnected);
    EXPECT_THAT(e.what(), HasSubstr("PostgreSQL"));
  }
  ASSERT_EQ(std::system((std::string(pg_ctl) + " start >/dev/null").c_str()), 0);
  Sync([&](Done d) { store.PutRegistration(MakeRegistration("after", "lockd"), std::move(d)); });
  EXPECT_EQ(store.Counts().registrations, 2U);
}

// A connection whose setup failed midway is not used again: the next write and read set up a
// new one rather than failing for ever on statements half prepared. Here PREPARE waits past
// lock_timeout behind a table another session locked, as it may behind another node's migration.
TEST_F(PgStoreTest, AConnectionWhoseSetupFailedIsNotUsedAgain) {
  // A schema of its own, so that locking its table stalls no other test; lock waits end early.
  const std::string uri = testutil::FreshPgSchemaUri("setup") + "%20-clock_timeout%3D200";
  PgStore store(uri, options_);
  PgConn blocker(uri, std::chrono::seconds(5));
  // The statements on `locks` come after those on `registrations`: these are prepared by then.
  blocker.Exec("BEGIN; LOCK TABLE locks IN ACCESS EXCLUSIVE MODE");
  EXPECT_THROW(Sync([&](Done d) { store.ReleaseHost("h", std::move(d)); }), Error);
  EXPECT_THROW(store.LoadAll(), Error);
  blocker.Exec("COMMIT");

  Sync([&](Done d) { store.ReleaseHost("h", std::move(d)); });
  Sync([&](Done d) { store.PutRegistration(MakeRegistration("after", "lockd"), std::move(d)); });
  EXPECT_EQ(store.LoadAll().registrations.size(), 1U);
}

std::optional<int64_t> EpochOf(const std::optional<LeaseGrant>& grant) {
  if (!grant) return std::nullopt;
  return grant->epoch;
}

// Takes the service's lease as soon as it is free (polling as a standby does); its epoch.
int64_t AcquireWhenFree(PgLease& lease, std::chrono::milliseconds length) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (;;) {
    if (std::optional<LeaseGrant> grant = lease.TryAcquire(length)) return grant->epoch;
    if (std::chrono::steady_clock::now() >= give_up) {
      ADD_FAILURE() << "the lease never became free";
      return 0;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

TEST_F(PgStoreTest, ALeaseHasOneLiveHolderAndEachTakeoverTheNextEpoch) {
  PgLease a(*PgTestUri(), std::chrono::seconds(5), options_.node_id, "node a", {});
  PgLease b(*PgTestUri(), std::chrono::seconds(5), options_.node_id, "node b", {});
  EXPECT_FALSE(a.Read().has_value());
  const std::optional<int64_t> first = EpochOf(a.TryAcquire(std::chrono::seconds(30)));
  ASSERT_TRUE(first.has_value());
  EXPECT_FALSE(b.TryAcquire(std::chrono::seconds(30)).has_value());
  const std::optional<LeaseView> held = b.Read();
  ASSERT_TRUE(held.has_value());
  EXPECT_EQ(held->holder, "node a");
  EXPECT_EQ(held->epoch, *first);
  EXPECT_TRUE(held->live);
  EXPECT_TRUE(a.Renew(*first, std::chrono::seconds(30)));

  a.Release(*first);  // a planned stop: no waiting for expiry
  const std::optional<int64_t> second = EpochOf(b.TryAcquire(std::chrono::seconds(30)));
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(*second, *first + 1);
  EXPECT_FALSE(a.Renew(*first, std::chrono::seconds(30)));  // a's lease is gone for good
  EXPECT_EQ(b.Read()->holder, "node b");
}

TEST_F(PgStoreTest, AnExpiredLeaseIsTakenOverAndItsOldHolderCanNoLongerCommit) {
  PgLease a(*PgTestUri(), std::chrono::seconds(5), options_.node_id, "node a", {});
  PgLease b(*PgTestUri(), std::chrono::seconds(5), options_.node_id, "node b", {});
  // Long enough for the fenced store to open (and set its sessions' limits) within it.
  const std::optional<int64_t> epoch_a = EpochOf(a.TryAcquire(std::chrono::milliseconds(1000)));
  ASSERT_TRUE(epoch_a.has_value());
  StoreOptions fenced_a = options_;
  fenced_a.fence_epoch = *epoch_a;
  std::atomic<int> told_lost{0};
  fenced_a.on_lease_lost = [&](const std::string& what) {
    EXPECT_NE(what.find("lease"), std::string::npos) << what;
    ++told_lost;
  };
  PgStore store_a(*PgTestUri(), fenced_a);
  Sync([&](Done d) { store_a.PutRegistration(MakeRegistration("h1", "lockd"), std::move(d)); });

  // a stops renewing (a partition, a stall): once the database's clock passes the expiry, b
  // takes the service with the next epoch.
  const int64_t epoch_b = AcquireWhenFree(b, std::chrono::seconds(30));
  EXPECT_EQ(epoch_b, *epoch_a + 1);

  // Whatever a still tries to write is refused inside the transaction, as a distinct error.
  EXPECT_THROW(
      Sync([&](Done d) { store_a.PutRegistration(MakeRegistration("h2", "lockd"), std::move(d)); }),
      LeaseLost);
  EXPECT_THROW(Sync([&](Done d) { store_a.ReleaseHost("h1", std::move(d)); }), LeaseLost);
  EXPECT_EQ(told_lost.load(), 2) << "each refused write told the owner";
  EXPECT_THROW(store_a.BumpState(), LeaseLost);

  // b, fenced at its own epoch, serves the service's state: what a committed, nothing after.
  StoreOptions fenced_b = options_;
  fenced_b.fence_epoch = epoch_b;
  PgStore store_b(*PgTestUri(), fenced_b);
  const LoadedState loaded = store_b.LoadAll();
  ASSERT_EQ(loaded.registrations.size(), 1U);
  EXPECT_EQ(loaded.registrations[0].mon_name, "h1");
  Sync([&](Done d) { store_b.PutRegistration(MakeRegistration("h3", "lockd"), std::move(d)); });
}

TEST_F(PgStoreTest, AFencedStoreCannotOpenWithoutItsLease) {
  PgLease a(*PgTestUri(), std::chrono::seconds(5), options_.node_id, "node a", {});
  const std::optional<int64_t> epoch = EpochOf(a.TryAcquire(std::chrono::seconds(30)));
  ASSERT_TRUE(epoch.has_value());
  StoreOptions stale = options_;
  stale.fence_epoch = *epoch + 7;  // not the live epoch
  EXPECT_THROW(PgStore(*PgTestUri(), stale), LeaseLost);
}

}  // namespace
}  // namespace nlockd::store
