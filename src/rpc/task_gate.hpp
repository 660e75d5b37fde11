// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <cstddef>
#include <exception>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <asio/any_io_executor.hpp>
#include <asio/awaitable.hpp>
#include <asio/bind_cancellation_slot.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/co_spawn.hpp>

#include "rpc/event.hpp"

namespace nlockd::rpc {

// Counts the tasks (coroutines) spawned under one owner, so that shutdown can stop new ones,
// cancel those in flight and wait for them (Seastar's gate, userver's "cancel, then wait").
// ShutDown = CancelAndWait(bound): close, emit cancellation on every task spawned through
// Spawn(), wait at most `bound`; a task still running then is logged and left behind (the
// shutdown goes on). Passes may outlive the gate: the count they share lives on until the
// last one ends. Runs on one executor; not thread-safe.
class TaskGate {
  struct State;

 public:
  // `owner` names the gate in the shutdown log lines ("nlm", "nsm notifier", ...).
  explicit TaskGate(asio::any_io_executor executor, std::string owner = "tasks");
  ~TaskGate();
  TaskGate(const TaskGate&) = delete;
  TaskGate& operator=(const TaskGate&) = delete;

  // Held by a task for its lifetime.
  class Pass {
   public:
    Pass(Pass&& other) noexcept
        : state_(std::exchange(other.state_, nullptr)), what_(other.what_) {}
    Pass& operator=(Pass&&) = delete;
    Pass(const Pass&) = delete;
    ~Pass();

   private:
    friend class TaskGate;
    Pass(State* state, const char* what);
    State* state_;
    const char* what_;  // a string literal: what the task does, for the shutdown log
  };

  // A pass, or nullopt once the gate is closed. `what` must be a string literal.
  std::optional<Pass> TryEnter(const char* what = "task");

  // Runs the awaitable make() returns on the gate's executor, holding a pass until it has
  // finished, with a cancellation slot that Cancel() emits on: the wait the task is in, and
  // every later one, ends with operation_aborted (timers, sockets; an Event wait returns false),
  // as an error value, never as an exception, so the task's own clean-up runs; a task that
  // loops checks cancelled() or its owner's state. An exception that escapes the task is
  // logged. False, and make() not called, once the gate is closed. `what`: as for TryEnter.
  template <typename MakeTask>
  bool Spawn(const char* what, MakeTask&& make) {
    std::optional<Pass> pass = TryEnter(what);
    if (!pass) return false;
    asio::cancellation_signal* signal = AcquireSignal();
    asio::co_spawn(
        executor_, Unthrowing(std::forward<MakeTask>(make)()),
        asio::bind_cancellation_slot(signal->slot(), Finished{std::move(*pass), signal}));
    return true;
  }

  void Close() { closed_ = true; }
  // Closes the gate, sets cancelled() and emits a terminal cancellation to every task that
  // Spawn() started and that has not finished.
  void Cancel();
  // Set by Cancel(): tasks that were not spawned through Spawn() watch it.
  Event& cancelled() { return cancelled_; }
  bool closed() const { return closed_; }
  size_t count() const;

  // Completes when no task holds a pass, or at the timeout; true if the gate emptied.
  asio::awaitable<bool> WaitEmpty(std::chrono::steady_clock::duration timeout);
  // Cancel(), then WaitEmpty(bound). If the bound runs out it logs a warning naming the owner
  // and what still runs, and returns false: the caller goes on with its shutdown.
  asio::awaitable<bool> CancelAndWait(std::chrono::steady_clock::duration bound);
  // "2 callback, 1 _RES call": what holds passes now, for log lines.
  std::string Running() const;

 private:
  // The completion handler of a spawned task: logs an escaped exception, hands the signal
  // back. Its pass counts the task until the handler is gone.
  struct Finished {
    Pass pass;
    asio::cancellation_signal* signal;
    void operator()(const std::exception_ptr& error);
  };

  asio::cancellation_signal* AcquireSignal();
  // Turns off Asio's throw on co_await after cancellation for the task's whole thread.
  static asio::awaitable<void> Unthrowing(asio::awaitable<void> task);

  asio::any_io_executor executor_;
  std::string owner_;
  State* state_;  // shared with the passes; see ~TaskGate
  bool closed_ = false;
  Event cancelled_;
};

}  // namespace nlockd::rpc
