// HA faults with real processes in network namespaces (run under scripts/with-postgres.sh; ctest
// label "db"). Layout:
//   - nodes A and B and client hosts 1..3, each a network namespace of its own;
//   - a "lan" namespace holding a bridge that every host is plugged into; the clients have
//     10.232.0.1N/24 there, the nodes no address of their own: the service address
//     10.232.0.100/24 is on the active node's port, and the test moves it (ip addr del/add, then
//     the clients forget the old neighbour entry, as a cluster manager's gratuitous ARP makes
//     them do);
//   - each node reaches PostgreSQL (in the namespace the test runs in) over a veth pair of its
//     own, 10.231.K.2 -> 10.231.K.1; setting the test's end of that pair down cuts the node off
//     from the database while the clients still reach it.
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
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <iostream>

#include "integration/ha_fault_clients.hpp"
#include "store/testing/store_test_util.hpp"
#include "testutil/netns.hpp"
#include "testutil/subprocess.hpp"

namespace nlockd::integration::hafault {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using std::chrono::seconds;
using testutil::NetNamespace;
using testutil::RunCommand;
using testutil::Subprocess;

constexpr int kLeaseSeconds = 2;
constexpr int kClients = 3;

void Ip(const std::vector<std::string>& argv) {
  auto [rc, out] = RunCommand(argv);
  if (rc != 0) {
    std::string line;
    for (const auto& arg : argv) line += arg + " ";
    throw std::runtime_error(line + "failed: " + out);
  }
}

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
    case Fault::kKill: return "kill -9";
    case Fault::kPartition: return "partition from PostgreSQL";
    case Fault::kSigterm: return "SIGTERM";
  }
  return "?";
}

class HaFaultTest : public ::testing::Test {
 protected:
  struct Node {
    std::unique_ptr<NetNamespace> ns;
    std::string pg_link;  // Our end of the node's link to PostgreSQL.
    std::string store_uri;
    std::unique_ptr<Subprocess> process;
  };

  void SetUp() override {
    if (!store::testutil::PgTestUri()) {
      GTEST_SKIP() << "NLOCKD_TEST_PG_URI is not set; run under scripts/with-postgres.sh";
    }
    if (!NetNamespace::Available()) GTEST_SKIP() << "needs root and iproute2";
    NetNamespace::RemoveStale();
    lan_ = std::make_unique<NetNamespace>("hflan");
    Ip({"ip", "-n", lan_->name(), "link", "add", "br0", "type", "bridge"});
    Ip({"ip", "-n", lan_->name(), "link", "set", "br0", "up"});
    const std::string uri = *store::testutil::PgTestUri();
    const int base = 1 + 2 * (getpid() % 120);
    for (int n = 0; n < 2; ++n) {
      Node& node = nodes_[n];
      node.ns = std::make_unique<NetNamespace>(n == 0 ? "hfa" : "hfb");
      Plug(*node.ns, "");
      const int k = base + n;
      node.pg_link = fmt::format("nhf{}{}", getpid(), n == 0 ? 'a' : 'b');
      Ip({"ip", "link", "add", node.pg_link, "type", "veth", "peer", "name", "pg0", "netns",
          node.ns->name()});
      Ip({"ip", "addr", "add", fmt::format("10.231.{}.1/24", k), "dev", node.pg_link});
      Ip({"ip", "link", "set", node.pg_link, "up"});
      Ip({"ip", "-n", node.ns->name(), "addr", "add", fmt::format("10.231.{}.2/24", k), "dev",
          "pg0"});
      Ip({"ip", "-n", node.ns->name(), "link", "set", "pg0", "up"});
      node.store_uri =
          std::regex_replace(uri, std::regex("@127\\.0\\.0\\.1:"), fmt::format("@10.231.{}.1:", k));
    }
    for (int c = 1; c <= kClients; ++c) {
      clients_ns_.push_back(std::make_unique<NetNamespace>(fmt::format("hfc{}", c)));
      Plug(*clients_ns_.back(), ClientAddress(c) + "/24");
    }
  }

