// SPDX-License-Identifier: Apache-2.0
// Uses only the installed headers and library: starts a LockService on a free port, sends it
// an NLM NULL and an NSM SM_STAT through HandleCall, takes a lock and reads it back through the
// admin view; exits 0 when every answer is right.
#include <cstdio>
#include <future>
#include <string>
#include <vector>

#include <nlockd/nlockd.hpp>

static int failures = 0;

static void Check(bool ok, const char* what) {
  std::printf("%s %s\n", ok ? "ok  " : "FAIL", what);
  if (!ok) ++failures;
}

static nlockd::RpcReply Call(nlockd::LockService& service, uint32_t program, uint32_t version,
                             uint32_t procedure, const std::vector<uint8_t>& args) {
  nlockd::RpcCall call;
  call.xid = 42;
  call.program = program;
  call.version = version;
  call.procedure = procedure;
  call.transport = nlockd::Transport::kUdp;
  call.peer_address = "127.0.0.1";
  call.peer_port = 1000;
  call.args = args;
  std::promise<nlockd::RpcReply> reply;
  service.HandleCall(call, [&reply](nlockd::RpcReply r) { reply.set_value(std::move(r)); });
  return reply.get_future().get();
}

int main() {
  std::printf("libnlockd %s\n", NLOCKD_VERSION_STRING);
  nlockd::Options options;
  options.store = "memory:";
  options.grace = std::chrono::seconds(0);
  options.rpcbind_register = false;
  nlockd::LockService service(options);
  service.Start();

  nlockd::RpcReply null = Call(service, nlockd::kNlmProgram, 4, 0, {});
  Check(null.send && null.accept_stat == 0u, "NLM4 NULL is answered SUCCESS");

  // SM_STAT(mon_name "x"): res_stat stat_succ (0) and the state number.
  std::vector<uint8_t> name{0, 0, 0, 1, 'x', 0, 0, 0};
  nlockd::RpcReply stat = Call(service, nlockd::kNsmProgram, 1, 1, name);
  Check(stat.send && stat.accept_stat == 0u && stat.message.size() == stat.results_offset + 8,
        "SM_STAT is answered with a result and a state");

  nlockd::RpcReply unknown = Call(service, 99, 1, 0, {});
  Check(unknown.send && unknown.accept_stat == 1u, "another program gets PROG_UNAVAIL");

  std::promise<nlockd::LockAnswer> locked;
  service.Lock({"fh-1", {"host-a", 1, "owner"}, {0, 10}, true, false},
               [&locked](nlockd::LockAnswer answer) { locked.set_value(answer); });
  Check(locked.get_future().get().result == nlockd::LockResult::kGranted, "a local lock");

  nlockd::AdminResponse locks = service.HandleAdminRequest({"GET", "/api/v1/locks", "", ""});
  Check(locks.status == 200 && locks.body.find("\"total\":1") != std::string::npos,
        "the admin view lists it");
  Check(service.MetricsText().find("nlm_locks_held") != std::string::npos, "metrics text");

  service.Shutdown();
  return failures == 0 ? 0 : 1;
}
