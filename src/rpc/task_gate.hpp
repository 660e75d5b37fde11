// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>

#include <asio/any_io_executor.hpp>
#include <asio/awaitable.hpp>
#include <asio/steady_timer.hpp>

namespace nlockd::rpc {

// Counts the tasks (coroutines) spawned under one owner, so that shutdown can stop new ones
// and wait for those in flight (Seastar's gate). Runs on one executor; not thread-safe.
class TaskGate {
 public:
  explicit TaskGate(asio::any_io_executor executor);
  TaskGate(const TaskGate&) = delete;
  TaskGate& operator=(const TaskGate&) = delete;

  // Held by a task for its lifetime.
  class Pass {
   public:
    explicit Pass(TaskGate* gate) : gate_(gate) { ++gate_->count_; }
    Pass(Pass&& other) noexcept : gate_(other.gate_) { other.gate_ = nullptr; }
    Pass& operator=(Pass&&) = delete;
    Pass(const Pass&) = delete;
    ~Pass();

   private:
    TaskGate* gate_;
  };

  // A pass, or nullopt once the gate is closed.
  std::optional<Pass> TryEnter();
  void Close() { closed_ = true; }
  bool closed() const { return closed_; }
  size_t count() const { return count_; }

  // Completes when no task holds a pass, or at the timeout; true if the gate emptied.
  asio::awaitable<bool> WaitEmpty(std::chrono::steady_clock::duration timeout);

 private:
  size_t count_ = 0;
  bool closed_ = false;
  asio::steady_timer emptied_;
};

}  // namespace nlockd::rpc