  void TearDown() override {
    StopLoad();
    for (Node& node : nodes_) {
      if (node.process) node.process->Stop(SIGKILL, seconds(10));
      if (!node.pg_link.empty()) RunCommand({"ip", "link", "del", node.pg_link});
    }
  }

  static std::string ClientAddress(int c) { return fmt::format("10.232.0.{}", 10 + c); }

  // Plugs `host` into the lan bridge as "lan0", with `address` (CIDR) unless empty.
  void Plug(NetNamespace& host, const std::string& address) {
    const std::string port = fmt::format("p{}", ports_++);
    Ip({"ip", "-n", lan_->name(), "link", "add", port, "type", "veth", "peer", "name", "lan0",
        "netns", host.name()});
    Ip({"ip", "-n", lan_->name(), "link", "set", port, "master", "br0"});
    Ip({"ip", "-n", lan_->name(), "link", "set", port, "up"});
    if (!address.empty()) Ip({"ip", "-n", host.name(), "addr", "add", address, "dev", "lan0"});
    Ip({"ip", "-n", host.name(), "link", "set", "lan0", "up"});
  }

  // Starts nlockd on node `n` (it waits as standby or serves, as the lease decides).
  void StartNode(int n) {
    Node& node = nodes_[n];
    node.process = std::make_unique<Subprocess>(node.ns->Wrap(
        {NLOCKD_BINARY, "--store", node.store_uri, "--listen", fmt::format("0.0.0.0:{}", kNlmPort),
         "--rpcbind-register=false", "--name", service_, "--grace", "20",
         "--notify-statd-port", std::to_string(kStatdPort), "--admin-listen", "off", "--ha=true",
         "--ha-lease", std::to_string(kLeaseSeconds)}));
  }
  bool WaitStandby(int n) {
    return nodes_[n].process->LoggedOrWaitFor(std::regex("ha: standby for service"), seconds(20));
  }
  bool WaitActive(int n, milliseconds timeout) {
    return nodes_[n].process->LoggedOrWaitFor(std::regex("nlockd listening address="), timeout);
  }

  // The service address leaves node `from` (if any) and arrives at node `to`; the clients drop
  // their neighbour entry for it.
  void MoveAddress(std::optional<int> from, int to) {
    const std::string cidr = std::string(kServiceAddress) + "/24";
    if (from) RunCommand({"ip", "-n", nodes_[*from].ns->name(), "addr", "del", cidr, "dev", "lan0"});
    Ip({"ip", "-n", nodes_[to].ns->name(), "addr", "add", cidr, "dev", "lan0"});
    for (const auto& client : clients_ns_) {
      RunCommand({"ip", "-n", client->name(), "neigh", "flush", "dev", "lan0"});
    }
  }

