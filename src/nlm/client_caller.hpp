// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <vector>

#include <asio/awaitable.hpp>
#include <asio/ip/address.hpp>

#include "rpc/call_context.hpp"
#include "rpc/client.hpp"
#include "rpc/rpcbind.hpp"

namespace nlockd::nlm {

// Where a client's NLM service is: its address, and the port when known (a _MSG that came over
// UDP is answered to its source port, as BSD and macOS clients expect); otherwise the port is
// asked of the client's rpcbind.
struct ClientAddress {
  asio::ip::address address;
  std::optional<uint16_t> port;
  rpc::Transport transport = rpc::Transport::kUdp;
  // Where the client reached us (CallContext::local_address): calls to it go from there, since
  // Linux lockd takes a GRANTED only from the address it sent its LOCK to (on an HA node, the
  // service address rather than the host's own).
  std::optional<asio::ip::address> source;
};

// Makes the calls NLM sends to clients: GRANTED callbacks and _RES replies. An interface so
// that tests can stand in for the network.
class ClientCaller {
 public:
  virtual ~ClientCaller() = default;
  virtual asio::awaitable<rpc::CallResult> Call(ClientAddress client, uint32_t version,
                                                uint32_t procedure, std::vector<uint8_t> args,
                                                std::chrono::milliseconds deadline) = 0;
  // The host at `address` rebooted: whatever was learnt about its NLM service (its port) may
  // be stale. Callers without such knowledge ignore it.
  virtual void ForgetHost(const asio::ip::address& /*address*/) {}
};

struct RpcClientCallerOptions {
  uint16_t rpcbind_port = rpc::kPmapPort;  // where each client's portmapper listens
  size_t port_cache_limit = 4096;          // client hosts whose NLM port is kept
  std::chrono::milliseconds port_max_age = std::chrono::minutes(5);
};

// The real one: rpc::Client, with the port from the client's portmapper (PMAP GETPORT). The port
// is asked once and kept (rpc::PortCache) until a call to it fails or it is port_max_age old,
// so a GRANTED callback costs no GETPORT round trip to a client already called back. A call
// refused at a cached port (the client's lockd restarted elsewhere) asks again at once, within
// the same deadline. Not thread-safe: one executor (the client's) uses it.
class RpcClientCaller : public ClientCaller {
 public:
  explicit RpcClientCaller(rpc::Client& client, RpcClientCallerOptions options = {})
      : client_(client),
        options_(options),
        ports_(options.port_cache_limit, options.port_max_age) {}
  asio::awaitable<rpc::CallResult> Call(ClientAddress client, uint32_t version, uint32_t procedure,
                                        std::vector<uint8_t> args,
                                        std::chrono::milliseconds deadline) override;

  // Drops every port kept for `address` (all versions and transports): for when the host is
  // known to have rebooted, so that the next callback asks its portmapper again.
  void ForgetHost(const asio::ip::address& address) override;
  size_t cached_ports() const { return ports_.size(); }

 private:
  rpc::Client& client_;
  RpcClientCallerOptions options_;
  rpc::PortCache ports_;
};

}  // namespace nlockd::nlm
