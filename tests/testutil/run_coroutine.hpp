// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <exception>
#include <optional>
#include <utility>

#include <asio/awaitable.hpp>
#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <gtest/gtest.h>

namespace nlockd::testutil {

// Runs a coroutine on `io` until it finishes; fails the test (and stops) if it has not finished
// within `timeout`, so that a hang shows as a failure instead of a stuck test binary.
template <typename T>
T RunCoroutine(asio::io_context& io, asio::awaitable<T> coroutine,
               std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  std::optional<T> result;
  std::exception_ptr error;
  bool done = false;
  asio::co_spawn(io, std::move(coroutine), [&](std::exception_ptr e, T value) {
    error = e;
    if (!e) result.emplace(std::move(value));
    done = true;
  });
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done && std::chrono::steady_clock::now() < deadline) {
    io.run_for(std::chrono::milliseconds(20));
    if (io.stopped()) io.restart();
  }
  if (!done) {
    ADD_FAILURE() << "coroutine did not finish within " << timeout.count() << " ms";
    throw std::runtime_error("coroutine hang");
  }
  if (error) std::rethrow_exception(error);
  return std::move(*result);
}

inline void RunCoroutine(asio::io_context& io, asio::awaitable<void> coroutine,
                         std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  bool done = false;
  std::exception_ptr error;
  asio::co_spawn(io, std::move(coroutine), [&](std::exception_ptr e) {
    error = e;
    done = true;
  });
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done && std::chrono::steady_clock::now() < deadline) {
    io.run_for(std::chrono::milliseconds(20));
    if (io.stopped()) io.restart();
  }
  if (!done) {
    ADD_FAILURE() << "coroutine did not finish within " << timeout.count() << " ms";
    throw std::runtime_error("coroutine hang");
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace nlockd::testutil
