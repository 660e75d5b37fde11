// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <asio/any_io_executor.hpp>
#include <asio/awaitable.hpp>

#include "lock/owner.hpp"
#include "rpc/event.hpp"

namespace nlockd::nlm {

// Takes turns for the calls of one lock owner on one file that change state while the lock
// journal is on: a call holds its turn from before it changes the lock manager until its journal
// write and any undo are done, and a later call of the same owner waits for it. Without that, the
// undo of a LOCK or SHARE whose write failed (which restores the owner's state from before the
// call) would overwrite what a later call of the same owner did in the meantime.
//
// (file, owner) pairs are hashed into kSlots slots, so two owners that share a slot wait for each
// other too: rare, and it costs one journal write. A turn taken without waiting allocates nothing.
// Runs on the NlmService's executor (no mutex). Must outlive every Turn (NlmService::Shutdown).
class OwnerTurns {
 public:
  // Enough that unrelated owners rarely share a slot with the calls in flight; one byte each.
  static constexpr size_t kSlots = 4096;

  // Holds a slot until destroyed. Move-only.
  class Turn {
   public:
    Turn(Turn&& other) noexcept : turns_(other.turns_), slot_(other.slot_) {
      other.turns_ = nullptr;
    }
    Turn& operator=(Turn&& other) noexcept;
    Turn(const Turn&) = delete;
    Turn& operator=(const Turn&) = delete;
    ~Turn();

   private:
    friend class OwnerTurns;
    Turn(OwnerTurns* turns, size_t slot) : turns_(turns), slot_(slot) {}
    OwnerTurns* turns_;
    size_t slot_;
  };

  explicit OwnerTurns(asio::any_io_executor executor);
  OwnerTurns(const OwnerTurns&) = delete;
  OwnerTurns& operator=(const OwnerTurns&) = delete;

  static size_t SlotOf(const lock::FileKey& file, const lock::LockOwner& owner);
  // The same from the parts of the key (a call's arguments, before they become a FileKey and
  // a LockOwner).
  static size_t SlotOf(std::string_view file, std::string_view host, int32_t svid,
                       std::string_view oh);

  // The slot's turn if nobody holds it (no call of the owner is in flight), else nullopt.
  std::optional<Turn> TryTake(size_t slot);
  // Waits for the calls that hold or wait for the slot (first come, first served), then takes
  // it. Throws Error(kFailed) if the wait is cancelled.
  asio::awaitable<Turn> Take(size_t slot);

  bool held(size_t slot) const { return busy_[slot] != 0; }

 private:
  // A call waiting for a slot; Release hands the turn to the oldest one.
  struct Waiting {
    explicit Waiting(asio::any_io_executor executor) : wake(std::move(executor)) {}
    rpc::Event wake;  // Set when the turn is handed over.
    bool handed_over = false;
  };

  void Release(size_t slot);

  asio::any_io_executor executor_;
  std::vector<uint8_t> busy_;
  // The calls waiting per contended slot, oldest first. A slot without waiters has no entry.
  std::unordered_map<size_t, std::deque<std::shared_ptr<Waiting>>> waiting_;
};

}  // namespace nlockd::nlm
