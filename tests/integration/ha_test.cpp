// SPDX-License-Identifier: Apache-2.0
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
#include "testutil/notify_socket.hpp"
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
  // `notify_socket`: a NOTIFY_SOCKET for it, as systemd gives one ("" for none).
  // `store`: the PostgreSQL URI ("" for the test server's).
  HaNode(const std::string& service, uint16_t statd_port, int lease_seconds = kLeaseSeconds,
         const std::string& notify_socket = "", const std::string& store = "")
      : process_(Argv(service, statd_port, lease_seconds, notify_socket,
                      store.empty() ? *store::testutil::PgTestUri() : store)) {}

  // The admin server's port: it answers from the start, standby or not.
  // REQUIRES: it logged "ha: standby" or "listening" (the admin server starts before either).
  uint16_t AdminPort() {
    std::smatch admin;
    const std::string& output = process_.output();
    if (!std::regex_search(output, admin,
                           std::regex(R"(nlockd admin listening" address=\S+ port=(\d+))"))) {
      return 0;
    }
    return static_cast<uint16_t>(std::stoi(admin[1]));
  }

  bool WaitStandby() {
    return process_.WaitForLine(std::regex("ha: standby for service"), std::chrono::seconds(20))
        .has_value();
  }
  // Waits until it serves; false after `timeout`.
  bool WaitActive(milliseconds timeout) {
    auto match =
        process_.WaitForLine(std::regex(R"(nlockd listening" address=\S+ port=(\d+))"), timeout);
    if (!match) return false;
    port_ = static_cast<uint16_t>(std::stoi((*match)[1]));
    std::smatch admin;
    const std::string& output = process_.output();
    if (std::regex_search(output, admin,
                          std::regex(R"(nlockd admin listening" address=\S+ port=(\d+))"))) {
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

  static std::vector<std::string> Argv(const std::string& service, uint16_t statd_port,
                                       int lease_seconds, const std::string& notify_socket,
                                       const std::string& store) {
    std::vector<std::string> argv;
    if (!notify_socket.empty()) argv = {"/usr/bin/env", "NOTIFY_SOCKET=" + notify_socket};
    for (std::string arg :
         {std::string(NLOCKD_BINARY), std::string("--store"), store, std::string("--listen"),
          std::string("127.0.0.1:0"), std::string("--rpcbind-register=false"),
          std::string("--name"), service, std::string("--grace"), std::string("60"),
          std::string("--notify-statd-port"), std::to_string(statd_port),
          std::string("--admin-listen"), std::string("127.0.0.1:0"),
          std::string("--admin-open-writes=true"), std::string("--ha=true"),
          std::string("--ha-lease"), std::to_string(lease_seconds)}) {
      argv.push_back(std::move(arg));
    }
    return argv;
  }

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

  // Starts A (active, holding the hosts' locks) and B (standby) on `store` ("" for the test
  // server).
  void StartPair(int lease_seconds = kLeaseSeconds, const std::string& store = "") {
    a_ = std::make_unique<HaNode>(service_, peers_.statd_port(), lease_seconds, "", store);
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
    b_ = std::make_unique<HaNode>(service_, peers_.statd_port(), lease_seconds, "", store);
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

// The standby sees the holder's database session end (its session lock comes free) and takes
// the lease at once rather than when it expires.
TEST_F(HaTest, AfterKillNineTheStandbyServesWithinASecondWithTheDefaultLease) {
  StartPair(/*lease_seconds=*/5);
  ASSERT_FALSE(HasFatalFailure());
  const auto killed = Clock::now();
  EXPECT_EQ(a_->process().Stop(SIGKILL, std::chrono::seconds(10)), 128 + SIGKILL);
  ASSERT_TRUE(b_->WaitActive(std::chrono::seconds(10))) << b_->process().output();
  const auto took = std::chrono::duration_cast<milliseconds>(Clock::now() - killed);
  RecordProperty("takeover_ms", static_cast<int>(took.count()));
  // About 0.2-0.5 s; the bound leaves room for a loaded CI machine.
  EXPECT_LT(took, milliseconds(1500)) << b_->process().output();
  EXPECT_NE(b_->process().output().find("ended; taking the lease over"), std::string::npos);
  ExpectTakenOver();
}

// The process lives on but its lease session is gone: the standby takes over at once, so the
// old active must stop by itself, before the standby serves, and never grant again.
TEST_F(HaTest, AnActiveWhoseLeaseSessionIsTerminatedStopsBeforeTheStandbyServes) {
  StartPair(/*lease_seconds=*/5);
  ASSERT_FALSE(HasFatalFailure());
  const auto terminated = Clock::now();
  store::testutil::PgExec(
      *store::testutil::PgTestUri(),
      fmt::format("SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' "
                  "AND granted AND objsubid = 2 AND classid = {}::oid AND objid = "
                  "hashtext('{}')::oid",
                  0x4e4c5353, service_));
  const std::optional<int> status = a_->process().Wait(std::chrono::seconds(5));
  ASSERT_TRUE(status.has_value()) << "A kept serving without its lease session";
  const std::string b_output = b_->process().output();
  EXPECT_EQ(*status, 75) << a_->process().output();
  EXPECT_NE(a_->process().output().find("lost the database session that holds the lease"),
            std::string::npos)
      << a_->process().output();
  EXPECT_EQ(b_output.find("nlockd listening"), std::string::npos)
      << "B served before A had stopped:\n"
      << b_output;
  ASSERT_TRUE(b_->WaitActive(std::chrono::seconds(10))) << b_->process().output();
  const auto took = std::chrono::duration_cast<milliseconds>(Clock::now() - terminated);
  RecordProperty("session_takeover_ms", static_cast<int>(took.count()));
  EXPECT_LT(took, milliseconds(2500));
  ExpectTakenOver();
}

// Operators see the standby: /healthz answers, /readyz says 503 with its role, the holder and
// the epoch; status and metrics carry the role, on the active node as on the standby.
TEST_F(HaTest, TheStandbyAndTheActiveReportTheirRoles) {
  a_ = std::make_unique<HaNode>(service_, peers_.statd_port());
  ASSERT_TRUE(a_->WaitActive(std::chrono::seconds(20))) << a_->process().output();
  b_ = std::make_unique<HaNode>(service_, peers_.statd_port());
  ASSERT_TRUE(b_->WaitStandby()) << b_->process().output();
  const uint16_t b_admin = b_->AdminPort();
  const uint16_t a_admin = a_->AdminPort();
  ASSERT_NE(b_admin, 0) << b_->process().output();
  ASSERT_NE(a_admin, 0) << a_->process().output();
  const std::string a_holder = fmt::format("nlockd pid {} on ", a_->process().pid());

  httplib::Client standby("127.0.0.1", b_admin);
  standby.set_read_timeout(std::chrono::seconds(10));
  auto healthz = standby.Get("/healthz");
  ASSERT_TRUE(healthz);
  EXPECT_EQ(healthz->status, 200);
  auto readyz = standby.Get("/readyz");
  ASSERT_TRUE(readyz);
  EXPECT_EQ(readyz->status, 503);
  const json ready = json::parse(readyz->body);
  EXPECT_EQ(ready["role"], "standby") << readyz->body;
  EXPECT_EQ(ready["ready"], false);
  EXPECT_EQ(ready["holder"].get<std::string>().rfind(a_holder, 0), 0u) << readyz->body;
  const int64_t epoch = ready["epoch"].get<int64_t>();
  EXPECT_GT(epoch, 0);
  auto status = standby.Get("/api/v1/status");
  ASSERT_TRUE(status);
  EXPECT_EQ(status->status, 200);
  const json ha = json::parse(status->body)["ha"];
  EXPECT_EQ(ha["role"], "standby") << status->body;
  EXPECT_EQ(ha["epoch"], epoch);
  EXPECT_EQ(ha["lease_seconds"], kLeaseSeconds);
  auto metrics = standby.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_NE(metrics->body.find("nlockd_ha_role{role=\"standby\"} 1"), std::string::npos)
      << metrics->body;
  EXPECT_NE(metrics->body.find("nlockd_ha_role{role=\"active\"} 0"), std::string::npos);
  EXPECT_NE(metrics->body.find(fmt::format("nlockd_ha_epoch {}", epoch)), std::string::npos);
  EXPECT_NE(metrics->body.find("nlockd_ha_lease_info{holder=\"" + a_holder), std::string::npos);
  EXPECT_EQ(standby.Get("/api/v1/locks")->status, 503);

  httplib::Client active("127.0.0.1", a_admin);
  active.set_read_timeout(std::chrono::seconds(10));
  auto a_ready = active.Get("/readyz");
  ASSERT_TRUE(a_ready);
  EXPECT_EQ(a_ready->status, 200) << a_ready->body;
  EXPECT_EQ(json::parse(a_ready->body)["role"], "active");
  const json a_ha = json::parse(active.Get("/api/v1/status")->body)["ha"];
  EXPECT_EQ(a_ha["role"], "active");
  EXPECT_EQ(a_ha["epoch"], epoch);
  EXPECT_EQ(a_ha["holder"].get<std::string>().rfind(a_holder, 0), 0u);
  const std::string a_metrics = active.Get("/metrics")->body;
  EXPECT_NE(a_metrics.find("nlockd_ha_role{role=\"active\"} 1"), std::string::npos) << a_metrics;

  // nlockctl prints the role, the holder and the epoch.
  testutil::Subprocess ctl(
      {NLOCKCTL_BINARY, "--server", fmt::format("http://127.0.0.1:{}", b_admin), "status"});
  ASSERT_EQ(ctl.Wait(std::chrono::seconds(10)), 0) << ctl.output();
  EXPECT_NE(ctl.output().find("ha:\n  epoch: " + std::to_string(epoch)), std::string::npos)
      << ctl.output();
  EXPECT_NE(ctl.output().find("  role: standby"), std::string::npos) << ctl.output();
  EXPECT_NE(ctl.output().find("  holder: " + a_holder), std::string::npos) << ctl.output();
  EXPECT_EQ(b_->process().Stop(SIGTERM, std::chrono::seconds(5)), 0) << b_->process().output();
  EXPECT_EQ(a_->process().Stop(SIGTERM, std::chrono::seconds(20)), 0);
}

// Under systemd (Type=notify) a standby is a running node: it is ready once it waits, so that
// the unit's start timeout does not kill it, and its status line names the holder.
TEST_F(HaTest, AStandbyTellsSystemdItIsReadyAndWhoHoldsTheService) {
  a_ = std::make_unique<HaNode>(service_, peers_.statd_port());
  ASSERT_TRUE(a_->WaitActive(std::chrono::seconds(20))) << a_->process().output();
  TempDir dir;
  testutil::NotifySocket notify(dir.path() + "/notify");
  b_ = std::make_unique<HaNode>(service_, peers_.statd_port(), kLeaseSeconds,
                                dir.path() + "/notify");
  ASSERT_TRUE(b_->WaitStandby()) << b_->process().output();
  const std::string ready = notify.WaitFor("READY=1", std::chrono::seconds(10));
  ASSERT_FALSE(ready.empty()) << b_->process().output();
  EXPECT_NE(ready.find("STATUS=standby"), std::string::npos) << ready;
  const std::string held = notify.WaitFor(
      fmt::format("held by nlockd pid {} on ", a_->process().pid()), std::chrono::seconds(5));
  EXPECT_FALSE(held.empty()) << b_->process().output();

  EXPECT_EQ(a_->process().Stop(SIGTERM, std::chrono::seconds(20)), 0);
  ASSERT_TRUE(b_->WaitActive(std::chrono::seconds(kLeaseSeconds + 5))) << b_->process().output();
  // Serving now: the status line is the service's (grace phase and counts).
  EXPECT_FALSE(notify.WaitFor(" locks, ", std::chrono::seconds(5)).empty())
      << b_->process().output();
  EXPECT_EQ(b_->process().Stop(SIGTERM, std::chrono::seconds(20)), 0);
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

// `nlockctl service release`: the active stops serving and releases the lease without
// stopping its process, the standby takes the service over, and the released node waits as
// standby, so that a second release moves the service back.
TEST_F(HaTest, NlockctlServiceReleaseMovesTheServiceAndBack) {
  StartPair();
  ASSERT_FALSE(HasFatalFailure());
  auto release = [](uint16_t admin_port) {
    testutil::Subprocess ctl({NLOCKCTL_BINARY, "--server",
                              fmt::format("http://127.0.0.1:{}", admin_port), "service",
                              "release"});
    const std::optional<int> status = ctl.Wait(std::chrono::seconds(10));
    return std::make_pair(status.value_or(-1), ctl.output());
  };
  const auto [refused, refusal] = release(b_->AdminPort());
  EXPECT_NE(refused, 0) << "a standby has nothing to release: " << refusal;

  const auto asked = Clock::now();
  const auto [status, output] = release(a_->AdminPort());
  ASSERT_EQ(status, 0) << output;
  EXPECT_NE(output.find("releasing service " + service_), std::string::npos) << output;
  ASSERT_TRUE(b_->WaitActive(std::chrono::seconds(kLeaseSeconds + 5))) << b_->process().output();
  const auto took = std::chrono::duration_cast<milliseconds>(Clock::now() - asked);
  RecordProperty("release_handover_ms", static_cast<int>(took.count()));
  EXPECT_LT(took, milliseconds(kLeaseSeconds * 1000)) << a_->process().output();
  ExpectTakenOver();

  // A lives on as standby behind B, for at least its hold-off of one lease.
  ASSERT_TRUE(a_->WaitStandby()) << a_->process().output();
  EXPECT_FALSE(a_->WaitActive(milliseconds(kLeaseSeconds * 1000 + 500)))
      << "A took the service back from B";
  httplib::Client a_admin("127.0.0.1", a_->AdminPort());
  a_admin.set_read_timeout(std::chrono::seconds(10));
  auto readyz = a_admin.Get("/readyz");
  ASSERT_TRUE(readyz);
  EXPECT_EQ(readyz->status, 503);
  EXPECT_EQ(json::parse(readyz->body)["role"], "standby") << readyz->body;
  EXPECT_EQ(json::parse(readyz->body)["holder"].get<std::string>().rfind(
                fmt::format("nlockd pid {} on ", b_->process().pid()), 0),
            0u)
      << readyz->body;

  // And back: A serves again with the same lock table.
  const auto [back, back_output] = release(b_->AdminPort());
  ASSERT_EQ(back, 0) << back_output;
  ASSERT_TRUE(a_->WaitActive(std::chrono::seconds(kLeaseSeconds + 5))) << a_->process().output();
  EXPECT_EQ(a_->LockTable(), table_);
  EXPECT_EQ(b_->process().Stop(SIGTERM, std::chrono::seconds(5)), 0) << b_->process().output();
  EXPECT_EQ(a_->process().Stop(SIGTERM, std::chrono::seconds(20)), 0) << a_->process().output();
}

TEST_F(HaTest, AnActiveWhoseLeaseWasTakenStopsBeforeTheStandbyServes) {
  StartPair();
  ASSERT_FALSE(HasFatalFailure());
  // Someone else holds the lease now (as after a partition from the database): A must stop.
  store::testutil::PgExec(
      *store::testutil::PgTestUri(),
      fmt::format("UPDATE service_lease SET epoch = epoch + 1, holder = 'test', expires_at = "
                  "clock_timestamp() + interval '1 hour', session_locked = false "
                  "WHERE service = '{}'",
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

// A primary PostgreSQL and its synchronous replica (tests/integration/pg_failover_pair.sh),
// stopped and removed when the test ends.
class PgFailoverPair {
 public:
  PgFailoverPair() : dir_(fmt::format("/tmp/nlockd-pg-pair-{}-{}", getpid(), ++counter_)) {
    testutil::Subprocess start({PG_FAILOVER_PAIR, "start", dir_});
    const std::optional<int> status = start.Wait(std::chrono::seconds(120));
    const std::string output = start.output();
    std::smatch ports;
    if (status != 0 ||
        !std::regex_search(output, ports, std::regex(R"((\d+) (\d+) ([0-9a-f]+))"))) {
      ADD_FAILURE() << "cannot start the primary and its replica:\n" << output;
      return;
    }
    uri_ = fmt::format(
        "postgresql://nlockd:{}@127.0.0.1:{},127.0.0.1:{}/nlockd_test?"
        "target_session_attrs=read-write",
        ports[3].str(), ports[1].str(), ports[2].str());
  }
  ~PgFailoverPair() {
    testutil::Subprocess stop({PG_FAILOVER_PAIR, "stop", dir_});
    stop.Wait(std::chrono::seconds(60));
  }
  // Both servers, the writable one first found (empty if the pair did not start).
  const std::string& uri() const { return uri_; }
  // Stops the primary at once and promotes the replica.
  bool Fail() {
    testutil::Subprocess fail({PG_FAILOVER_PAIR, "fail", dir_});
    return fail.Wait(std::chrono::seconds(60)) == 0;
  }

 private:
  static inline int counter_ = 0;
  const std::string dir_;
  std::string uri_;
};

// PostgreSQL itself fails over: its primary stops and the synchronous replica is promoted. Both
// nodes name both servers (libpq's multi-host URI, target_session_attrs=read-write). The active
// loses its lease session with the primary and stops (exit 75); the standby finds the promoted
// server, whose lease row and lock table are the primary's, takes the lease over and serves
// the whole table; every host is notified and reclaims.
TEST_F(HaTest, APostgresqlFailoverToItsSynchronousReplicaKeepsTheService) {
  PgFailoverPair pair;
  ASSERT_FALSE(pair.uri().empty());
  StartPair(kLeaseSeconds, pair.uri());
  ASSERT_FALSE(HasFatalFailure());
  const auto failed = Clock::now();
  ASSERT_TRUE(pair.Fail());
  const std::optional<int> status = a_->process().Wait(std::chrono::seconds(kLeaseSeconds + 5));
  ASSERT_TRUE(status.has_value()) << "A kept serving without its database";
  EXPECT_EQ(*status, 75) << a_->process().output();
  ASSERT_TRUE(b_->WaitActive(std::chrono::seconds(kLeaseSeconds + 15))) << b_->process().output();
  const auto took = std::chrono::duration_cast<milliseconds>(Clock::now() - failed);
  RecordProperty("database_failover_ms", static_cast<int>(took.count()));
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