  void SetPgLink(int n, bool up) {
    Ip({"ip", "link", "set", nodes_[n].pg_link, up ? "up" : "down"});
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

  void StartLoad() {
    for (int c = 1; c <= kClients; ++c) {
      clients_.push_back(std::make_unique<FaultClient>(
          c, kClients, clients_ns_[static_cast<size_t>(c - 1)]->name(), ClientAddress(c),
          kServiceAddress, kNlmPort, kStatdPort, service_, seed_ + static_cast<uint32_t>(c)));
    }
    for (auto& client : clients_) {
      ASSERT_TRUE(client->WaitAnchored(seconds(20))) << "client " << client->id()
                                                     << " could not take its locks";
    }
  }
  void StopLoad() {
    for (auto& client : clients_) client->Stop();
  }

  // Every client's status monitor got a state above `above` from the service and it reclaimed.
  bool WaitAllReclaimed(int32_t above, milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    for (auto& client : clients_) {
      if (!client->WaitReclaimed(above, std::chrono::duration_cast<milliseconds>(
                                             deadline - Clock::now()))) {
        ADD_FAILURE() << "client " << client->id() << " was not notified of a state above "
                      << above << " or could not reclaim";
        return false;
      }
    }
    return true;
  }
  int32_t CurrentState() {
    int32_t state = 0;
    for (auto& client : clients_) state = std::max(state, client->last_state());
    return state;
  }
  // New exclusive locks are granted again (grace over for them) after the fault.
  bool WaitGrantsAfter(Clock::time_point since, milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    while (Clock::now() < deadline) {
      for (auto& client : clients_) {
        if (client->LastNewGrant() > since) return true;
      }
      std::this_thread::sleep_for(milliseconds(20));
    }
    return false;
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
      auto stopped = LoggedAt(old.output(), std::regex("ha: (lost the lease|could not renew)"));
      auto serving = LoggedAt(nodes_[to].process->output(), std::regex("nlockd listening"));
      EXPECT_TRUE(stopped && serving) << old.output();
      if (stopped && serving) {
        EXPECT_LE(*stopped, *serving) << "the new active served before the old one stopped";
      }
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

  // Stops the clients, has each verify with another owner's TEST that the server still holds
  // every lock it believes it holds, and checks the history.
  void StopAndCheck() {
    StopLoad();
    std::vector<LockInterval> history;
    size_t grants = 0;
    size_t reclaims = 0;
    for (auto& client : clients_) {
      const FaultClient::Result result = client->result();
      history.insert(history.end(), result.intervals.begin(), result.intervals.end());
      grants += result.grants;
      reclaims += result.reclaims;
      EXPECT_EQ(result.lost, 0U) << "client " << client->id() << " lost locks:\n"
                                 << result.lost_detail;
      EXPECT_EQ(result.not_held_at_end, 0U)
          << "client " << client->id() << ": locks it holds are free at the server:\n"
          << result.lost_detail;
      EXPECT_TRUE(result.verified) << "client " << client->id() << " could not verify its locks";
    }
    const std::vector<std::string> conflicts = Conflicts(history);
    EXPECT_TRUE(conflicts.empty()) << conflicts.size() << " conflicting grants, first: "
                                   << conflicts.front();
    EXPECT_GT(grants, 0U);
    RecordProperty("grants", static_cast<int>(grants));
    std::cout << "checker: " << grants << " grants, " << reclaims << " reclaims, "
              << history.size() << " intervals, " << conflicts.size() << " conflicts\n";
  }

  static constexpr const char* kServiceAddress = "10.232.0.100";
  static constexpr uint16_t kNlmPort = 4045;
  static constexpr uint16_t kStatdPort = 4999;

  const std::string service_ = fmt::format("hafault-{}.test", getpid());
  uint32_t seed_ = 1;
  std::unique_ptr<NetNamespace> lan_;
  int ports_ = 0;
  Node nodes_[2];
  std::vector<std::unique_ptr<NetNamespace>> clients_ns_;
  std::vector<std::unique_ptr<FaultClient>> clients_;
  int active_ = 0;
};

// The checker itself: overlapping exclusive locks of two owners are a conflict; shared ones, one
// owner's, and back-to-back ones are not.
TEST(HaFaultChecker, FindsOverlappingConflictingLocksOnly) {
  const Clock::time_point t0{};
  auto at = [&](int ms) { return t0 + milliseconds(ms); };
  EXPECT_EQ(Conflicts({{"a", "f", true, at(0), at(10)}, {"b", "f", true, at(5), at(20)}}).size(),
            1U);
  EXPECT_EQ(Conflicts({{"a", "f", false, at(0), at(10)}, {"b", "f", true, at(5), at(20)}}).size(),
            1U);
  EXPECT_TRUE(Conflicts({{"a", "f", false, at(0), at(10)}, {"b", "f", false, at(5), at(20)}})
                  .empty());
  EXPECT_TRUE(Conflicts({{"a", "f", true, at(0), at(10)}, {"a", "f", true, at(5), at(20)}})
                  .empty());
  EXPECT_TRUE(Conflicts({{"a", "f", true, at(0), at(10)}, {"b", "f", true, at(10), at(20)}})
                  .empty());
  EXPECT_TRUE(Conflicts({{"a", "f", true, at(0), at(10)}, {"b", "g", true, at(5), at(20)}})
                  .empty());
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
  std::cout << "randomized faults: " << rounds << " rounds, NLOCKD_HA_FAULT_SEED=" << seed_
            << "\n";
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
