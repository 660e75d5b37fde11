// SPDX-License-Identifier: Apache-2.0
#include "integration/nlm_hosts.hpp"

#include <regex>

#include <gtest/gtest.h>

namespace nlockd::integration {

NlmHosts::ClientRun NlmHosts::RunClient(int client, const std::vector<std::string>& operations,
                                        uint32_t version, bool tcp) {
  std::vector<std::string> argv{NLM_CLIENT_BINARY, "--server", ServerAddress(client), "--version",
                                std::to_string(version)};
  if (tcp) argv.push_back("--tcp");
  argv.insert(argv.end(), operations.begin(), operations.end());
  auto [status, lines] = Run(client, argv);
  return ClientRun{status, std::move(lines)};
}

testutil::Subprocess* NlmHosts::StartCallbackServer(int client,
                                                    const std::vector<std::string>& args) {
  std::vector<std::string> argv{NLM_CALLBACK_SERVER_BINARY};
  argv.insert(argv.end(), args.begin(), args.end());
  testutil::Subprocess* server = Start(client, argv);
  if (!server->WaitForLine(std::regex(R"(^ready udp=\d+ tcp=\d+)"), std::chrono::seconds(20))) {
    ADD_FAILURE() << "the callback server did not start:\n" << server->output();
    return nullptr;
  }
  return server;
}

}  // namespace nlockd::integration
