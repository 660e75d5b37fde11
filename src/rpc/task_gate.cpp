// SPDX-License-Identifier: Apache-2.0
#include "rpc/task_gate.hpp"

#include <algorithm>
#include <list>

#include <asio/this_coro.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace nlockd::rpc {

// What the gate and its passes share. The gate owns it; if passes remain when the gate goes
// (a task outlived its owner's bounded wait), the last pass deletes it.
struct TaskGate::State {
  explicit State(asio::any_io_executor executor) : emptied(std::move(executor)) {}
  size_t count = 0;
  bool orphaned = false;  // the gate is gone
  Event emptied;          // set whenever count drops to 0
  // Tasks holding a pass, by what they do (string literals, compared by address; a handful).
  std::vector<std::pair<const char*, size_t>> running;
  // Cancellation signals of the tasks spawned through Spawn(). A signal is reused only after
  // its task's completion handler is gone, and all live as long as any pass: a task's
  // cancellation state is stored in its signal.
  std::list<asio::cancellation_signal> signals;
  std::vector<asio::cancellation_signal*> in_use;
  std::vector<asio::cancellation_signal*> free;
};

TaskGate::TaskGate(asio::any_io_executor executor, std::string owner)
    : executor_(executor),
      owner_(std::move(owner)),
      state_(new State(executor)),
      cancelled_(executor) {}

TaskGate::~TaskGate() {
  if (state_->count == 0) {
    delete state_;
    return;
  }
  // Tasks outlived the bounded wait (already logged by CancelAndWait): they keep the count
  // alive, and must not be resumed, since what they belong to is going away.
  state_->orphaned = true;
}

TaskGate::Pass::Pass(State* state, const char* what) : state_(state), what_(what) {
  ++state_->count;
  auto found = std::find_if(state_->running.begin(), state_->running.end(),
                            [what](const auto& entry) { return entry.first == what; });
  if (found == state_->running.end()) {
    state_->running.emplace_back(what, 1);
  } else {
    ++found->second;
  }
}

TaskGate::Pass::~Pass() {
  if (state_ == nullptr) return;
  for (auto& entry : state_->running) {
    if (entry.first == what_) --entry.second;
  }
  if (--state_->count > 0) return;
  if (state_->orphaned) {
    delete state_;
  } else {
    state_->emptied.Set();
  }
}

std::optional<TaskGate::Pass> TaskGate::TryEnter(const char* what) {
  if (closed_) return std::nullopt;
  return Pass(state_, what);
}

size_t TaskGate::count() const { return state_->count; }

asio::cancellation_signal* TaskGate::AcquireSignal() {
  asio::cancellation_signal* signal = nullptr;
  if (state_->free.empty()) {
    signal = &state_->signals.emplace_back();
  } else {
    signal = state_->free.back();
    state_->free.pop_back();
  }
  state_->in_use.push_back(signal);
  return signal;
}

asio::awaitable<void> TaskGate::Unthrowing(asio::awaitable<void> task) {
  co_await asio::this_coro::throw_if_cancelled(false);
  co_await std::move(task);
}

void TaskGate::Finished::operator()(const std::exception_ptr& error) {
  State& state = *pass.state_;
  std::erase(state.in_use, signal);
  state.free.push_back(signal);
  if (!error) return;
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    spdlog::error("{} task failed: {}", pass.what_, e.what());
  }
}

void TaskGate::Cancel() {
  closed_ = true;
  cancelled_.Set();
  // Copied: a handler run inline by an emit may hand its signal back.
  std::vector<asio::cancellation_signal*> in_use = state_->in_use;
  for (asio::cancellation_signal* signal : in_use) signal->emit(asio::cancellation_type::terminal);
}

asio::awaitable<bool> TaskGate::WaitEmpty(std::chrono::steady_clock::duration timeout) {
  if (state_->count == 0) co_return true;
  state_->emptied.Reset();
  co_await state_->emptied.WaitFor(timeout);
  co_return state_->count == 0;
}

asio::awaitable<bool> TaskGate::CancelAndWait(std::chrono::steady_clock::duration bound) {
  Cancel();
  // Awaited on its own line: g++ 12 loops on a co_await inside an if condition here.
  const bool emptied = co_await WaitEmpty(bound);
  if (emptied) co_return true;
  spdlog::warn("{}: {} still running {} ms after shutdown began; shutting down without them",
               owner_, Running(),
               std::chrono::duration_cast<std::chrono::milliseconds>(bound).count());
  co_return false;
}

std::string TaskGate::Running() const {
  std::string out;
  for (const auto& [what, count] : state_->running) {
    if (count == 0) continue;
    if (!out.empty()) out += ", ";
    out += fmt::format("{} {}", count, what);
  }
  return out.empty() ? "nothing" : out;
}

}  // namespace nlockd::rpc
