// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <atomic>
#include <exception>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include <asio/associated_executor.hpp>
#include <asio/async_result.hpp>
#include <asio/post.hpp>

#include "store/store.hpp"

namespace nlockd::store {

// One store write, waiting for its Done: e.g. [&](Done done) { store.Clear(std::move(done)); }.
using Write = std::function<void(Done)>;

// Submits `writes` in order (the store applies them in that order) and completes on the
// caller's executor once every one has run its Done, with the first failure (or nullptr).
// Done runs on the store's writer thread (store.hpp), so the completion is posted back.
template <typename Token>
auto AsyncWrite(std::vector<Write> writes, Token&& token) {
  return asio::async_initiate<Token, void(std::exception_ptr)>(
      [](auto handler, std::vector<Write> submitted) {
        auto executor = asio::get_associated_executor(handler);
        if (submitted.empty()) {
          asio::post(executor, [handler = std::move(handler)]() mutable { handler(nullptr); });
          return;
        }
        using Handler = decltype(handler);
        struct Pending {
          explicit Pending(Handler h, size_t n) : completion(std::move(h)), remaining(n) {}
          Handler completion;
          std::atomic<size_t> remaining;
          // Dones run one at a time (on the writer thread, or inline for the memory store) and
          // in submission order, so the first failure recorded is the earliest.
          std::exception_ptr first_error;
        };
        auto pending = std::make_shared<Pending>(std::move(handler), submitted.size());
        for (auto& write : submitted) {
          write([pending, executor](std::exception_ptr error) {
            if (error && !pending->first_error) pending->first_error = error;
            if (pending->remaining.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
            asio::post(executor, [pending] { pending->completion(pending->first_error); });
          });
        }
      },
      token, std::move(writes));
}

}  // namespace nlockd::store
