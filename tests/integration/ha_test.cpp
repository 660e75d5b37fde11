// HA on a real PostgreSQL (run under scripts/with-postgres.sh; ctest label "db"): two nlockd
// processes of one service, one active and one standby. The active is killed, stopped or loses
// its lease; the standby must take the service over with its lock table, notify the monitored
// hosts with a new state, and the old active must stop answering before the new one serves.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "integration/recovery_support.hpp"
#include "store/postgres/pg_conn.hpp"
#include "store/testing/store_test_util.hpp"
#include "testutil/subprocess.hpp"

namespace nlockd::integration::recovery {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr int kLeaseSeconds = 2;
constexpr size_t kHosts = 10;

std::string UniqueService(const std::string& prefix) {
  static int counter = 0;
  return fmt::format("{}-{}-{}.test", prefix, getpid(), ++counter);
}

// One nlockd of the service; unlike NlockdProcess it may wait as standby before it listens.
class HaNode {
 public:
  HaNode(const std::string& service, uint16_t statd_port)
      : process_({NLOCKD_BINARY, "--store", *store::testutil::PgTestUri(), "--listen",
                  "127.0.0.1:0", "--rpcbind-register=false", "--name", service, "--grace", "60",
                  "--notify-statd-port", std::to_string(statd_port), "--admin-listen",
                  "127.0.0.1:0", "--admin-open-writes=true", "--ha=true", "--ha-lease",
                  std::to_string(kLeaseSeconds)}) {}

  bool WaitStandby() {
    return process_.WaitForLine(std::regex("ha: standby for service"), std::chrono::seconds(20))
        .has_value();
  }
  // Waits until it serves; false after `timeout`.
  bool WaitActive(milliseconds timeout) {
    auto match =
        process_.WaitForLine(std::regex(R"(nlockd listening address=\S+ port=(\d+))"), timeout);
    if (!match) return false;
    port_ = static_cast<uint16_t>(std::stoi((*match)[1]));
    std::smatch admin;
    const std::string& output = process_.output();
    if (std::regex_search(output, admin,
                          std::regex(R"(nlockd admin listening address=\S+ port=(\d+))"))) {
      admin_port_ = static_cast<uint16_t>(std::stoi(admin[1]));
    }
    return true;
  }

  uint16_t port() const { return port_; }
  testutil::Subprocess& process() { return process_; }

  std::vector<std::string> LockTable() {
    NlockdPorts ports{port_, admin_port_};
    return ports.LockTable();
  }

 private:
  // The admin client of recovery_support reads the ports of an NlockdProcess.
  struct NlockdPorts {
    uint16_t port;
    uint16_t admin_port;
    std::vector<std::string> LockTable() {
      httplib::Client client("127.0.0.1", admin_port);
      client.set_read_timeout(std::chrono::seconds(10));
      std::vector<std::string> rows;
      auto result = client.Get("/api/v1/locks?limit=1000");
      if (!result || result->status != 200) {
        ADD_FAILURE() << "no lock table from the admin server";
        return rows;
      }
      const json page = json::parse(result->body);
      for (const json& lock : page["locks"]) {
        rows.push_back(lock["host"].get<std::string>() + " " + lock["file"].get<std::string>() +
                       " " + std::to_string(lock["offset"].get<uint64_t>()) + "+" +
                       std::to_string(lock["length"].get<uint64_t>()));
      }
      std::sort(rows.begin(), rows.end());
      return rows;
    }
  };

