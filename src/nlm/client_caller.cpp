// SPDX-License-Identifier: Apache-2.0
#include "nlm/client_caller.hpp"

#include "nlm/wire.hpp"
#include "rpc/address.hpp"
#include "rpc/rpcbind.hpp"

namespace nlockd::nlm {

namespace {

// A failure that says nothing answers at the port any more (or never did in time): the next
// callback asks the portmapper again.
bool PortLooksStale(rpc::CallStatus status) {
  return status == rpc::CallStatus::kUnreachable || status == rpc::CallStatus::kNotSuccess ||
         status == rpc::CallStatus::kTimedOut;
}

}  // namespace

asio::awaitable<rpc::CallResult> RpcClientCaller::Call(ClientAddress client, uint32_t version,
                                                       uint32_t procedure,
                                                       std::vector<uint8_t> args,
                                                       std::chrono::milliseconds deadline) {
  auto started = std::chrono::steady_clock::now();
  auto left = [&] {
    auto spent = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::steady_clock::now() - started);
    return std::max(deadline - spent, std::chrono::milliseconds(1));
  };
  std::string host = rpc::AddressToString(client.address);
  rpc::CallOptions options;
  options.source_address = client.source;
  if (client.port && *client.port != 0) {
    options.deadline = deadline;
    rpc::CallTarget target{host, *client.port, client.transport};
    co_return co_await client_.Call(target, NLM_PROG, version, procedure, std::move(args), options);
  }
  uint32_t protocol =
      client.transport == rpc::Transport::kTcp ? rpc::kIpProtoTcp : rpc::kIpProtoUdp;
  rpc::PortCache::Key key{host, options_.rpcbind_port, NLM_PROG, version, protocol};
  for (;;) {
    bool cached = false;
    auto found = co_await rpc::CachedGetPort(ports_, client_, key, left(), cached);
    if (!found || *found == 0) {
      rpc::CallResult result;
      result.status = found ? rpc::CallStatus::kNotSuccess : rpc::CallStatus::kUnreachable;
      result.accept_stat = rpc::AcceptStat::kProgUnavail;
      result.detail = found ? "client's rpcbind has no NLM " + std::to_string(version)
                            : "client's rpcbind did not answer";
      co_return result;
    }
    options.deadline = left();
    rpc::CallTarget target{host, *found, client.transport};
    // Kept for a second try at a fresh port; a call that went out uncached needs no copy.
    std::vector<uint8_t> body = cached ? args : std::move(args);
    rpc::CallResult result =
        co_await client_.Call(target, NLM_PROG, version, procedure, std::move(body), options);
    if (!PortLooksStale(result.status)) co_return result;
    ports_.Forget(key);
    // Refused at a cached port: the client's lockd may have restarted on another one.
    bool refused = result.status != rpc::CallStatus::kTimedOut;
    if (!cached || !refused || std::chrono::steady_clock::now() - started >= deadline) {
      co_return result;
    }
  }
}

void RpcClientCaller::ForgetHost(const asio::ip::address& address) {
  ports_.ForgetHost(rpc::AddressToString(address));
}

}  // namespace nlockd::nlm
