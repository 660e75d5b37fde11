#include "integration/nlm_hosts.hpp"

#include <regex>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

namespace nlockd::integration {

using testutil::NetNamespace;
using testutil::RunCommand;
using testutil::Subprocess;

NlmHosts::NlmHosts(int clients) {
  NetNamespace::RemoveStale();
  server_ = std::make_unique<NetNamespace>("nlmsrv");
  for (int n = 1; n <= clients; ++n) {
    clients_.push_back(std::make_unique<NetNamespace>("nlmcl" + std::to_string(n)));
    server_->LinkTo(*clients_.back(), ServerAddress(n) + "/24", ClientAddress(n) + "/24");
  }
  // Each host's rpcbind, with that host's /run; started together, then awaited.
  rpcbinds_.push_back(std::make_unique<Subprocess>(server_->WrapHost({"rpcbind", "-f"})));
  for (const auto& client : clients_) {
    rpcbinds_.push_back(std::make_unique<Subprocess>(client->WrapHost({"rpcbind", "-f"})));
  }
  if (!WaitForRpcbind(*server_)) throw std::runtime_error("the server's rpcbind did not start");
  for (const auto& client : clients_) {
    if (!WaitForRpcbind(*client)) throw std::runtime_error("a client's rpcbind did not start");
  }
}

NlmHosts::~NlmHosts() {
  // Stop nlockd first so that it unregisters while its rpcbind still runs.
  if (nlockd_) nlockd_->Stop();
}

bool NlmHosts::WaitForRpcbind(const NetNamespace& host) {
  // rpcbind prints nothing when ready: ask it until it answers (bounded).
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    if (RunCommand(host.WrapHost({"rpcinfo", "-p", "127.0.0.1"})).first == 0) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

bool NlmHosts::StartNlockd(const std::vector<std::string>& extra_args) {
  std::vector<std::string> args{"--listen", "0.0.0.0:4045", "--grace", "0"};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  nlockd_ = std::make_unique<NlockdProcess>(args, server_.get());
  if (nlockd_->port() == 0) return false;
  auto registered = nlockd_->process().WaitForLine(std::regex("registered 4 programs with rpcbind"),
                                                   std::chrono::seconds(20));
  if (!registered) ADD_FAILURE() << "nlockd did not register:\n" << nlockd_->process().output();
  return registered.has_value();
}

NlmHosts::ClientRun NlmHosts::RunClient(int client, const std::vector<std::string>& operations,
                                        uint32_t version, bool tcp) {
  std::vector<std::string> argv{NLM_CLIENT_BINARY, "--server", ServerAddress(client), "--version",
                                std::to_string(version)};
  if (tcp) argv.push_back("--tcp");
  argv.insert(argv.end(), operations.begin(), operations.end());
  auto [status, output] = RunCommand(clients_.at(static_cast<size_t>(client - 1))->WrapHost(argv));
  ClientRun run;
  run.status = status;
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);) run.lines.push_back(line);
  return run;
}

Subprocess* NlmHosts::StartCallbackServer(int client, const std::vector<std::string>& args) {
  std::vector<std::string> argv{NLM_CALLBACK_SERVER_BINARY};
  argv.insert(argv.end(), args.begin(), args.end());
  auto& host = *clients_.at(static_cast<size_t>(client - 1));
  callback_servers_.push_back(std::make_unique<Subprocess>(host.WrapHost(argv)));
  Subprocess* server = callback_servers_.back().get();
  if (!server->WaitForLine(std::regex(R"(^ready udp=\d+ tcp=\d+)"), std::chrono::seconds(20))) {
    ADD_FAILURE() << "the callback server did not start:\n" << server->output();
    return nullptr;
  }
  return server;
}

}  // namespace nlockd::integration
