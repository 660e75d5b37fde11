// SPDX-License-Identifier: Apache-2.0
// nsm_client: calls a status monitor through rpcgen's NSM stubs (nsm_rpcgen.hpp) and prints one
// line per result; for tests that must call from another host (a network namespace).
//
//   nsm_client --server ADDR [--port N] [--tcp] OPERATION...
//
// Without --port the port is asked of the server's rpcbind. OPERATIONs (one argument each):
//   null | simu_crash
//   stat name=
//   mon|unmon  name= my_name=localhost prog=100021 vers=4 proc=16 priv0=0
//   unmon_all  my_name=localhost prog=100021 vers=4 proc=16
//   notify     name= state=
// Output: "mon res=succ|fail state=N", "stat res=... state=N", "unmon state=N",
// "unmon_all state=N", "null ok", "simu_crash ok", "notify ok", or "<verb> rpc_error <text>".
// Exit status 0 when every call got a reply, 2 when one did not, 1 on a usage error.
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "integration/nsm_rpcgen.hpp"
#include "integration/tools/tool_format.hpp"

namespace nlockd::integration::tools {
namespace {

NsmMyId IdFrom(const Operation& op) {
  NsmMyId id;
  id.my_name = op.Get("my_name", "localhost");
  id.my_prog = static_cast<int32_t>(op.GetInt("prog", 100021));
  id.my_vers = static_cast<int32_t>(op.GetInt("vers", 4));
  id.my_proc = static_cast<int32_t>(op.GetInt("proc", 16));
  return id;
}

std::string Res(const NsmStatRes& res) {
  return std::string("res=") + (res.succeeded ? "succ" : "fail") +
         " state=" + std::to_string(res.state);
}

// One operation: the line to print and whether a reply came; nullopt for a usage error.
std::optional<std::pair<std::string, bool>> Perform(NsmRpcgenClient& client, const Operation& op) {
  const std::string& verb = op.verb;
  auto fail = [&] { return std::make_pair(verb + " rpc_error " + client.error(), false); };
  if (verb == "null") return client.Null() ? std::make_pair(verb + " ok", true) : fail();
  if (verb == "simu_crash") {
    return client.SimuCrash() ? std::make_pair(verb + " ok", true) : fail();
  }
  if (verb == "notify") {
    bool ok = client.Notify(op.Get("name"), static_cast<int32_t>(op.GetInt("state", 1)));
    return ok ? std::make_pair(verb + " ok", true) : fail();
  }
  if (verb == "stat") {
    auto res = client.Stat(op.Get("name"));
    return res ? std::make_pair(verb + " " + Res(*res), true) : fail();
  }
  if (verb == "mon") {
    std::array<uint8_t, 16> priv{};
    priv[0] = static_cast<uint8_t>(op.GetInt("priv0", 0));
    auto res = client.Mon(op.Get("name"), IdFrom(op), priv);
    return res ? std::make_pair(verb + " " + Res(*res), true) : fail();
  }
  if (verb == "unmon") {
    auto state = client.Unmon(op.Get("name"), IdFrom(op));
    return state ? std::make_pair(verb + " state=" + std::to_string(*state), true) : fail();
  }
  if (verb == "unmon_all") {
    auto state = client.UnmonAll(IdFrom(op));
    return state ? std::make_pair(verb + " state=" + std::to_string(*state), true) : fail();
  }
  return std::nullopt;
}

}  // namespace
}  // namespace nlockd::integration::tools

int main(int argc, char** argv) {
  using namespace nlockd::integration;
  std::string server;
  uint16_t port = 0;
  bool tcp = false;
  std::vector<std::string> operations;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--server" && i + 1 < argc) {
      server = argv[++i];
    } else if (arg == "--port" && i + 1 < argc) {
      port = static_cast<uint16_t>(std::atoi(argv[++i]));
    } else if (arg == "--tcp") {
      tcp = true;
    } else {
      operations.push_back(arg);
    }
  }
  if (server.empty() || operations.empty()) {
    std::cerr << "usage: nsm_client --server ADDR [--port N] [--tcp] OPERATION...\n";
    return 1;
  }
  NsmRpcgenClient client(server, port, tcp);
  if (!client.connected()) {
    std::cout << "connect rpc_error " << client.error() << std::endl;
    return 2;
  }
  int status = 0;
  for (const auto& text : operations) {
    auto op = tools::ParseOperation(text);
    auto result = op ? tools::Perform(client, *op) : std::nullopt;
    if (!result) {
      std::cerr << "bad operation: " << text << "\n";
      return 1;
    }
    std::cout << result->first << std::endl;
    if (!result->second) status = 2;
  }
  return status;
}
