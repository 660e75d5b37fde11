// SPDX-License-Identifier: Apache-2.0
#include "integration/test_hosts.hpp"

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <utility>

#include <gtest/gtest.h>

namespace nlockd::integration {

using testutil::NetNamespace;
using testutil::RunCommand;
using testutil::Subprocess;

namespace {

std::pair<int, std::vector<std::string>> Lines(std::pair<int, std::string> run) {
  std::vector<std::string> lines;
  std::istringstream stream(run.second);
  for (std::string line; std::getline(stream, line);) lines.push_back(line);
  return {run.first, lines};
}

}  // namespace

TestHosts::TestHosts(std::string nlockd_binary, const std::string& prefix, int subnet, int clients)
    : nlockd_binary_(std::move(nlockd_binary)), subnet_(subnet) {
  NetNamespace::RemoveStale();
  server_ = std::make_unique<NetNamespace>(prefix + "srv");
  for (int n = 1; n <= clients; ++n) {
    clients_.push_back(std::make_unique<NetNamespace>(prefix + "cl" + std::to_string(n)));
    server_->LinkTo(*clients_.back(), ServerAddressOf(n) + "/24", ClientAddressOf(n) + "/24");
  }
  // Each host's rpcbind, with that host's /run; started together, then awaited.
  processes_.push_back(std::make_unique<Subprocess>(server_->WrapHost({"rpcbind", "-f"})));
  for (const auto& client : clients_) {
    processes_.push_back(std::make_unique<Subprocess>(client->WrapHost({"rpcbind", "-f"})));
  }
  if (!server_->WaitForRpcbind()) throw std::runtime_error("the server's rpcbind did not start");
  for (const auto& client : clients_) {
    if (!client->WaitForRpcbind()) throw std::runtime_error("a client's rpcbind did not start");
  }
}

TestHosts::~TestHosts() {
  // Stop nlockd first so that it unregisters while its rpcbind still runs.
  if (nlockd_) nlockd_->Stop();
}

bool TestHosts::StartNlockd(const std::vector<std::string>& extra_args) {
  std::vector<std::string> args{"--listen", "0.0.0.0:4045", "--grace", "0"};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  nlockd_ = std::make_unique<NlockdProcess>(nlockd_binary_, args, server_.get());
  if (nlockd_->port() == 0) return false;
  const bool registered =
      nlockd_->process().LoggedOrWaitFor(std::regex("registered \\d+ programs with rpcbind"));
  if (!registered) ADD_FAILURE() << "nlockd did not register:\n" << nlockd_->process().output();
  return registered;
}

std::pair<int, std::vector<std::string>> TestHosts::Run(int client,
                                                        const std::vector<std::string>& argv,
                                                        std::chrono::milliseconds timeout) {
  return Lines(RunCommand(Client(client).WrapHost(argv), timeout));
}

Subprocess* TestHosts::Start(int client, const std::vector<std::string>& argv) {
  processes_.push_back(std::make_unique<Subprocess>(Client(client).WrapHost(argv)));
  return processes_.back().get();
}

std::pair<int, std::vector<std::string>> TestHosts::RunOnServer(
    const std::vector<std::string>& argv) {
  return Lines(RunCommand(server_->WrapHost(argv)));
}

Subprocess* TestHosts::StartOnServer(const std::vector<std::string>& argv) {
  processes_.push_back(std::make_unique<Subprocess>(server_->WrapHost(argv)));
  return processes_.back().get();
}

std::vector<std::string> PrepareRebootNotify(const std::string& dir,
                                             const std::string& server_address,
                                             const std::string& client_name, int32_t state) {
  std::filesystem::create_directories(dir + "/sm");
  std::filesystem::create_directories(dir + "/sm.bak");
  std::ofstream(dir + "/sm/" + server_address)
      << "0100007f 000186b5 00000004 00000010 " << std::string(32, '0') << " " << server_address
      << " " << client_name << "\n";
  std::ofstream(dir + "/state", std::ios::binary)
      .write(reinterpret_cast<const char*>(&state), sizeof state);
  return {"sm-notify", "-f", "-d", "-n", "-P", dir, "-m", "1"};
}

}  // namespace nlockd::integration
