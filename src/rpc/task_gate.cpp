// SPDX-License-Identifier: Apache-2.0
#include "rpc/task_gate.hpp"

#include <asio/use_awaitable.hpp>

#include "rpc/use_tuple.hpp"

namespace nlockd::rpc {

TaskGate::TaskGate(asio::any_io_executor executor)
    : emptied_(std::move(executor), asio::steady_timer::time_point::max()) {}

TaskGate::Pass::~Pass() {
  if (gate_ != nullptr && --gate_->count_ == 0) gate_->emptied_.cancel();
}

std::optional<TaskGate::Pass> TaskGate::TryEnter() {
  if (closed_) return std::nullopt;
  return std::optional<Pass>(std::in_place, this);
}

asio::awaitable<bool> TaskGate::WaitEmpty(std::chrono::steady_clock::duration timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (count_ > 0 && std::chrono::steady_clock::now() < deadline) {
    emptied_.expires_at(deadline);
    co_await emptied_.async_wait(kUseTuple);
  }
  co_return count_ == 0;
}

}  // namespace nlockd::rpc
