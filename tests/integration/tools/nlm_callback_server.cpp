// SPDX-License-Identifier: Apache-2.0
// nlm_callback_server: a client host's NLM service as a server's GRANTED callbacks see it.
// Registers NLM versions 1, 3 and 4 over UDP and TCP with this host's rpcbind (libtirpc's
// svc_register, which calls pmap_set) and serves:
//   NULL;
//   GRANTED      prints "GRANTED version=V ..." and answers nlm_res / nlm4_res GRANTED (or
//                what --answer says);
//   GRANTED_MSG  answers with the empty reply, prints "GRANTED_MSG version=V ...", then calls
//                GRANTED_RES on the caller's NLM, whose port it asks of the caller's rpcbind,
//                and prints "GRANTED_RES sent port=P" or "GRANTED_RES failed ...".
//   TEST_RES, LOCK_RES, CANCEL_RES, UNLOCK_RES
//                prints "<NAME> version=V stat=S ..." and answers with the empty reply.
// Prints "ready udp=P tcp=P" once registered. Runs inside a client host's network namespace,
// with that host's /run (so that registration reaches that host's rpcbind only).
//
//   nlm_callback_server [--answer granted|denied|none|grace-once]
// (none: GRANTED gets no reply and GRANTED_MSG no GRANTED_RES, as from a client that hung;
// grace-once: the first grant is answered DENIED_GRACE_PERIOD, later ones GRANTED.)
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>

#include <arpa/inet.h>
#include <rpc/pmap_clnt.h>
#include <rpc/rpc.h>

#include "integration/nlm_rpcgen.hpp"
#include "integration/tools/tool_format.hpp"

