// SPDX-License-Identifier: Apache-2.0
// HA faults with real processes in network namespaces (run under scripts/with-postgres.sh; ctest
// label "db"), on the network of ha_topology.hpp: the test itself moves the service address
// (ip addr del/add, then the clients forget the old neighbour entry, as a cluster manager's
// gratuitous ARP makes them do) and cuts a node's link to PostgreSQL.
// Each client host runs a thread (in its namespace) that holds an exclusive lock on a file of its
// own and a shared lock on a common file for the whole run, takes and releases exclusive locks on
// a few shared files, now and then tries to take another client's own file, and answers the
// SM_NOTIFY of a new active node by reclaiming every lock it holds. A checker over every grant and
// unlock the clients saw asserts that no two conflicting locks were ever held at once (a lock
// counts as held from the moment its grant arrived to the moment its unlock was first sent) and
// that no lock a client held was lost across a fault (its reclaim denied, or another owner's
// TEST finding it free at the end).
//
// NLOCKD_HA_FAULT_ROUNDS sets the rounds of the randomized run (10 by default),
// NLOCKD_HA_FAULT_SEED its seed (printed).
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>

#include "integration/ha_pg_proxy.hpp"
#include "integration/ha_topology.hpp"
#include "testutil/subprocess.hpp"

namespace nlockd::integration::hafault {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using testutil::Subprocess;

constexpr int kLeaseSeconds = 2;

// Milliseconds since midnight of the first log line matching `pattern` (nlockd's lines start
// with an ISO 8601 time with milliseconds), or nullopt.
std::optional<int64_t> LoggedAt(const std::string& output, const std::regex& pattern) {
  std::regex line_start(R"(T(\d\d):(\d\d):(\d\d)\.(\d\d\d))");
  size_t at = 0;
  while (at < output.size()) {
    size_t end = output.find('\n', at);
    if (end == std::string::npos) end = output.size();
    const std::string line = output.substr(at, end - at);
    at = end + 1;
    if (!std::regex_search(line, pattern)) continue;
    std::smatch time;
    if (!std::regex_search(line, time, line_start)) return std::nullopt;
    return ((std::stoll(time[1]) * 60 + std::stoll(time[2])) * 60 + std::stoll(time[3])) * 1000 +
           std::stoll(time[4]);
  }
  return std::nullopt;
}

enum class Fault { kKill, kPartition, kSigterm };
const char* Name(Fault fault) {
  switch (fault) {
    case Fault::kKill:
      return "kill -9";
    case Fault::kPartition:
      return "partition from PostgreSQL";
    case Fault::kSigterm:
      return "SIGTERM";
  }
  return "?";
}

class HaFaultTest : public HaTopologyTest {
 protected:
  HaFaultTest() : HaTopologyTest("hafault", false) {}

  // Starts nlockd on node `n` (it waits as standby or serves, as the lease decides), reaching
  // PostgreSQL through `proxy` if given.
  void StartNode(int n, PgProxy* proxy = nullptr) {
    Node& node = nodes_[n];
    std::string uri = node.store_uri;
    if (proxy != nullptr) {
      uri = std::regex_replace(uri, std::regex(R"((@10\.231\.\d+\.1:)\d+/)"),
                               // "$01", not "$1": the port's digits would extend "$1".
                               "$01" + std::to_string(proxy->port()) + "/");
    }
    node.process = std::make_unique<Subprocess>(node.ns->Wrap(
        {NLOCKD_BINARY, "--store", uri, "--listen", fmt::format("0.0.0.0:{}", kNlmPort),
         "--rpcbind-register=false", "--name", service_, "--grace", "20", "--notify-statd-port",
         std::to_string(kStatdPort), "--admin-listen", "off", "--ha=true", "--ha-lease",
         std::to_string(kLeaseSeconds)}));
  }
  bool WaitStandby(int n) {
    return nodes_[n].process->LoggedOrWaitFor(std::regex("ha: standby for service"), seconds(20));
  }
  bool WaitActive(int n, milliseconds timeout) {
    return nodes_[n].process->LoggedOrWaitFor(std::regex("nlockd listening\" address="), timeout);
  }

