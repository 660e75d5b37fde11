// SPDX-License-Identifier: Apache-2.0
#pragma once

// The network of the HA tests that run real processes in network namespaces (under
// scripts/with-postgres.sh, as root):
//   - nodes A and B and client hosts 1..3, each a network namespace of its own;
//   - a "lan" namespace holding a bridge that every host is plugged into as "lan0"; the clients
//     have 10.232.0.1N/24 there, the nodes 10.232.0.1 and .2 when the test asks for them (VRRP
//     needs them), none otherwise; the service address 10.232.0.100/24 is on the active node's
//     port, put there by the test or by what the test runs (keepalived, IPaddr2);
//   - each node reaches PostgreSQL (in the namespace the test runs in) over a veth pair of its
//     own, 10.231.K.2 -> 10.231.K.1; setting the test's end of that pair down cuts the node off
//     from the database while the clients still reach it.
// The fixture also runs the client hosts' load (ha_fault_clients.hpp) and checks what they saw.

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "integration/ha_fault_clients.hpp"
#include "testutil/netns.hpp"
#include "testutil/subprocess.hpp"

namespace nlockd::integration::hafault {

// Runs argv (an `ip` command); throws with its output if it fails.
void Ip(const std::vector<std::string>& argv);

class HaTopologyTest : public ::testing::Test {
 protected:
  struct Node {
    std::unique_ptr<testutil::NetNamespace> ns;
    std::string pg_link;                            // Our end of the node's link to PostgreSQL.
    std::string store_uri;                          // The test database, reached over that link.
    std::unique_ptr<testutil::Subprocess> process;  // nlockd, when the test starts it itself.
  };

  // `service_prefix` names the service (unique per fixture); `node_addresses` gives the nodes
  // addresses of their own on the lan.
  HaTopologyTest(const std::string& service_prefix, bool node_addresses);

  void SetUp() override;
  void TearDown() override;

  static std::string ClientAddress(int c) { return "10.232.0." + std::to_string(10 + c); }
  static std::string NodeAddress(int n) { return "10.232.0." + std::to_string(1 + n); }
  static char NodeLetter(int n) { return n == 0 ? 'A' : 'B'; }

  // The service address leaves node `from` (if any) and arrives at node `to`; the clients drop
  // their neighbour entry for it.
  void MoveAddress(std::optional<int> from, int to);
  // Whether the service address is on node `n`'s lan port.
  bool HasServiceAddress(int n);
  // Waits until the service address is on node `n` and on no other node.
  bool WaitServiceAddressOnlyAt(int n, std::chrono::milliseconds timeout);
  void SetPgLink(int n, bool up);

  // The clients take their anchors through the service address and then lock and unlock.
  void StartLoad();
  void StopLoad();
  // Every client's status monitor got a state above `above` from the service and it reclaimed.
  bool WaitAllReclaimed(int32_t above, std::chrono::milliseconds timeout);
  int32_t CurrentState();
  // New exclusive locks are granted again (grace over for them) after `since`.
  bool WaitGrantsAfter(Clock::time_point since, std::chrono::milliseconds timeout);
  // Stops the clients, has each verify with another owner's TEST that the server still holds
  // every lock it believes it holds, and checks the history: no conflicting grants, no lost
  // locks.
  void StopAndCheck();

  static constexpr const char* kServiceAddress = "10.232.0.100";
  static constexpr uint16_t kNlmPort = 4045;
  static constexpr uint16_t kStatdPort = 4999;
  static constexpr int kClients = 3;

  const std::string service_;
  const bool node_addresses_;
  uint32_t seed_ = 1;
  Node nodes_[2];

 private:
  // Plugs `host` into the lan bridge as "lan0", with `address` (CIDR) unless empty.
  void Plug(testutil::NetNamespace& host, const std::string& address);

  std::unique_ptr<testutil::NetNamespace> lan_;
  int ports_ = 0;
  std::vector<std::unique_ptr<testutil::NetNamespace>> clients_ns_;
  std::vector<std::unique_ptr<FaultClient>> clients_;
};

}  // namespace nlockd::integration::hafault
