// SPDX-License-Identifier: Apache-2.0
#pragma once

// Asio forms of LockService's asynchronous calls, for hosts built on standalone Asio (the same
// version and configuration as libnlockd; docs/embedding.md). Include this only if you use Asio.
#include <memory>
#include <utility>

#include <asio/associated_executor.hpp>
#include <asio/async_result.hpp>
#include <asio/dispatch.hpp>

#include "nlockd/lock_service.hpp"

namespace nlockd {

// HandleCall() as an Asio operation: `co_await AsyncHandleCall(service, call,
// asio::use_awaitable)` in a coroutine, or any other completion token. The completion runs on
// the handler's associated executor (the coroutine's), not on the service's.
template <typename CompletionToken>
auto AsyncHandleCall(LockService& service, const RpcCall& call, CompletionToken&& token) {
  return asio::async_initiate<CompletionToken, void(RpcReply)>(
      [&service](auto handler, const RpcCall& routed) {
        using Handler = decltype(handler);
        // std::function needs a copyable callable; Asio handlers are move-only.
        auto shared = std::make_shared<Handler>(std::move(handler));
        service.HandleCall(routed, [shared](RpcReply reply) {
          auto executor = asio::get_associated_executor(*shared);
          // Inline when the service's executor runs on a thread of the handler's (the host's
          // io_context): one queue hop less per call.
          asio::dispatch(executor, [shared, reply = std::move(reply)]() mutable {
            std::move (*shared)(std::move(reply));
          });
        });
      },
      token, call);
}

}  // namespace nlockd
