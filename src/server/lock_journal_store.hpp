#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <asio/awaitable.hpp>

#include "lock/lock_manager.hpp"
#include "nlm/lock_journal.hpp"
#include "store/async_write.hpp"
#include "store/records.hpp"
#include "store/store.hpp"

namespace nlockd::server {

// NLM's lock journal over the store (issue 8: "lock-table changes are written before the
// answer"). Each entry becomes the current state of that owner on that file, read from the
// LockManager at the moment Record is called (same executor, so it is what NLM answers), and
// written as one ApplyLockChanges (kCommitted: survives a process crash; a host crash is caught
// by the store's lock_table_complete). Runs on the lock executor; `locks` and `store` must
// outlive it.
class StoreLockJournal final : public nlm::LockJournal {
 public:
  StoreLockJournal(const lock::LockManager& locks, store::Store& store)
      : locks_(locks), store_(store) {}

  asio::awaitable<bool> Record(std::vector<nlm::JournalEntry> entries) override;

  // The owners whose restored locks or shares were loaded at start-up. When grace ends (or a
  // host's restored state is dropped) their persisted rows are rewritten from what they hold
  // now, so that an unreclaimed restored lock does not come back at the next start.
  void RememberRestoredLock(const lock::FileKey& file, const lock::LockOwner& owner);
  void RememberRestoredShare(const lock::FileKey& file, const lock::LockOwner& owner);
  size_t restored_pending() const { return restored_.size(); }
  // Rewrites the persisted state of every remembered owner (of `host` only, when given) and
  // forgets them; awaits the write. False if the store failed.
  asio::awaitable<bool> SettleRestored(std::optional<lock::HostId> host = std::nullopt);

  uint64_t failures() const { return failures_; }

  // The store changes that make the persisted copy of `entries` equal the manager's state;
  // host releases become their own writes. Public for tests.
  struct Plan {
    std::vector<store::Write> writes;
    size_t changes = 0;
  };
  Plan PlanWrites(const std::vector<nlm::JournalEntry>& entries);

 private:
  store::ReplaceLocks CurrentLocks(const lock::FileKey& file, const lock::LockOwner& owner) const;
  store::LockChange CurrentShare(const lock::FileKey& file, const lock::LockOwner& owner) const;
  asio::awaitable<bool> Write(std::vector<store::Write> writes, size_t changes);

  const lock::LockManager& locks_;
  store::Store& store_;
  // (is share, file, host, svid, oh) of restored state not yet settled.
  using RestoredKey = std::tuple<bool, std::string, std::string, int32_t, std::string>;
  std::set<RestoredKey> restored_;
  uint64_t failures_ = 0;
};

}  // namespace nlockd::server
