// SPDX-License-Identifier: Apache-2.0
#include "nlm/owner_turns.hpp"

#include <functional>
#include <string>
#include <string_view>
#include <utility>

#include "base/error.hpp"

namespace nlockd::nlm {

OwnerTurns::Turn& OwnerTurns::Turn::operator=(Turn&& other) noexcept {
  if (this != &other) {
    if (turns_ != nullptr) turns_->Release(slot_);
    turns_ = other.turns_;
    slot_ = other.slot_;
    other.turns_ = nullptr;
  }
  return *this;
}

OwnerTurns::Turn::~Turn() {
  if (turns_ != nullptr) turns_->Release(slot_);
}

OwnerTurns::OwnerTurns(asio::any_io_executor executor)
    : executor_(std::move(executor)), busy_(kSlots, 0) {}

size_t OwnerTurns::SlotOf(const lock::FileKey& file, const lock::LockOwner& owner) {
  return SlotOf(file.value(), owner.host.value(), owner.svid, owner.oh.value());
}

size_t OwnerTurns::SlotOf(std::string_view file, std::string_view host, int32_t svid,
                          std::string_view oh) {
  const std::hash<std::string_view> hash;
  size_t h = hash(file);
  // boost::hash_combine's mixing step.
  const auto mix = [&h](size_t v) { h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2); };
  mix(hash(host));
  mix(static_cast<size_t>(static_cast<uint32_t>(svid)));
  mix(hash(oh));
  return h % kSlots;
}

std::optional<OwnerTurns::Turn> OwnerTurns::TryTake(size_t slot) {
  // A free slot has no waiters: Release hands a held one straight to the oldest.
  if (busy_[slot] != 0) return std::nullopt;
  busy_[slot] = 1;
  return Turn(this, slot);
}

asio::awaitable<OwnerTurns::Turn> OwnerTurns::Take(size_t slot) {
  if (std::optional<Turn> turn = TryTake(slot)) co_return std::move(*turn);
  auto waiting = std::make_shared<Waiting>(executor_);
  waiting_[slot].push_back(waiting);
  co_await waiting->wake.Wait();
  if (!waiting->handed_over) {
    // Cancelled from outside: leave the line, so that Release never hands the turn to nobody.
    std::deque<std::shared_ptr<Waiting>>& line = waiting_[slot];
    std::erase(line, waiting);
    if (line.empty()) waiting_.erase(slot);
    throw Error(ErrorKind::kFailed, "waiting for an owner's earlier call was cancelled");
  }
  co_return Turn(this, slot);  // busy_[slot] stayed set for us.
}

void OwnerTurns::Release(size_t slot) {
  auto line = waiting_.find(slot);
  if (line == waiting_.end()) {
    busy_[slot] = 0;
    return;
  }
  const std::shared_ptr<Waiting> next = std::move(line->second.front());
  line->second.pop_front();
  if (line->second.empty()) waiting_.erase(line);
  next->handed_over = true;
  next->wake.Set();
}

}  // namespace nlockd::nlm