  // A serving, B standby, the address at A.
  void StartPair() {
    StartNode(0);
    ASSERT_TRUE(WaitActive(0, seconds(30))) << nodes_[0].process->output();
    MoveAddress(std::nullopt, 0);
    active_ = 0;
    StartNode(1);
    ASSERT_TRUE(WaitStandby(1)) << nodes_[1].process->output();
  }

  // Runs one fault of the active node under load; the other node takes over; the faulty node
  // comes back as standby. Returns the time from the fault to the new node serving.
  milliseconds RunFault(Fault fault) {
    const int from = active_;
    const int to = 1 - from;
    const int32_t state_before = CurrentState();
    SCOPED_TRACE(fmt::format("{} of node {}", Name(fault), from == 0 ? 'A' : 'B'));
    std::this_thread::sleep_for(milliseconds(300));  // Load before the fault.
    const auto at = Clock::now();
    Subprocess& old = *nodes_[from].process;
    switch (fault) {
      case Fault::kKill:
        EXPECT_EQ(old.Stop(SIGKILL, seconds(10)), 128 + SIGKILL);
        MoveAddress(from, to);
        break;
      case Fault::kSigterm:
        EXPECT_EQ(old.Stop(SIGTERM, seconds(20)), 0) << old.output();
        MoveAddress(from, to);
        break;
      case Fault::kPartition: {
        SetPgLink(from, false);
        // The clients still reach it; it must stop by itself before the lease can expire.
        const std::optional<int> status = old.Wait(seconds(kLeaseSeconds + 3));
        EXPECT_TRUE(status.has_value()) << "the partitioned active kept running";
        if (status) {
          EXPECT_EQ(*status, 75) << old.output();
        } else {
          old.Stop(SIGKILL, seconds(10));
        }
        MoveAddress(from, to);
        break;
      }
    }
    const bool took = WaitActive(to, seconds(kLeaseSeconds * 3 + 10));
    const auto took_at = Clock::now();
    EXPECT_TRUE(took) << nodes_[to].process->output();
    if (!took) return milliseconds::max();
    if (fault == Fault::kPartition) {
      // From the logs' clock: the old node had stopped before the new one served.
      ExpectStoppedBeforeServed(from, to);
      SetPgLink(from, true);
    }
    active_ = to;
    EXPECT_TRUE(WaitAllReclaimed(state_before, seconds(30)));
    EXPECT_TRUE(WaitGrantsAfter(took_at, seconds(30))) << "no new lock granted after takeover";
    std::cout << Name(fault) << ": took over after "
              << std::chrono::duration_cast<milliseconds>(took_at - at).count() << " ms\n";
    // The old node comes back as standby.
    StartNode(from);
    EXPECT_TRUE(WaitStandby(from)) << nodes_[from].process->output();
    return std::chrono::duration_cast<milliseconds>(took_at - at);
  }

  // A proxy on node n's link to PostgreSQL (the address the node reaches the database at).
  std::unique_ptr<PgProxy> ProxyFor(int n) {
    std::smatch address;
    const std::string& uri = nodes_[n].store_uri;
    EXPECT_TRUE(std::regex_search(uri, address, std::regex(R"(@(10\.231\.\d+\.1):(\d+)/)"))) << uri;
    return std::make_unique<PgProxy>(address[1], "127.0.0.1",
                                     static_cast<uint16_t>(std::stoi(address[2])));
  }

  // Checks from the logs' clock that node `old` had stopped before node `now` served.
  void ExpectStoppedBeforeServed(int old, int now) {
    auto stopped =
        LoggedAt(nodes_[old].process->output(), std::regex("ha: (lost the lease|could not renew)"));
    auto serving = LoggedAt(nodes_[now].process->output(), std::regex("nlockd listening"));
    EXPECT_TRUE(stopped && serving) << nodes_[old].process->output();
    if (stopped && serving) {
      EXPECT_LE(*stopped, *serving) << "the new active served before the old one stopped";
    }
  }

