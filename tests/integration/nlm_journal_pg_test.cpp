// SPDX-License-Identifier: Apache-2.0
// NLM over the lock journal on a real PostgreSQL (run under scripts/with-postgres.sh; ctest label
// "db"): when the database is gone for longer than the store's retry limit, or refuses nlockd's
// role, a release is not answered as done unless it is written. What the answer said, what
// memory holds and what a restart would load must agree.
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "nlm/testing/service_test_fixture.hpp"
#include "server/lock_journal_store.hpp"
#include "store/open_store.hpp"
#include "store/testing/store_test_util.hpp"

namespace nlockd::nlm {
namespace {

using test_support::NlmServiceTest;
using test_support::RunCoroutine;

// A superuser URI of the with-postgres.sh server: its unix socket (in the directory above the
// data directory, trusted for local connections) and the port of the test URI.
std::optional<std::string> SuperuserUri() {
  const char* datadir = std::getenv("NLOCKD_TEST_PG_DATADIR");
  const std::optional<std::string> uri = store::testutil::PgTestUri();
  if (datadir == nullptr || !uri) return std::nullopt;
  // postgresql://user:password@127.0.0.1:PORT/database
  const size_t at = uri->rfind('@');
  const size_t colon = uri->find(':', at == std::string::npos ? 0 : at);
  const size_t slash = uri->find('/', colon == std::string::npos ? 0 : colon);
  if (at == std::string::npos || colon == std::string::npos || slash == std::string::npos) {
    return std::nullopt;
  }
  const std::string port = uri->substr(colon + 1, slash - colon - 1);
  const std::string socket_dir = std::filesystem::path(datadir).parent_path().string();
  return "postgresql:///postgres?host=" + socket_dir + "&port=" + port + "&user=postgres";
}

class NlmJournalPgTest : public NlmServiceTest {
 protected:
  void SetUp() override {
    const char* pg_ctl = std::getenv("NLOCKD_TEST_PG_CTL");
    if (!store::testutil::PgTestUri() || pg_ctl == nullptr || !SuperuserUri()) {
      GTEST_SKIP() << "needs scripts/with-postgres.sh (NLOCKD_TEST_PG_URI, _CTL, _DATADIR)";
    }
    pg_ctl_ = pg_ctl;
    store::StoreOptions options;
    options.node_id = store::testutil::UniqueNodeId("nlm-journal");
    // Far below the production 30 s, so that the test sees writes give up.
    options.pg_retry_for = std::chrono::milliseconds(300);
    options.pg_backoff_initial = std::chrono::milliseconds(20);
    options.pg_backoff_max = std::chrono::milliseconds(100);
    store_ = store::OpenStore(*store::testutil::PgTestUri(), options);
    journal_ = std::make_unique<server::StoreLockJournal>(locks_, *store_);
    service_->set_journal(journal_.get());
  }

  void TearDown() override {
    if (pg_ctl_.empty()) return;
    if (!running_) PgCtl("start");
    if (refused_) store::testutil::PgExec(*SuperuserUri(), "ALTER ROLE nlockd LOGIN");
  }

  void PgCtl(const std::string& action) {
    ASSERT_EQ(std::system((pg_ctl_ + " -m fast " + action + " >/dev/null 2>&1").c_str()), 0)
        << action;
    running_ = action != "stop";
  }

  void RefuseRole() {
    const std::string super = *SuperuserUri();
    store::testutil::PgExec(super, "ALTER ROLE nlockd NOLOGIN");
    refused_ = true;
    store::testutil::PgExec(
        super, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = 'nlockd'");
  }

  // Runs the service's executor until `failures` journal writes have failed (the call's write
  // and the write of its undo).
  bool RunUntilFailures(uint64_t failures) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (service_->stats().journal_failures < failures &&
           std::chrono::steady_clock::now() < deadline) {
      RunFor(std::chrono::milliseconds(20));
    }
    return service_->stats().journal_failures >= failures;
  }

  // The rows a restart would load for host 192.0.2.1.
  size_t PersistedLocks() {
    size_t rows = 0;
    for (const auto& row : store_->LoadAll().locks) rows += row.host == "192.0.2.1" ? 1u : 0u;
    return rows;
  }

  // UNLOCK while the store cannot write: refused, and nothing changes anywhere.
  void ExpectUnlockRefusedAndKept(const nlm4_lockargs& held) {
    EXPECT_EQ(Unlock(From("192.0.2.1"), held).stat, NLM4_DENIED_GRACE_PERIOD);
    EXPECT_EQ(test_support::OwnerLocks(locks_, "192.0.2.1"), "X [0,9]");
    ASSERT_TRUE(RunUntilFailures(2)) << "the unlock's write and its undo's";
  }

  std::string pg_ctl_;
  bool running_ = true;
  bool refused_ = false;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<server::StoreLockJournal> journal_;
};

TEST_F(NlmJournalPgTest, AnUnlockNotWrittenWhileTheServerIsDownIsRefusedAndTheLockKept) {
  auto held = LockArgs("client-a", 1, 0, 10);
  ASSERT_EQ(Lock(From("192.0.2.1"), held).stat, NLM4_GRANTED);
  ASSERT_EQ(PersistedLocks(), 1u);
  PgCtl("stop");
  ExpectUnlockRefusedAndKept(held);
  PgCtl("start");
  EXPECT_EQ(PersistedLocks(), 1u) << "a restart restores what the answer said is held";
  EXPECT_EQ(Unlock(From("192.0.2.1"), held).stat, NLM4_GRANTED);
  EXPECT_EQ(PersistedLocks(), 0u);
  EXPECT_EQ(locks_.Counts().locks, 0u);
}

TEST_F(NlmJournalPgTest, AnUnlockNotWrittenWhileTheRoleIsRefusedIsRefusedAndTheLockKept) {
  auto held = LockArgs("client-a", 1, 0, 10);
  ASSERT_EQ(Lock(From("192.0.2.1"), held).stat, NLM4_GRANTED);
  RefuseRole();
  ExpectUnlockRefusedAndKept(held);
  store::testutil::PgExec(*SuperuserUri(), "ALTER ROLE nlockd LOGIN");
  refused_ = false;
  EXPECT_EQ(PersistedLocks(), 1u);
  EXPECT_EQ(Unlock(From("192.0.2.1"), held).stat, NLM4_GRANTED);
  EXPECT_EQ(PersistedLocks(), 0u);
}

}  // namespace
}  // namespace nlockd::nlm
