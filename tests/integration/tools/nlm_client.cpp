// SPDX-License-Identifier: Apache-2.0
// nlm_client: one NLM client host's lock manager, reduced to what a test asks of it. Performs
// the operations given on the command line, in order, through rpcgen's stubs, and prints one
// line per result. Runs inside a client host's network namespace.
//
//   nlm_client --server ADDR [--port N] [--version 1|3|4] [--tcp] OPERATION...
//
// Without --port the server's NLM port is asked of the server's rpcbind (clnt_create), as a
// client kernel does. An OPERATION is one argument, a verb and key=value fields:
//   null
//   test|lock|nm_lock|cancel|unlock  fh= caller= oh= svid= offset= length= exclusive=1
//                                    block=0 reclaim=0 state=1 cookie=
//   share|unshare                    fh= caller= oh= mode= access= reclaim=0 cookie=
//   free_all                         name= state=
//   granted_res                      cookie_hex= stat=  (the answer to a GRANTED_MSG)
//   test_msg|lock_msg|cancel_msg|unlock_msg   as their synchronous forms; the result comes
//                                    back to this host's NLM (see nlm_callback_server)
// Output: "<verb> stat=<status>" (test adds the holder when denied; share adds sequence=;
// _MSG forms print "<verb> sent"), or
// "<verb> rpc_error=<status> <text>". Exit status 0 when every call got a reply, 2 when one did
// not, 1 on a usage error.
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "integration/nlm_rpcgen.hpp"
#include "integration/raw_rpc.hpp"
#include "integration/tools/tool_format.hpp"

