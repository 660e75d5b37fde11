// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "nsm/status_receiver.hpp"
#include "rpc/client.hpp"
#include "rpc/rpcbind.hpp"

namespace nlockd::nsm {

struct RpcStatusCallerOptions {
  std::string rpcbind_host = "127.0.0.1";  // the local portmapper
  uint16_t rpcbind_port = 111;
  // Each attempt's total deadline: GETPORT plus the call, so a dead registrant stalls nothing.
  std::chrono::milliseconds deadline{5000};
  int attempts = 3;
  std::chrono::milliseconds retry_delay{1000};
  // Linux lockd takes the callback (NLM procedure 16) only from a privileged port on loopback:
  // a free one is bound when the process may (root, CAP_NET_BIND_SERVICE); the Client warns
  // once when it may not.
  rpc::SourcePort source = rpc::SourcePort::Reserved();
};

// Sends status callbacks the way rpc.statd does: to my_prog/my_vers/my_proc on loopback, the
// port found through the local portmapper over UDP (that is how kernel lockd and NFS-Ganesha
// listen for it), AUTH_NONE. my_name is not used to route: a registrant is always local
// (SM_MON is loopback-only). The port is asked of the portmapper once and kept (rpc::PortCache)
// until a callback to it fails; a callback refused at a cached port asks again at once. Runs on the
// client's executor; `client` must outlive it.
class RpcStatusCaller final : public StatusCaller {
 public:
  RpcStatusCaller(rpc::Client& client, RpcStatusCallerOptions options)
      : client_(client), options_(std::move(options)) {}

  asio::awaitable<bool> Call(store::MyId target, StatusCallback body) override;

 private:
  asio::awaitable<bool> Attempt(store::MyId target, std::vector<uint8_t> args);

  rpc::Client& client_;
  RpcStatusCallerOptions options_;
  rpc::PortCache ports_;
};

}  // namespace nlockd::nsm