  int active_ = 0;
};

// The takeover bound after a fault: a lease, plus the standby's poll, ending a stranded
// transaction and its start-up.
constexpr milliseconds kTakeoverBound(kLeaseSeconds * 1000 + 2000);

// The checker itself: overlapping exclusive locks of two owners are a conflict; shared ones, one
// owner's, and back-to-back ones are not.
TEST(HaFaultChecker, FindsOverlappingConflictingLocksOnly) {
  const Clock::time_point t0{};
  auto at = [&](int ms) { return t0 + milliseconds(ms); };
  EXPECT_EQ(Conflicts({{"a", "f", true, at(0), at(10)}, {"b", "f", true, at(5), at(20)}}).size(),
            1U);
  EXPECT_EQ(Conflicts({{"a", "f", false, at(0), at(10)}, {"b", "f", true, at(5), at(20)}}).size(),
            1U);
  EXPECT_TRUE(
      Conflicts({{"a", "f", false, at(0), at(10)}, {"b", "f", false, at(5), at(20)}}).empty());
  EXPECT_TRUE(
      Conflicts({{"a", "f", true, at(0), at(10)}, {"a", "f", true, at(5), at(20)}}).empty());
  EXPECT_TRUE(
      Conflicts({{"a", "f", true, at(0), at(10)}, {"b", "f", true, at(10), at(20)}}).empty());
  EXPECT_TRUE(
      Conflicts({{"a", "f", true, at(0), at(10)}, {"b", "g", true, at(5), at(20)}}).empty());
  EXPECT_EQ(Conflicts({{"a", "f", true, at(0), at(100)},
                       {"b", "f", true, at(10), at(20)},
                       {"c", "f", true, at(50), at(60)}})
                .size(),
            2U);
}

TEST_F(HaFaultTest, KillNineOfTheActiveUnderLoad) {
  StartPair();
  ASSERT_FALSE(HasFatalFailure());
  StartLoad();
  ASSERT_FALSE(HasFatalFailure());
  const milliseconds took = RunFault(Fault::kKill);
  RecordProperty("takeover_ms", static_cast<int>(took.count()));
  EXPECT_LT(took, milliseconds(kLeaseSeconds * 1000 + 2000));
  StopAndCheck();
}

TEST_F(HaFaultTest, TheActiveCutOffFromPostgresqlStopsBeforeTheStandbyServes) {
  StartPair();
  ASSERT_FALSE(HasFatalFailure());
  StartLoad();
  ASSERT_FALSE(HasFatalFailure());
  RunFault(Fault::kPartition);
  StopAndCheck();
}

// The partition lands inside one of the active node's fenced write transactions: the proxy
// forwards its pipeline up to, not including, its COMMIT and then drops everything. The
// transaction stays open on the server, its fence share-locking the lease row; the active stops
// by its own deadline, and the standby must not wait for that transaction (it ends it) nor be
// fenced by its own wait.
TEST_F(HaFaultTest, APartitionBeforeTheActivesCommitIsTakenOverWithinALease) {
  std::unique_ptr<PgProxy> proxy = ProxyFor(0);
  StartNode(0, proxy.get());
  ASSERT_TRUE(WaitActive(0, seconds(30))) << nodes_[0].process->output();
  MoveAddress(std::nullopt, 0);
  StartNode(1);
  ASSERT_TRUE(WaitStandby(1)) << nodes_[1].process->output();
  StartLoad();
  ASSERT_FALSE(HasFatalFailure());
  std::this_thread::sleep_for(milliseconds(300));
  const int32_t state_before = CurrentState();

  proxy->Arm("COMMIT", PgProxy::Cut::kBeforeStatement);
  ASSERT_TRUE(proxy->WaitCut(seconds(10))) << "the load made no store write";
  const auto cut = proxy->cut_at();
  const std::optional<int> status = nodes_[0].process->Wait(seconds(kLeaseSeconds + 3));
  ASSERT_TRUE(status.has_value()) << "the cut-off active kept running";
  EXPECT_EQ(*status, 75) << nodes_[0].process->output();
  MoveAddress(0, 1);
  const bool took = WaitActive(1, seconds(kLeaseSeconds * 3 + 10));
  const auto took_at = Clock::now();
  ASSERT_TRUE(took) << nodes_[1].process->output();
  const auto takeover = std::chrono::duration_cast<milliseconds>(took_at - cut);
  std::cout << "partition before COMMIT: took over after " << takeover.count() << " ms\n";
  RecordProperty("takeover_ms", static_cast<int>(takeover.count()));
  EXPECT_LE(takeover, kTakeoverBound) << nodes_[1].process->output();
  ExpectStoppedBeforeServed(0, 1);
  // Still serving well past its first lease: not fenced by its own wait.
  EXPECT_FALSE(nodes_[1].process->Wait(milliseconds(kLeaseSeconds * 1500)).has_value())
      << nodes_[1].process->output();
  EXPECT_TRUE(WaitAllReclaimed(state_before, seconds(30)));
  EXPECT_TRUE(WaitGrantsAfter(took_at, seconds(30))) << "no new lock granted after takeover";
  StopAndCheck();
}

// The partition lands inside the standby's takeover: its INSERT that takes the lease ran, its
// commit never arrives, so the lease row stays locked by a transaction that will never end. The
// node started after it must take the service over within a lease all the same.
TEST_F(HaFaultTest, APartitionInsideTheStandbysTakeoverIsTakenOverWithinALease) {
  std::unique_ptr<PgProxy> proxy = ProxyFor(1);
  StartNode(0);
  ASSERT_TRUE(WaitActive(0, seconds(30))) << nodes_[0].process->output();
  MoveAddress(std::nullopt, 0);
  StartNode(1, proxy.get());
  ASSERT_TRUE(WaitStandby(1)) << nodes_[1].process->output();
  StartLoad();
  ASSERT_FALSE(HasFatalFailure());
  std::this_thread::sleep_for(milliseconds(300));
  const int32_t state_before = CurrentState();

  proxy->Arm("INSERT INTO service_lease", PgProxy::Cut::kAfterExecute);
  EXPECT_EQ(nodes_[0].process->Stop(SIGKILL, seconds(10)), 128 + SIGKILL);
  ASSERT_TRUE(proxy->WaitCut(seconds(10))) << nodes_[1].process->output();
  const auto cut = proxy->cut_at();
  StartNode(0);  // the supervisor's restart, beside the address
  const bool took = WaitActive(0, seconds(kLeaseSeconds * 3 + 10));
  const auto took_at = Clock::now();
  ASSERT_TRUE(took) << nodes_[0].process->output();
  const auto takeover = std::chrono::duration_cast<milliseconds>(took_at - cut);
  std::cout << "partition inside the standby's takeover: took over after " << takeover.count()
            << " ms\n";
  RecordProperty("takeover_ms", static_cast<int>(takeover.count()));
  EXPECT_LE(takeover, kTakeoverBound) << nodes_[0].process->output();
  EXPECT_FALSE(nodes_[1].process->LoggedOrWaitFor(std::regex("nlockd listening"), milliseconds(1)))
      << "the cut-off standby served: " << nodes_[1].process->output();
  EXPECT_FALSE(nodes_[0].process->Wait(milliseconds(kLeaseSeconds * 1500)).has_value())
      << nodes_[0].process->output();
  EXPECT_TRUE(WaitAllReclaimed(state_before, seconds(30)));
  EXPECT_TRUE(WaitGrantsAfter(took_at, seconds(30))) << "no new lock granted after takeover";
  StopAndCheck();
}

TEST_F(HaFaultTest, PlannedMoveBySigtermAndBack) {
  StartPair();
  ASSERT_FALSE(HasFatalFailure());
  StartLoad();
  ASSERT_FALSE(HasFatalFailure());
  const milliseconds there = RunFault(Fault::kSigterm);
  const milliseconds back = RunFault(Fault::kSigterm);
  RecordProperty("move_ms", static_cast<int>(there.count()));
  RecordProperty("move_back_ms", static_cast<int>(back.count()));
  EXPECT_EQ(active_, 0);
  StopAndCheck();
}

TEST_F(HaFaultTest, BothNodesStartedAtOnceMakeExactlyOneActive) {
  StartNode(0);
  StartNode(1);
  int active = -1;
  const auto deadline = Clock::now() + seconds(30);
  while (active < 0 && Clock::now() < deadline) {
    for (int n = 0; n < 2 && active < 0; ++n) {
      if (WaitActive(n, milliseconds(100))) active = n;
    }
  }
  ASSERT_GE(active, 0) << nodes_[0].process->output() << nodes_[1].process->output();
  const int other = 1 - active;
  EXPECT_TRUE(WaitStandby(other)) << nodes_[other].process->output();
  // Well past a lease: the other is still waiting.
  EXPECT_FALSE(WaitActive(other, milliseconds(kLeaseSeconds * 1500)))
      << nodes_[other].process->output();
  EXPECT_FALSE(nodes_[other].process->Wait(milliseconds(1)).has_value());
  // And the one active serves locks.
  MoveAddress(std::nullopt, active);
  active_ = active;
  StartLoad();
  ASSERT_FALSE(HasFatalFailure());
  std::this_thread::sleep_for(milliseconds(300));
  StopAndCheck();
}

// PostgreSQL restarted under load: the active keeps its lease (renewing again once the server is
// back) or loses it cleanly (exit 75, the standby takes over); either way the clients' history
// is clean and the service serves afterwards.
TEST_F(HaFaultTest, PostgresqlRestartedUnderLoad) {
  const char* pg_ctl = std::getenv("NLOCKD_TEST_PG_CTL");
  if (pg_ctl == nullptr) GTEST_SKIP() << "needs NLOCKD_TEST_PG_CTL (scripts/with-postgres.sh)";
  StartPair();
  ASSERT_FALSE(HasFatalFailure());
  StartLoad();
  ASSERT_FALSE(HasFatalFailure());
  std::this_thread::sleep_for(milliseconds(300));
  const int32_t state_before = CurrentState();
  const auto restarted = Clock::now();
  ASSERT_EQ(std::system((std::string(pg_ctl) + " -m fast restart >/dev/null 2>&1").c_str()), 0);
  // Past a lease from now the active has either renewed or gone.
  const std::optional<int> status =
      nodes_[active_].process->Wait(milliseconds(kLeaseSeconds * 1000 + 1500));
  if (status) {
    std::cout << "the active lost its lease in the restart (exit " << *status << ")\n";
    EXPECT_EQ(*status, 75) << nodes_[active_].process->output();
    const int to = 1 - active_;
    MoveAddress(active_, to);
    ASSERT_TRUE(WaitActive(to, seconds(kLeaseSeconds * 3 + 10))) << nodes_[to].process->output();
    active_ = to;
    EXPECT_TRUE(WaitAllReclaimed(state_before, seconds(30)));
  } else {
    std::cout << "the active kept its lease through the restart\n";
    EXPECT_FALSE(WaitActive(1 - active_, milliseconds(200))) << "two active nodes";
  }
  EXPECT_TRUE(WaitGrantsAfter(restarted + milliseconds(kLeaseSeconds * 1000), seconds(30)))
      << "no lock granted after the restart";
  StopAndCheck();
}

TEST_F(HaFaultTest, RandomizedFaults) {
  int rounds = 10;
  if (const char* text = std::getenv("NLOCKD_HA_FAULT_ROUNDS")) rounds = std::atoi(text);
  seed_ = static_cast<uint32_t>(std::random_device{}());
  if (const char* text = std::getenv("NLOCKD_HA_FAULT_SEED")) {
    seed_ = static_cast<uint32_t>(std::strtoul(text, nullptr, 10));
  }
  std::cout << "randomized faults: " << rounds << " rounds, NLOCKD_HA_FAULT_SEED=" << seed_ << "\n";
  std::mt19937 random(seed_);
  StartPair();
  ASSERT_FALSE(HasFatalFailure());
  StartLoad();
  ASSERT_FALSE(HasFatalFailure());
  std::map<std::string, std::vector<int64_t>> times;
  for (int round = 1; round <= rounds && !HasFailure(); ++round) {
    const Fault fault = static_cast<Fault>(random() % 3);
    const milliseconds took = RunFault(fault);
    times[Name(fault)].push_back(took.count());
    std::cout << "round " << round << ": " << Name(fault) << ", takeover " << took.count()
              << " ms\n";
  }
  for (const auto& [fault, list] : times) {
    std::cout << fault << ": " << list.size() << " rounds, takeover max "
              << *std::max_element(list.begin(), list.end()) << " ms\n";
  }
  StopAndCheck();
}

}  // namespace
}  // namespace nlockd::integration::hafault
