#pragma once

// Test hosts for the NSM tests: a server host running nlockd and client hosts 1..N, each its
// own network namespace with its own rpcbind and /run, the server joined to client n by a veth
// pair (10.198.n.1 on the server side, 10.198.n.2 on the client side). Like NlmHosts, but any
// program (nsm_client, nlm_client, Debian's sm-notify) can be run on a client host.

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "integration/nlockd_process.hpp"
#include "testutil/netns.hpp"
#include "testutil/subprocess.hpp"

namespace nlockd::integration {

class NsmHosts {
 public:
  explicit NsmHosts(int clients);
  ~NsmHosts();
  NsmHosts(const NsmHosts&) = delete;
  NsmHosts& operator=(const NsmHosts&) = delete;

  // nlockd on the server host: every address, port 4045, no grace, registered with the server
  // host's rpcbind; false if it did not come up and register.
  bool StartNlockd(const std::vector<std::string>& extra_args);
  NlockdProcess& nlockd() { return *nlockd_; }

  static std::string ServerAddress(int client) { return "10.198." + std::to_string(client) + ".1"; }
  static std::string ClientAddress(int client) { return "10.198." + std::to_string(client) + ".2"; }

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
  bool WaitForRpcbind(const testutil::NetNamespace& host);
  static std::pair<int, std::vector<std::string>> Lines(std::pair<int, std::string> run);

  std::unique_ptr<testutil::NetNamespace> server_;
  std::vector<std::unique_ptr<testutil::NetNamespace>> clients_;
  std::vector<std::unique_ptr<testutil::Subprocess>> processes_;
  std::unique_ptr<NlockdProcess> nlockd_;
};

}  // namespace nlockd::integration
