// SPDX-License-Identifier: Apache-2.0
#pragma once

// Test hosts for the NLM tests that need callbacks or several client addresses (TestHosts on
// 10.199.n.0/24). Client hosts act through the nlm_client tool and take callbacks with the
// nlm_callback_server tool, both run inside their namespace.

#include <cstdint>
#include <string>
#include <vector>

#include "integration/test_hosts.hpp"

namespace nlockd::integration {

class NlmHosts : public TestHosts {
 public:
  explicit NlmHosts(int clients) : TestHosts(NLOCKD_BINARY, "nlm", 199, clients) {}

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
};

}  // namespace nlockd::integration
