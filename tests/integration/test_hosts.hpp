// SPDX-License-Identifier: Apache-2.0
#pragma once

// A small network of test hosts: a server host running nlockd and client hosts 1..N, each its
// own network namespace with its own rpcbind and /run, the server joined to client n by a veth
// pair of its own (10.S.n.1/24 on the server side, 10.S.n.2/24 on the client side, S chosen by
// the test family so that families never share namespaces). Nothing leaves these namespaces.
// Any program (the rpcgen test clients, Debian's sm-notify) runs on any host.

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "integration/nlockd_process.hpp"
#include "testutil/netns.hpp"
#include "testutil/subprocess.hpp"

namespace nlockd::integration {

class TestHosts {
 public:
  // Creates the namespaces "<prefix>srv" and "<prefix>cl<n>", the links and the rpcbinds;
  // throws when a step fails. StartNlockd runs `nlockd_binary` (the test's NLOCKD_BINARY).
  TestHosts(std::string nlockd_binary, const std::string& prefix, int subnet, int clients);
  ~TestHosts();
  TestHosts(const TestHosts&) = delete;
  TestHosts& operator=(const TestHosts&) = delete;

  // Starts nlockd on the server host (listening on every server address, port 4045, no grace,
  // registered with the server host's rpcbind) with `extra_args`; false if it did not come up
  // and register.
  bool StartNlockd(const std::vector<std::string>& extra_args);
  NlockdProcess& nlockd() { return *nlockd_; }

  std::string ServerAddressOf(int client) const { return Address(client, 1); }
  std::string ClientAddressOf(int client) const { return Address(client, 2); }

  // Runs argv on client host `client` to completion: (exit status, output lines).
  std::pair<int, std::vector<std::string>> Run(
      int client, const std::vector<std::string>& argv,
      std::chrono::milliseconds timeout = std::chrono::seconds(30));
  // Starts argv on client host `client`; it is stopped with the hosts.
  testutil::Subprocess* Start(int client, const std::vector<std::string>& argv);
  // Runs argv on the server host to completion (a local caller of nlockd: loopback).
  std::pair<int, std::vector<std::string>> RunOnServer(const std::vector<std::string>& argv);
  // Starts argv on the server host (beside nlockd, with the server's rpcbind).
  testutil::Subprocess* StartOnServer(const std::vector<std::string>& argv);

 private:
  std::string Address(int client, int side) const {
    return "10." + std::to_string(subnet_) + "." + std::to_string(client) + "." +
           std::to_string(side);
  }
  testutil::NetNamespace& Client(int client) {
    return *clients_.at(static_cast<size_t>(client - 1));
  }

  std::string nlockd_binary_;
  int subnet_;
  // Declaration order is teardown order reversed: processes go before their namespaces.
  std::unique_ptr<testutil::NetNamespace> server_;
  std::vector<std::unique_ptr<testutil::NetNamespace>> clients_;
  std::vector<std::unique_ptr<testutil::Subprocess>> processes_;
  std::unique_ptr<NlockdProcess> nlockd_;
};

// Lays out `dir` as a client's rpc.statd leaves it before a reboot: sm/ holds one record (in
// nfs-utils' format) saying it monitored `server_address` as `client_name`, `state` its NSM
// state. Returns the sm-notify command that, run on the client as at boot, notifies the server.
std::vector<std::string> PrepareRebootNotify(const std::string& dir,
                                             const std::string& server_address,
                                             const std::string& client_name, int32_t state);

}  // namespace nlockd::integration
