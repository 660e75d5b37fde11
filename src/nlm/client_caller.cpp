#include "nlm/client_caller.hpp"

#include "nlm/wire.hpp"
#include "rpc/address.hpp"
#include "rpc/rpcbind.hpp"

namespace nlockd::nlm {

asio::awaitable<rpc::CallResult> RpcClientCaller::Call(ClientAddress client, uint32_t version,
                                                       uint32_t procedure,
                                                       std::vector<uint8_t> args,
                                                       std::chrono::milliseconds deadline) {
  auto started = std::chrono::steady_clock::now();
  std::string host = rpc::AddressToString(client.address);
  uint16_t port = client.port.value_or(0);
  if (port == 0) {
    rpc::PmapClient pmap(client_, host, rpc::kPmapPort, deadline);
    uint32_t protocol =
        client.transport == rpc::Transport::kTcp ? rpc::kIpProtoTcp : rpc::kIpProtoUdp;
    auto found = co_await pmap.GetPort(NLM_PROG, version, protocol);
    if (!found || *found == 0) {
      rpc::CallResult result;
      result.status = found ? rpc::CallStatus::kNotSuccess : rpc::CallStatus::kUnreachable;
      result.accept_stat = rpc::AcceptStat::kProgUnavail;
      result.detail = found ? "client's rpcbind has no NLM " + std::to_string(version)
                            : "client's rpcbind did not answer";
      co_return result;
    }
    port = *found;
  }
  rpc::CallOptions options;
  auto spent = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - started);
  options.deadline = std::max(deadline - spent, std::chrono::milliseconds(1));
  rpc::CallTarget target{host, port, client.transport};
  co_return co_await client_.Call(target, NLM_PROG, version, procedure, std::move(args),
                                  options);
}

}  // namespace nlockd::nlm
