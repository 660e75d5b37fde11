// SPDX-License-Identifier: Apache-2.0
#include "nsm/rpc_status_caller.hpp"

#include <asio/cancellation_type.hpp>
#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <spdlog/spdlog.h>

#include "nsm/wire.hpp"
#include "rpc/rpcbind.hpp"
#include "rpc/use_tuple.hpp"

namespace nlockd::nsm {

asio::awaitable<bool> RpcStatusCaller::Call(store::MyId target, StatusCallback body) {
  status wire{body.mon_name, body.state, body.priv};
  std::vector<uint8_t> args;
  xdr::Encoder enc(args);
  Encode(enc, wire);
  asio::steady_timer pause(co_await asio::this_coro::executor);
  for (int attempt = 1; attempt <= options_.attempts; ++attempt) {
    if (co_await Attempt(target, args)) co_return true;
    if (attempt == options_.attempts) break;
    // Cancelled (the service shuts down): no further attempt.
    if ((co_await asio::this_coro::cancellation_state).cancelled() !=
        asio::cancellation_type::none) {
      break;
    }
    pause.expires_after(options_.retry_delay);
    co_await pause.async_wait(rpc::kUseTuple);
  }
  co_return false;
}

asio::awaitable<bool> RpcStatusCaller::Attempt(store::MyId target, std::vector<uint8_t> args) {
  auto start = std::chrono::steady_clock::now();
  auto program = static_cast<uint32_t>(target.my_prog);
  auto version = static_cast<uint32_t>(target.my_vers);
  // The portmapper gets at most half of the attempt's deadline; the call has the rest.
  rpc::PortCache::Key key{options_.rpcbind_host, options_.rpcbind_port, program, version,
                          rpc::kIpProtoUdp};
  for (;;) {
    bool cached = false;
    std::optional<uint16_t> port =
        co_await rpc::CachedGetPort(ports_, client_, key, options_.deadline / 2, cached);
    if (!port || *port == 0) {
      spdlog::warn("nsm status callback to {}/{}/{}: {} on the local portmapper", program, version,
                   target.my_proc, port ? "not registered" : "no answer");
      co_return false;
    }
    auto spent = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::steady_clock::now() - start);
    rpc::CallOptions options;
    options.deadline = std::max(options_.deadline - spent, std::chrono::milliseconds(1));
    options.source = options_.source;
    rpc::CallTarget where{"127.0.0.1", *port, rpc::Transport::kUdp};
    rpc::CallResult result = co_await client_.Call(
        std::move(where), program, version, static_cast<uint32_t>(target.my_proc), args, options);
    if (result.status == rpc::CallStatus::kOk) co_return true;
    ports_.Forget(key);
    // A registrant that restarted on another port refuses at the old one: ask again now.
    if (cached && (result.status == rpc::CallStatus::kUnreachable ||
                   result.status == rpc::CallStatus::kNotSuccess)) {
      continue;
    }
    spdlog::warn("nsm status callback to {}/{}/{} port {}: {} {}", program, version, target.my_proc,
                 *port, rpc::ToString(result.status), result.detail);
    co_return false;
  }
}

}  // namespace nlockd::nsm
