// SPDX-License-Identifier: Apache-2.0
// nsm_status_server: a local lock manager as a status monitor's `status` callback sees it.
// Registers PROGRAM VERSION over UDP and TCP with this host's rpcbind (svc_register) and, for
// every procedure but NULL, decodes the argument with rpcgen's xdr_status (sm_inter.x), prints
// "STATUS proc=P mon_name=M state=S priv0=B" and answers with the empty reply. Prints
// "ready udp=P tcp=P" once registered; unregisters on SIGTERM.
//
//   nsm_status_server PROGRAM VERSION
#include <cstdlib>
#include <iostream>
#include <string>

#include <rpc/pmap_clnt.h>
#include <rpc/rpc.h>
#include <signal.h>

#include "sm_inter_test.h"

namespace {

unsigned long g_program = 0;
unsigned long g_version = 0;

bool_t XdrNothing(XDR*, ...) { return TRUE; }

void Dispatch(svc_req* request, SVCXPRT* transport) {
  if (request->rq_proc == 0) {
    svc_sendreply(transport, reinterpret_cast<xdrproc_t>(XdrNothing), nullptr);
    return;
  }
  status args{};
  if (!svc_getargs(transport, reinterpret_cast<xdrproc_t>(xdr_status),
                   reinterpret_cast<char*>(&args))) {
    std::cout << "STATUS garbage proc=" << request->rq_proc << std::endl;
    svcerr_decode(transport);
    return;
  }
  std::cout << "STATUS proc=" << request->rq_proc << " mon_name=" << args.mon_name
            << " state=" << args.state << " priv0=" << static_cast<int>(args.priv[0]) << std::endl;
  svc_sendreply(transport, reinterpret_cast<xdrproc_t>(XdrNothing), nullptr);
  svc_freeargs(transport, reinterpret_cast<xdrproc_t>(xdr_status), reinterpret_cast<char*>(&args));
}

void Stop(int) {
  pmap_unset(g_program, g_version);
  std::_Exit(0);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: nsm_status_server PROGRAM VERSION\n";
    return 1;
  }
  g_program = std::strtoul(argv[1], nullptr, 10);
  g_version = std::strtoul(argv[2], nullptr, 10);
  pmap_unset(g_program, g_version);
  SVCXPRT* udp = svcudp_create(RPC_ANYSOCK);
  SVCXPRT* tcp = svctcp_create(RPC_ANYSOCK, 0, 0);
  if (!udp || !tcp || !svc_register(udp, g_program, g_version, Dispatch, IPPROTO_UDP) ||
      !svc_register(tcp, g_program, g_version, Dispatch, IPPROTO_TCP)) {
    std::cout << "cannot register" << std::endl;
    return 2;
  }
  signal(SIGTERM, Stop);
  std::cout << "ready udp=" << udp->xp_port << " tcp=" << tcp->xp_port << std::endl;
  svc_run();
  return 0;
}
