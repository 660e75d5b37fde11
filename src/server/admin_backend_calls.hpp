// SPDX-License-Identifier: Apache-2.0
#pragma once
// AdminBackend's way onto the executor, shared by its three files (see admin_backend.hpp).

#include <chrono>
#include <exception>
#include <future>
#include <memory>
#include <type_traits>
#include <utility>

#include <asio/co_spawn.hpp>
#include <asio/post.hpp>
#include <asio/use_future.hpp>

#include "server/admin_backend.hpp"

namespace nlockd::server {

inline double Seconds(Clock::duration duration) {
  return std::chrono::duration<double>(duration).count();
}

template <typename Work>
auto AdminBackend::OnExecutor(Work work) -> decltype(work()) {
  using Result = decltype(work());
  CheckOpen();
  // Shared: after a timeout the work may still run, and sets a promise nobody waits for.
  auto promise = std::make_shared<std::promise<Result>>();
  std::future<Result> future = promise->get_future();
  asio::post(parts_.executor, [promise, work = std::move(work)]() mutable {
    try {
      if constexpr (std::is_void_v<Result>) {
        work();
        promise->set_value();
      } else {
        promise->set_value(work());
      }
    } catch (...) {
      promise->set_exception(std::current_exception());
    }
  });
  if (future.wait_for(timeout_) != std::future_status::ready) {
    throw admin::ApiError(admin::ApiErrorKind::kUnavailable, "nlockd did not answer in time");
  }
  return future.get();
}

template <typename T>
T AdminBackend::Await(asio::awaitable<T> work) {
  CheckOpen();
  std::future<T> future = asio::co_spawn(parts_.executor, std::move(work), asio::use_future);
  if (future.wait_for(timeout_) != std::future_status::ready) {
    throw admin::ApiError(admin::ApiErrorKind::kUnavailable, "nlockd did not answer in time");
  }
  return future.get();
}

}  // namespace nlockd::server
