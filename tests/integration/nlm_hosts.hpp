#pragma once

// A small network of test hosts for the NLM tests that need callbacks or several client
// addresses: a server host running nlockd and client hosts 1..N, each its own network
// namespace with its own rpcbind, the server joined to client n by a veth pair of its own
// (10.199.n.1/24 on the server side, 10.199.n.2/24 on the client side). Nothing leaves these
// namespaces. Client hosts act through the nlm_client tool and take callbacks with the
// nlm_callback_server tool, both run inside their namespace.

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "integration/nlockd_process.hpp"
#include "testutil/netns.hpp"
#include "testutil/subprocess.hpp"

namespace nlockd::integration {

class NlmHosts {
 public:
  // Creates the namespaces, links and rpcbinds; throws when a step fails.
  explicit NlmHosts(int clients);
  ~NlmHosts();
  NlmHosts(const NlmHosts&) = delete;
  NlmHosts& operator=(const NlmHosts&) = delete;

  // Starts nlockd on the server host (listening on every server address, port 4045, no
  // grace, registered with the server host's rpcbind) with `extra_args`; false if it did not
  // come up and register.
  bool StartNlockd(const std::vector<std::string>& extra_args);
  NlockdProcess& nlockd() { return *nlockd_; }

  static std::string ServerAddress(int client) { return "10.199." + std::to_string(client) + ".1"; }
  static std::string ClientAddress(int client) { return "10.199." + std::to_string(client) + ".2"; }

  struct ClientRun {
    int status = -1;
    std::vector<std::string> lines;
  };
  // Runs nlm_client on client host `client` with `operations` against the server, which it
  // finds through the server's rpcbind.
  ClientRun RunClient(int client, const std::vector<std::string>& operations, uint32_t version = 4,
                      bool tcp = false);

  // Starts nlm_callback_server on client host `client` and waits until it registered with that
  // host's rpcbind; nullptr (with the reason added as a test failure) if it did not.
  testutil::Subprocess* StartCallbackServer(int client, const std::vector<std::string>& args = {});

 private:
  bool WaitForRpcbind(const testutil::NetNamespace& host);

  // Declaration order is teardown order reversed: processes go before their namespaces.
  std::unique_ptr<testutil::NetNamespace> server_;
  std::vector<std::unique_ptr<testutil::NetNamespace>> clients_;
  std::vector<std::unique_ptr<testutil::Subprocess>> rpcbinds_;
  std::vector<std::unique_ptr<testutil::Subprocess>> callback_servers_;
  std::unique_ptr<NlockdProcess> nlockd_;
};

}  // namespace nlockd::integration
