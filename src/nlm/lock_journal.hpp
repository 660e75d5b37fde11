// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include <asio/awaitable.hpp>

#include "lock/owner.hpp"
#include "lock/range.hpp"

namespace nlockd::nlm {

// One change of the lock or share table, as NLM reports it to be persisted. Entries name what
// changed, not how: the journal reads the current state from the LockManager (same executor, so
// what it reads is what NLM is about to answer) and replaces the persisted copy with it.
struct JournalEntry {
  enum class Kind : uint8_t {
    kLocks,         // `owner`'s byte-range locks on `file` changed (maybe to none).
    kShare,         // `owner`'s share reservation on `file` changed (maybe to none).
    kHostReleased,  // `owner.host` released everything: locks, shares (waiters are not kept).
  };
  Kind kind = Kind::kLocks;
  lock::FileKey file;     // kLocks, kShare.
  lock::LockOwner owner;  // kLocks, kShare; for kHostReleased only `host` is set.
  // kLocks: the range of the call (LOCK, UNLOCK, a grant or its undo). A call changes only the
  // owner's locks that overlap or touch its range, so the journal rewrites only those; without
  // it, all of the owner's locks on the file.
  std::optional<lock::ByteRange> range;

  static JournalEntry Locks(lock::FileKey file, lock::LockOwner owner,
                            std::optional<lock::ByteRange> range = std::nullopt) {
    return JournalEntry{Kind::kLocks, std::move(file), std::move(owner), range};
  }
  static JournalEntry Share(lock::FileKey file, lock::LockOwner owner) {
    return JournalEntry{Kind::kShare, std::move(file), std::move(owner), std::nullopt};
  }
  static JournalEntry HostReleased(lock::HostId host) {
    JournalEntry entry;
    entry.kind = Kind::kHostReleased;
    entry.owner.host = std::move(host);
    return entry;
  }

  friend bool operator==(const JournalEntry&, const JournalEntry&) = default;
};

// A JournalEntry's parts by reference, for the inline write of a call (RecordInline): made from
// the call's request without copying its file handle and owner. Valid while those live.
struct JournalEntryRef {
  JournalEntryRef(JournalEntry::Kind entry_kind, const lock::FileKey& entry_file,
                  const lock::LockOwner& entry_owner, std::optional<lock::ByteRange> entry_range)
      : kind(entry_kind), file(entry_file), owner(entry_owner), range(entry_range) {}
  JournalEntryRef(const JournalEntry& entry)  // NOLINT(google-explicit-constructor): a view.
      : JournalEntryRef(entry.kind, entry.file, entry.owner, entry.range) {}

  JournalEntry::Kind kind;
  const lock::FileKey& file;
  const lock::LockOwner& owner;
  std::optional<lock::ByteRange> range;
};

// Where NLM persists its lock-table changes, written before the answer (docs/architecture.md,
// journal-before-answer); server/ implements it over the store, which nlm/ never names. NLM calls
// Record on its executor after each change and awaits it before it answers the call or sends the
// GRANTED callback of a waiter it granted, with the entries of one call in the order they
// happened (the call's own change first, then the waiters it granted).
//
// Record returns false when the change could not be written (the store failed). No answer then
// claims the change: the call is undone (the owner gets back exactly what it held before it)
// unless it gave up something another owner has taken since (then it stands and is answered
// GRANTED). A LOCK, NM_LOCK or SHARE is answered DENIED_NOLOCKS, as Linux lockd and
// NFS-Ganesha fail closed; an UNLOCK or UNSHARE DENIED_GRACE_PERIOD, the answer a client sends
// its UNLOCK again for (Linux drops the lock locally first and retries only that refusal). A
// granted waiter has its grant revoked instead of announced. CANCEL of a granted block, FREE_ALL
// and a reboot stay done in memory (the client is not holding what they released); their
// persisted rows are rewritten by the owner's next entry on that file, or dropped unreclaimed
// after a restart. A later call of the same owner on the same file waits for that outcome
// (OwnerTurns), so that an undo never overwrites it.
//
// With no journal set (NlmService::set_journal), nothing is persisted and nothing is awaited.
//
// A journal whose store acknowledges a write within the call (the lock log appends it) also
// writes inline: RecordInline has the same meaning as Record, and NLM answers a call without
// suspending it (no coroutine, no batch, no trip through the executor).
class LockJournal {
 public:
  virtual ~LockJournal() = default;
  virtual asio::awaitable<bool> Record(std::vector<JournalEntry> entries) = 0;

  // Whether RecordInline may be called.
  virtual bool records_inline() const { return false; }
  // Record, done before it returns. REQUIRES: records_inline(); no kHostReleased entry.
  virtual bool RecordInline(std::span<const JournalEntryRef> entries) {
    (void)entries;
    return false;
  }
};

}  // namespace nlockd::nlm