  testutil::Subprocess process_;
  uint16_t port_ = 0;
  uint16_t admin_port_ = 0;
};

std::vector<std::string> Addresses(size_t hosts) {
  std::vector<std::string> out;
  for (size_t i = 0; i < hosts; ++i) out.push_back(LoopbackPeers::Address(i));
  return out;
}

class HaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!store::testutil::PgTestUri()) {
      GTEST_SKIP() << "NLOCKD_TEST_PG_URI is not set; run under scripts/with-postgres.sh";
    }
  }

  // Starts A (active, holding the hosts' locks) and B (standby).
  void StartPair() {
    a_ = std::make_unique<HaNode>(service_, peers_.statd_port());
    ASSERT_TRUE(a_->WaitActive(std::chrono::seconds(20))) << a_->process().output();
    for (size_t host = 0; host < kHosts; ++host) {
      ASSERT_EQ(LockAll(host, a_->port(), /*reclaim=*/false), kAllGranted) << "host " << host;
    }
    table_ = a_->LockTable();
    NsmRpcgenClient nsm("127.0.0.1", a_->port(), false);
    auto stat = nsm.Stat(service_);
    ASSERT_TRUE(stat) << nsm.error();
    old_state_ = stat->state;
    ASSERT_EQ(table_.size(), 2 * kHosts);
    b_ = std::make_unique<HaNode>(service_, peers_.statd_port());
    ASSERT_TRUE(b_->WaitStandby()) << b_->process().output();
    EXPECT_FALSE(b_->WaitActive(milliseconds(300))) << "a standby must not serve";
  }

  // B took over: A's locks are in its table, each host was told the new state and reclaims.
  void ExpectTakenOver() {
    EXPECT_EQ(b_->LockTable(), table_);
    auto notified = peers_.WaitNotified(Addresses(kHosts), old_state_, kWait);
    ASSERT_TRUE(notified) << b_->process().output();
    int32_t state = -1;
    for (const auto& [host, notification] : *notified) {
      EXPECT_EQ(notification.mon_name, service_) << host;
      if (state == -1) state = notification.state;
      EXPECT_EQ(notification.state, state) << host;
    }
    EXPECT_EQ(state % 2, 1);
    EXPECT_GT(state, old_state_);
    for (size_t host = 0; host < kHosts; ++host) {
      EXPECT_EQ(LockAll(host, b_->port(), /*reclaim=*/true, state), kAllGranted) << host;
    }
  }

  const std::string service_ = UniqueService("ha");
  LoopbackPeers peers_;
  std::unique_ptr<HaNode> a_;
  std::unique_ptr<HaNode> b_;
  std::vector<std::string> table_;
  int32_t old_state_ = 0;
};

TEST_F(HaTest, AfterKillNineOfTheActiveTheStandbyTakesOverWithinTheLease) {
  StartPair();
  ASSERT_FALSE(HasFatalFailure());
  const auto killed = Clock::now();
  EXPECT_EQ(a_->process().Stop(SIGKILL, std::chrono::seconds(10)), 128 + SIGKILL);
  ASSERT_TRUE(b_->WaitActive(std::chrono::seconds(kLeaseSeconds + 5))) << b_->process().output();
  const auto took = std::chrono::duration_cast<milliseconds>(Clock::now() - killed);
  RecordProperty("takeover_ms", static_cast<int>(took.count()));
  EXPECT_LT(took, milliseconds(kLeaseSeconds * 1000 + 1500));
  ExpectTakenOver();
}

TEST_F(HaTest, SigtermOfTheActiveHandsOverFasterThanTheLease) {
  StartPair();
  ASSERT_FALSE(HasFatalFailure());
  const auto stopped = Clock::now();
  EXPECT_EQ(a_->process().Stop(SIGTERM, std::chrono::seconds(20)), 0);
  ASSERT_TRUE(b_->WaitActive(std::chrono::seconds(kLeaseSeconds + 5))) << b_->process().output();
  const auto took = std::chrono::duration_cast<milliseconds>(Clock::now() - stopped);
  RecordProperty("handover_ms", static_cast<int>(took.count()));
  EXPECT_LT(took, milliseconds(kLeaseSeconds * 1000));
  ExpectTakenOver();
}

TEST_F(HaTest, AnActiveWhoseLeaseWasTakenStopsBeforeTheStandbyServes) {
  StartPair();
  ASSERT_FALSE(HasFatalFailure());
  // Someone else holds the lease now (as after a partition from the database): A must stop.
  store::testutil::PgExec(
      *store::testutil::PgTestUri(),
      fmt::format("UPDATE service_lease SET epoch = epoch + 1, holder = 'test', expires_at = "
                  "clock_timestamp() + interval '1 hour' WHERE service = '{}'",
                  service_));
  const std::optional<int> status = a_->process().Wait(std::chrono::seconds(kLeaseSeconds + 3));
  ASSERT_TRUE(status.has_value()) << "A kept serving without its lease";
  EXPECT_EQ(*status, 75) << a_->process().output();
  EXPECT_NE(a_->process().output().find("lost the lease"), std::string::npos);
  EXPECT_FALSE(b_->WaitActive(milliseconds(300))) << "the lease is still the test's";

  store::testutil::PgExec(*store::testutil::PgTestUri(),
                          fmt::format("UPDATE service_lease SET expires_at = clock_timestamp() "
                                      "WHERE service = '{}'",
                                      service_));
  ASSERT_TRUE(b_->WaitActive(std::chrono::seconds(kLeaseSeconds + 5))) << b_->process().output();
  ExpectTakenOver();
}

