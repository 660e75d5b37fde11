// SPDX-License-Identifier: Apache-2.0
#include "integration/ha_topology.hpp"

#include <algorithm>
#include <atomic>
#include <iostream>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include "store/testing/store_test_util.hpp"

namespace nlockd::integration::hafault {

using std::chrono::milliseconds;
using std::chrono::seconds;
using testutil::NetNamespace;
using testutil::RunCommand;

void Ip(const std::vector<std::string>& argv) {
  auto [rc, out] = RunCommand(argv);
  if (rc != 0) {
    std::string line;
    for (const auto& arg : argv) line += arg + " ";
    throw std::runtime_error(line + "failed: " + out);
  }
}

namespace {
std::atomic<int> fixtures = 0;
}  // namespace

HaTopologyTest::HaTopologyTest(const std::string& service_prefix, bool node_addresses)
    : service_(fmt::format("{}-{}-{}.test", service_prefix, getpid(), fixtures++)),
      node_addresses_(node_addresses) {}

void HaTopologyTest::SetUp() {
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
    Plug(*node.ns, node_addresses_ ? NodeAddress(n) + "/24" : "");
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

void HaTopologyTest::TearDown() {
  StopLoad();
  for (Node& node : nodes_) {
    if (node.process) node.process->Stop(SIGKILL, seconds(10));
    // Whatever else the test ran there (keepalived and its scripts, nlockd started by a
    // resource agent) goes too.
    if (node.ns) {
      auto [rc, pids] = RunCommand({"ip", "netns", "pids", node.ns->name()});
      if (rc == 0) {
        std::istringstream lines(pids);
        for (std::string line; std::getline(lines, line);) {
          if (!line.empty()) kill(static_cast<pid_t>(std::stol(line)), SIGKILL);
        }
      }
    }
    if (!node.pg_link.empty()) RunCommand({"ip", "link", "del", node.pg_link});
  }
}

void HaTopologyTest::Plug(NetNamespace& host, const std::string& address) {
  const std::string port = fmt::format("p{}", ports_++);
  Ip({"ip", "-n", lan_->name(), "link", "add", port, "type", "veth", "peer", "name", "lan0",
      "netns", host.name()});
  Ip({"ip", "-n", lan_->name(), "link", "set", port, "master", "br0"});
  Ip({"ip", "-n", lan_->name(), "link", "set", port, "up"});
  if (!address.empty()) Ip({"ip", "-n", host.name(), "addr", "add", address, "dev", "lan0"});
  Ip({"ip", "-n", host.name(), "link", "set", "lan0", "up"});
}

void HaTopologyTest::MoveAddress(std::optional<int> from, int to) {
  const std::string cidr = std::string(kServiceAddress) + "/24";
  if (from) RunCommand({"ip", "-n", nodes_[*from].ns->name(), "addr", "del", cidr, "dev", "lan0"});
  Ip({"ip", "-n", nodes_[to].ns->name(), "addr", "add", cidr, "dev", "lan0"});
  for (const auto& client : clients_ns_) {
    RunCommand({"ip", "-n", client->name(), "neigh", "flush", "dev", "lan0"});
  }
}

bool HaTopologyTest::HasServiceAddress(int n) {
  auto [rc, out] =
      RunCommand({"ip", "-n", nodes_[n].ns->name(), "-4", "-o", "addr", "show", "dev", "lan0"});
  return rc == 0 && out.find(std::string(" ") + kServiceAddress + "/") != std::string::npos;
}

bool HaTopologyTest::WaitServiceAddressOnlyAt(int n, milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  do {
    if (HasServiceAddress(n) && !HasServiceAddress(1 - n)) return true;
    std::this_thread::sleep_for(milliseconds(50));
  } while (Clock::now() < deadline);
  return false;
}

void HaTopologyTest::SetPgLink(int n, bool up) {
  Ip({"ip", "link", "set", nodes_[n].pg_link, up ? "up" : "down"});
}

void HaTopologyTest::StartLoad() {
  for (int c = 1; c <= kClients; ++c) {
    clients_.push_back(std::make_unique<FaultClient>(
        c, kClients, clients_ns_[static_cast<size_t>(c - 1)]->name(), ClientAddress(c),
        kServiceAddress, kNlmPort, kStatdPort, service_, seed_ + static_cast<uint32_t>(c)));
  }
  for (auto& client : clients_) {
    ASSERT_TRUE(client->WaitAnchored(seconds(20)))
        << "client " << client->id() << " could not take its locks";
  }
}

void HaTopologyTest::StopLoad() {
  for (auto& client : clients_) client->Stop();
}

bool HaTopologyTest::WaitAllReclaimed(int32_t above, milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  for (auto& client : clients_) {
    if (!client->WaitReclaimed(above,
                               std::chrono::duration_cast<milliseconds>(deadline - Clock::now()))) {
      ADD_FAILURE() << "client " << client->id() << " was not notified of a state above " << above
                    << " or could not reclaim";
      return false;
    }
  }
  return true;
}

int32_t HaTopologyTest::CurrentState() {
  int32_t state = 0;
  for (auto& client : clients_) state = std::max(state, client->last_state());
  return state;
}

bool HaTopologyTest::WaitGrantsAfter(Clock::time_point since, milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    for (auto& client : clients_) {
      if (client->LastNewGrant() > since) return true;
    }
    std::this_thread::sleep_for(milliseconds(20));
  }
  return false;
}

void HaTopologyTest::StopAndCheck() {
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
  EXPECT_TRUE(conflicts.empty()) << conflicts.size()
                                 << " conflicting grants, first: " << conflicts.front();
  EXPECT_GT(grants, 0U);
  RecordProperty("grants", static_cast<int>(grants));
  std::cout << "checker: " << grants << " grants, " << reclaims << " reclaims, " << history.size()
            << " intervals, " << conflicts.size() << " conflicts\n";
}

}  // namespace nlockd::integration::hafault