namespace nlockd::integration::tools {
namespace {

NlmStat answer = NlmStat::kGranted;
bool withhold = false;    // --answer none: no reply to GRANTED, no GRANTED_RES for GRANTED_MSG.
bool grace_once = false;  // --answer grace-once: the first answer is DENIED_GRACE_PERIOD.

// The status to answer a grant with.
NlmStat Answer() {
  if (grace_once) {
    grace_once = false;
    return NlmStat::kDeniedGracePeriod;
  }
  return answer;
}

bool_t XdrNothing(XDR*, ...) { return TRUE; }

std::string Describe(uint32_t version, const NlmGrantedArgs& args) {
  return "version=" + std::to_string(version) + " " + tools::Describe(args.lock) +
         " exclusive=" + (args.exclusive ? "1" : "0") + " fh=" + args.lock.fh +
         " cookie=" + Hex(args.cookie);
}

// Sends GRANTED_RES for `args` to the NLM of the host that called us.
void SendGrantedRes(uint32_t version, SVCXPRT* transport, const NlmGrantedArgs& args) {
  sockaddr_in server{};
  const netbuf* caller = svc_getrpccaller(transport);
  if (caller->len < sizeof server ||
      reinterpret_cast<const sockaddr*>(caller->buf)->sa_family != AF_INET) {
    std::cout << "GRANTED_RES failed: the caller is not an IPv4 address" << std::endl;
    return;
  }
  std::memcpy(&server, caller->buf, sizeof server);
  char address[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &server.sin_addr, address, sizeof address);
  sockaddr_in rpcbind = server;  // pmap_getport overwrites the port with 111.
  uint16_t port = pmap_getport(&rpcbind, kNlmProgram, version, IPPROTO_UDP);
  if (port == 0) {
    std::cout << "GRANTED_RES failed: no NLM " << version << " at " << address << "'s rpcbind"
              << std::endl;
    return;
  }
  server.sin_port = htons(port);
  auto client = NlmRpcgenClient::Connect(version, false, server);
  if (!client) {
    std::cout << "GRANTED_RES failed: " << NlmRpcgenClient::CreateError() << std::endl;
    return;
  }
  NlmStat stat = Answer();
  if (!client->GrantedRes(NlmReply{args.cookie, stat})) {
    std::cout << "GRANTED_RES failed: " << client->error() << std::endl;
    return;
  }
  std::cout << "GRANTED_RES sent address=" << address << " port=" << port
            << " stat=" << ToString(stat) << std::endl;
}

void Dispatch(svc_req* request, SVCXPRT* transport) {
  const auto version = static_cast<uint32_t>(request->rq_vers);
  switch (request->rq_proc) {
    case kNlmNull:
      svc_sendreply(transport, XdrNothing, nullptr);
      return;
    case kNlmGranted: {
      auto args = GetGrantedArgs(version, transport);
      if (!args) {
        svcerr_decode(transport);
        return;
      }
      std::cout << "GRANTED " << Describe(version, *args) << std::endl;
      if (!withhold) ReplyRes(version, transport, NlmReply{args->cookie, Answer()});
      return;
    }
    case kNlmGrantedMsg: {
      auto args = GetGrantedArgs(version, transport);
      if (!args) {
        svcerr_decode(transport);
        return;
      }
      svc_sendreply(transport, XdrNothing, nullptr);
      std::cout << "GRANTED_MSG " << Describe(version, *args) << std::endl;
      if (withhold) {
        std::cout << "GRANTED_RES withheld" << std::endl;
      } else {
        SendGrantedRes(version, transport, *args);
      }
      return;
    }
    case kNlmTestRes: {
      auto res = GetTestResArgs(version, transport);
      if (!res) {
        svcerr_decode(transport);
        return;
      }
      svc_sendreply(transport, XdrNothing, nullptr);
      std::cout << "TEST_RES version=" << version << " stat=" << ToString(res->stat)
                << (res->holder ? " " + tools::Describe(*res->holder) : "")
                << " cookie=" << Hex(res->cookie) << std::endl;
      return;
    }
    case kNlmLockRes:
    case kNlmCancelRes:
    case kNlmUnlockRes: {
      auto res = GetResArgs(version, transport);
      if (!res) {
        svcerr_decode(transport);
        return;
      }
      svc_sendreply(transport, XdrNothing, nullptr);
      const char* name = request->rq_proc == kNlmLockRes     ? "LOCK_RES"
                         : request->rq_proc == kNlmCancelRes ? "CANCEL_RES"
                                                             : "UNLOCK_RES";
      std::cout << name << " version=" << version << " stat=" << ToString(res->stat)
                << " cookie=" << Hex(res->cookie) << std::endl;
      return;
    }
    default:
      std::cout << "UNEXPECTED procedure=" << request->rq_proc << " version=" << version
                << std::endl;
      svcerr_noproc(transport);
      return;
  }
}

int Main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--answer" && i + 1 < argc) {
      std::string value = argv[++i];
      answer = value == "denied" ? NlmStat::kDenied : NlmStat::kGranted;
      withhold = value == "none";
      grace_once = value == "grace-once";
    } else {
      std::cerr << "usage: nlm_callback_server [--answer granted|denied|none|grace-once]\n";
      return 1;
    }
  }
  SVCXPRT* udp = svcudp_create(RPC_ANYSOCK);
  SVCXPRT* tcp = svctcp_create(RPC_ANYSOCK, 0, 0);
  if (udp == nullptr || tcp == nullptr) {
    std::cerr << "nlm_callback_server: cannot create transports\n";
    return 1;
  }
  for (unsigned long version : {1ul, 3ul, 4ul}) {
    pmap_unset(kNlmProgram, version);
    if (!svc_register(udp, kNlmProgram, version, Dispatch, IPPROTO_UDP) ||
        !svc_register(tcp, kNlmProgram, version, Dispatch, IPPROTO_TCP)) {
      std::cerr << "nlm_callback_server: cannot register NLM " << version << " with rpcbind\n";
      return 1;
    }
  }
  std::cout << "ready udp=" << udp->xp_port << " tcp=" << tcp->xp_port << std::endl;
  svc_run();
  return 1;  // svc_run returns only on error.
}

}  // namespace
}  // namespace nlockd::integration::tools

int main(int argc, char** argv) { return nlockd::integration::tools::Main(argc, argv); }