namespace nlockd::integration::tools {
namespace {

NlmLock LockFrom(const Operation& op) {
  NlmLock lock;
  lock.caller_name = op.Get("caller", "client");
  lock.fh = op.Get("fh", "file");
  lock.oh = op.Get("oh", "owner");
  lock.svid = static_cast<int32_t>(op.GetInt("svid", 1));
  lock.offset = static_cast<uint64_t>(op.GetInt("offset", 0));
  lock.length = static_cast<uint64_t>(op.GetInt("length", 0));
  return lock;
}

NlmShare ShareFrom(const Operation& op) {
  NlmShare share;
  share.caller_name = op.Get("caller", "client");
  share.fh = op.Get("fh", "file");
  share.oh = op.Get("oh", "owner");
  share.mode = static_cast<int32_t>(op.GetInt("mode", 0));
  share.access = static_cast<int32_t>(op.GetInt("access", 0));
  return share;
}

std::string Failure(const std::string& verb, const NlmRpcgenClient& client) {
  return verb + " rpc_error=" + std::to_string(client.last_status()) + " " + client.error();
}

// Runs one operation; returns the line to print and whether a reply came.
std::pair<std::string, bool> Run(NlmRpcgenClient& client, const Operation& op) {
  const std::string cookie = op.Get("cookie", op.verb);
  const bool exclusive = op.GetInt("exclusive", 1) != 0;
  if (op.verb == "null") {
    bool ok = client.Null();
    return {ok ? "null ok" : Failure(op.verb, client), ok};
  }
  if (op.verb == "test") {
    auto reply = client.Test(LockFrom(op), exclusive, cookie);
    if (!reply) return {Failure(op.verb, client), false};
    std::string line = "test stat=" + std::string(ToString(reply->stat));
    if (reply->holder) line += " " + Describe(*reply->holder);
    return {line, true};
  }
  if (op.verb == "lock" || op.verb == "nm_lock") {
    NlmLockFlags flags{exclusive, op.GetInt("block", 0) != 0, op.GetInt("reclaim", 0) != 0,
                       static_cast<int32_t>(op.GetInt("state", 1))};
    auto reply = op.verb == "lock" ? client.Lock(LockFrom(op), flags, cookie)
                                   : client.NmLock(LockFrom(op), flags, cookie);
    if (!reply) return {Failure(op.verb, client), false};
    return {op.verb + " stat=" + std::string(ToString(reply->stat)), true};
  }
  if (op.verb == "cancel") {
    auto reply = client.Cancel(LockFrom(op), exclusive, op.GetInt("block", 1) != 0, cookie);
    if (!reply) return {Failure(op.verb, client), false};
    return {"cancel stat=" + std::string(ToString(reply->stat)), true};
  }
  if (op.verb == "unlock") {
    auto reply = client.Unlock(LockFrom(op), cookie);
    if (!reply) return {Failure(op.verb, client), false};
    return {"unlock stat=" + std::string(ToString(reply->stat)), true};
  }
  if (op.verb == "share" || op.verb == "unshare") {
    auto reply = op.verb == "share"
                     ? client.Share(ShareFrom(op), op.GetInt("reclaim", 0) != 0, cookie)
                     : client.Unshare(ShareFrom(op), cookie);
    if (!reply) return {Failure(op.verb, client), false};
    return {op.verb + " stat=" + std::string(ToString(reply->stat)) +
                " sequence=" + std::to_string(reply->sequence),
            true};
  }
  if (op.verb == "test_msg" || op.verb == "lock_msg" || op.verb == "cancel_msg" ||
      op.verb == "unlock_msg") {
    NlmLock lock = LockFrom(op);
    bool ok = false;
    if (op.verb == "test_msg") ok = client.TestMsg(lock, exclusive, cookie);
    if (op.verb == "lock_msg") {
      NlmLockFlags flags{exclusive, op.GetInt("block", 0) != 0, op.GetInt("reclaim", 0) != 0,
                         static_cast<int32_t>(op.GetInt("state", 1))};
      ok = client.LockMsg(lock, flags, cookie);
    }
    if (op.verb == "cancel_msg") {
      ok = client.CancelMsg(lock, exclusive, op.GetInt("block", 1) != 0, cookie);
    }
    if (op.verb == "unlock_msg") ok = client.UnlockMsg(lock, cookie);
    return {ok ? op.verb + " sent" : Failure(op.verb, client), ok};
  }
  if (op.verb == "granted_res") {
    // As a client's NLM answers a GRANTED_MSG: the cookie in hex, stat as a number.
    std::string hex = op.Get("cookie_hex");
    std::string cookie_bytes;
    for (size_t i = 0; i + 1 < hex.size(); i += 2) {
      cookie_bytes.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
    }
    auto stat = static_cast<NlmStat>(op.GetInt("stat", 0));
    bool ok = client.GrantedRes(NlmReply{cookie_bytes, stat});
    return {ok ? "granted_res sent" : Failure(op.verb, client), ok};
  }
  if (op.verb == "free_all") {
    bool ok = client.FreeAll(op.Get("name"), static_cast<int32_t>(op.GetInt("state", 0)));
    return {ok ? "free_all ok" : Failure(op.verb, client), ok};
  }
  return {op.verb + " usage_error=unknown-verb", false};
}

int Main(int argc, char** argv) {
  std::string server;
  uint16_t port = 0;
  uint32_t version = 4;
  bool tcp = false;
  std::vector<Operation> operations;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--server" && i + 1 < argc) {
      server = argv[++i];
    } else if (arg == "--port" && i + 1 < argc) {
      port = static_cast<uint16_t>(std::stoi(argv[++i]));
    } else if (arg == "--version" && i + 1 < argc) {
      version = static_cast<uint32_t>(std::stoul(argv[++i]));
    } else if (arg == "--tcp") {
      tcp = true;
    } else if (auto op = ParseOperation(arg)) {
      operations.push_back(*op);
    } else {
      std::cerr << "nlm_client: cannot parse '" << arg << "'\n";
      return 1;
    }
  }
  if (server.empty() || operations.empty()) {
    std::cerr << "usage: nlm_client --server ADDR [--port N] [--version 1|3|4] [--tcp] OP...\n";
    return 1;
  }
  auto client = port != 0 ? NlmRpcgenClient::Connect(version, tcp, Ipv4(server, port))
                          : NlmRpcgenClient::ConnectViaRpcbind(version, tcp, server);
  if (!client) {
    std::cout << "connect failed: " << NlmRpcgenClient::CreateError() << std::endl;
    return 2;
  }
  for (const auto& op : operations) {
    auto [line, ok] = Run(*client, op);
    std::cout << line << std::endl;
    if (!ok) return 2;
  }
  return 0;
}

}  // namespace
}  // namespace nlockd::integration::tools

int main(int argc, char** argv) {
  try {
    return nlockd::integration::tools::Main(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "nlm_client: " << e.what() << "\n";
    return 1;
  }
}