// A renewal that hangs in the database (its row locked here, as a partition would leave it
// waiting) does not keep the active serving: it stops when its lease could expire.
TEST_F(HaTest, AnActiveWhoseRenewalHangsStopsBeforeItsLeaseCouldExpire) {
  StartPair();
  ASSERT_FALSE(HasFatalFailure());
  store::PgConn blocker(*store::testutil::PgTestUri(), std::chrono::seconds(5));
  blocker.Exec("BEGIN");
  blocker.Exec(
      fmt::format("SELECT 1 FROM service_lease WHERE service = '{}' FOR UPDATE", service_));
  const std::optional<int> status = a_->process().Wait(std::chrono::seconds(kLeaseSeconds + 3));
  blocker.Exec("ROLLBACK");
  ASSERT_TRUE(status.has_value()) << "A kept serving while its renewal hung";
  EXPECT_EQ(*status, 75) << a_->process().output();
  EXPECT_NE(a_->process().output().find("could not renew the lease before it could expire"),
            std::string::npos)
      << a_->process().output();
  ASSERT_TRUE(b_->WaitActive(std::chrono::seconds(kLeaseSeconds + 5))) << b_->process().output();
  ExpectTakenOver();
}

TEST(Ha, IsRefusedWithASqliteStore) {
  TempDir dir;
  testutil::Subprocess nlockd({NLOCKD_BINARY, "--store", "sqlite:" + dir.path() + "/nlockd.db",
                               "--listen", "127.0.0.1:0", "--rpcbind-register=false",
                               "--admin-listen", "off", "--ha=true"});
  const std::optional<int> status = nlockd.Wait(std::chrono::seconds(20));
  ASSERT_TRUE(status.has_value()) << nlockd.output();
  EXPECT_NE(*status, 0);
  EXPECT_NE(nlockd.output().find("ha needs a PostgreSQL store"), std::string::npos)
      << nlockd.output();
}

TEST_F(HaTest, AStandbyStopsAtOnceOnSigterm) {
  a_ = std::make_unique<HaNode>(service_, peers_.statd_port());
  ASSERT_TRUE(a_->WaitActive(std::chrono::seconds(20))) << a_->process().output();
  b_ = std::make_unique<HaNode>(service_, peers_.statd_port());
  ASSERT_TRUE(b_->WaitStandby()) << b_->process().output();
  EXPECT_EQ(b_->process().Stop(SIGTERM, std::chrono::seconds(5)), 0) << b_->process().output();
  EXPECT_EQ(a_->process().Stop(SIGTERM, std::chrono::seconds(20)), 0);
}

TEST_F(HaTest, WithoutHaASecondProcessOfTheServiceRefusesToStartNamingTheHolder) {
  const std::vector<std::string> args{NLOCKD_BINARY, "--store",     *store::testutil::PgTestUri(),
                                      "--listen",    "127.0.0.1:0", "--rpcbind-register=false",
                                      "--name",      service_,      "--admin-listen",
                                      "off"};
  testutil::Subprocess first(args);
  ASSERT_TRUE(first.WaitForLine(std::regex("nlockd listening"), std::chrono::seconds(20)))
      << first.output();
  testutil::Subprocess second(args);
  const std::optional<int> status = second.Wait(std::chrono::seconds(20));
  ASSERT_TRUE(status.has_value()) << second.output();
  EXPECT_NE(*status, 0);
  EXPECT_NE(second.output().find(fmt::format("service '{}' is in use by another nlockd ('nlockd "
                                             "pid {} on ",
                                             service_, first.pid())),
            std::string::npos)
      << second.output();
  EXPECT_EQ(first.Stop(SIGTERM, std::chrono::seconds(20)), 0);
}

}  // namespace
}  // namespace nlockd::integration::recovery
