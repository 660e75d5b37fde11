#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <vector>

#include <asio/awaitable.hpp>
#include <asio/ip/address.hpp>

#include "rpc/call_context.hpp"
#include "rpc/client.hpp"

namespace nlockd::nlm {

// Where a client's NLM service is: its address, and the port when known (a _MSG that came over
// UDP is answered to its source port, as BSD and macOS clients expect); otherwise the port is
// asked of the client's rpcbind.
struct ClientAddress {
  asio::ip::address address;
  std::optional<uint16_t> port;
  rpc::Transport transport = rpc::Transport::kUdp;
};

// Makes the calls NLM sends to clients: GRANTED callbacks and _RES replies. An interface so
// that tests can stand in for the network.
class ClientCaller {
 public:
  virtual ~ClientCaller() = default;
  virtual asio::awaitable<rpc::CallResult> Call(ClientAddress client, uint32_t version,
                                                uint32_t procedure, std::vector<uint8_t> args,
                                                std::chrono::milliseconds deadline) = 0;
};

// The real one: rpc::Client, with the port from the client's portmapper (PMAP GETPORT).
class RpcClientCaller : public ClientCaller {
 public:
  explicit RpcClientCaller(rpc::Client& client) : client_(client) {}
  asio::awaitable<rpc::CallResult> Call(ClientAddress client, uint32_t version,
                                        uint32_t procedure, std::vector<uint8_t> args,
                                        std::chrono::milliseconds deadline) override;

 private:
  rpc::Client& client_;
};

}  // namespace nlockd::nlm
