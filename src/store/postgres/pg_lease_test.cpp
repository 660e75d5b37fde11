// SPDX-License-Identifier: Apache-2.0
// Needs a PostgreSQL server: run under scripts/with-postgres.sh (ctest label "db").
#include "store/postgres/pg_lease.hpp"

#include <chrono>
#include <future>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "base/error.hpp"
#include "store/postgres/pg_session_limits.hpp"
#include "store/testing/store_test_util.hpp"

namespace nlockd::store {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using testutil::PgTestUri;
using Clock = std::chrono::steady_clock;

class PgLeaseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!PgTestUri()) {
      GTEST_SKIP() << "NLOCKD_TEST_PG_URI is not set; run under scripts/with-postgres.sh";
    }
    service_ = testutil::UniqueNodeId("lease");
  }

  std::unique_ptr<PgLease> Lease(const std::string& holder, const PgSessionLimits& limits) {
    return std::make_unique<PgLease>(*PgTestUri(), seconds(5), service_, holder, limits);
  }

  // A connection of an earlier holder, cut off after its fence and before its COMMIT: its
  // transaction share-locks the lease row for as long as the server keeps it.
  std::unique_ptr<PgConn> StrandedFencedTransaction(int64_t epoch) {
    auto conn = std::make_unique<PgConn>(*PgTestUri(), seconds(5));
    conn->Exec("BEGIN");
    const std::vector<SqlValue> params{SqlValue::Text(service_), SqlValue::Int64(epoch)};
    conn->ForEachRow(PgStep{nullptr, "SELECT nlockd_fence($1, $2)", params, {}},
                     [](const SqlRow&) {});
    return conn;
  }

  std::string service_;
};

int BackendPid(PgConn& conn) {
  int pid = 0;
  conn.ForEachRow(PgStep{nullptr, "SELECT pg_backend_pid()::int4", {}, {}},
                  [&](const SqlRow& row) { pid = static_cast<int>(row.Int(0)); });
  return pid;
}

TEST_F(PgLeaseTest, TheLeaseSessionLimitsHoldOnTheServer) {
  PgConn conn(*PgTestUri(), seconds(5));
  conn.Exec("SET statement_timeout = 60000");  // as a role's default could have it
  const PgSessionLimits limits = LeaseSessionLimits(seconds(5));
  EXPECT_TRUE(ApplySessionLimits(conn, limits).empty());
  std::string settings;
  conn.ForEachRow(
      PgStep{
          nullptr,
          "SELECT current_setting('lock_timeout') || ' ' || current_setting('statement_timeout') "
          "|| ' ' || current_setting('idle_in_transaction_session_timeout')",
          {},
          {}},
      [&](const SqlRow& row) { settings = std::string(row.Bytes(0)); });
  EXPECT_EQ(settings, "500ms 0 2500ms");
}

TEST_F(PgLeaseTest, LimitsThatDoNotHoldAreReported) {
  PgConn conn(*PgTestUri(), seconds(5));
  PgSessionLimits limits;
  limits.idle_in_transaction = milliseconds(1) * (int64_t{1} << 40);  // out of range
  const std::vector<std::string> problems = ApplySessionLimits(conn, limits);
  ASSERT_EQ(problems.size(), 1U);
  EXPECT_NE(problems[0].find("idle_in_transaction_session_timeout"), std::string::npos)
      << problems[0];
}

// The bug this guards against: a takeover that waited for the lease row got a lease dated from
// before its wait, already expired when granted.
TEST_F(PgLeaseTest, ATakeoverThatWaitedForTheRowGetsAWholeLeaseFromItsGrant) {
  auto a = Lease("node a", {});
  const std::optional<LeaseGrant> first = a->TryAcquire(milliseconds(200));
  ASSERT_TRUE(first.has_value());
  EXPECT_GE(first->valid_for, milliseconds(200));
  auto stranded = StrandedFencedTransaction(first->epoch);
  std::this_thread::sleep_for(milliseconds(300));  // a's lease expires

  PgSessionLimits patient;
  patient.lock_timeout = seconds(10);
  auto b = Lease("node b", patient);
  const milliseconds wait(1500);
  const auto sent = Clock::now();
  std::future<std::optional<LeaseGrant>> taking =
      std::async(std::launch::async, [&] { return b->TryAcquire(seconds(3)); });
  EXPECT_EQ(taking.wait_for(wait), std::future_status::timeout) << "took the row while locked";
  stranded->Exec("COMMIT");
  const std::optional<LeaseGrant> grant = taking.get();
  const auto answered = Clock::now();
  ASSERT_TRUE(grant.has_value());
  EXPECT_EQ(grant->epoch, first->epoch + 1);
  // Dated from the grant: a whole lease left after the wait, by the database's clock ...
  const std::optional<LeaseView> view = b->Read();
  ASSERT_TRUE(view.has_value());
  EXPECT_TRUE(view->live);
  EXPECT_GT(view->remaining, seconds(3) - (Clock::now() - answered) - milliseconds(300));
  // ... and by the taker's, counting from when it sent the request.
  EXPECT_GE(grant->valid_for, seconds(3) + wait - milliseconds(100));
  EXPECT_LE(sent + grant->valid_for, answered + seconds(3) + milliseconds(50));
}

TEST_F(PgLeaseTest, AStandbyEndsTheStrandedTransactionOfAnExpiredHolderOnly) {
  auto a = Lease("node a", LeaseSessionLimits(seconds(1)));
  const std::optional<LeaseGrant> first = a->TryAcquire(milliseconds(800));
  ASSERT_TRUE(first.has_value());
  auto stranded = StrandedFencedTransaction(first->epoch);
  const int stranded_pid = BackendPid(*stranded);

  auto b = Lease("node b", LeaseSessionLimits(seconds(1)));
  // While a's lease is live, its fenced write is left alone.
  EXPECT_TRUE(b->EndStaleTransactions().empty());
  EXPECT_NO_THROW(stranded->Exec("SELECT 1"));
  std::this_thread::sleep_for(milliseconds(900));  // a's lease expires; its write never ends

  // The takeover waits the lock timeout (100 ms here), not forever ...
  const auto tried = Clock::now();
  try {
    b->TryAcquire(seconds(1));
    ADD_FAILURE() << "took the lease while its row was locked";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kOverloaded) << e.what();
  }
  EXPECT_LT(Clock::now() - tried, seconds(1));
  // ... ends the stranded transaction, and takes the lease.
  EXPECT_EQ(b->EndStaleTransactions(), std::vector<int>{stranded_pid});
  const std::optional<LeaseGrant> grant = b->TryAcquire(seconds(1));
  ASSERT_TRUE(grant.has_value());
  EXPECT_EQ(grant->epoch, first->epoch + 1);
  // The stranded write never committed: its connection is gone.
  EXPECT_THROW(stranded->Exec("COMMIT"), Error);
}

}  // namespace
}  // namespace nlockd::store
