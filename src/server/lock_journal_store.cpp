// SPDX-License-Identifier: Apache-2.0
#include "server/lock_journal_store.hpp"

#include <algorithm>
#include <thread>
#include <tuple>

#include <asio/bind_executor.hpp>
#include <asio/post.hpp>
#include <asio/this_coro.hpp>
#include <spdlog/spdlog.h>

#include "base/describe.hpp"
#include "base/error.hpp"
#include "rpc/use_tuple.hpp"
#include "store/log/logged_store.hpp"

namespace nlockd::server {

StoreLockJournal::StoreLockJournal(const lock::LockManager& locks, store::Store& store)
    : locks_(locks), store_(store), log_(dynamic_cast<store::LoggedStore*>(&store)) {}

std::optional<store::OffsetSpan> StoreLockJournal::CurrentRanges(
    const nlm::JournalEntryRef& entry) {
  std::optional<store::OffsetSpan> within;
  const auto& near = entry.range;
  if (near && (unsynced_.empty() || !unsynced_.contains(OwnerKey(entry)))) {
    // The call changed only the owner's locks that overlap or touch its range; they and the
    // range span all the rows it can have changed (merged, split or released), and nothing else
    // of the owner's starts there, so only that span is rewritten.
    const uint64_t first = near->first() == 0 ? 0 : near->first() - 1;
    const uint64_t last = near->ToEnd() ? near->last() : near->last() + 1;
    locks_.OwnedLocks(entry.file, entry.owner, lock::ByteRange::FromFirstLast(first, last), held_);
    store::OffsetSpan span{near->first(), near->last()};
    for (const lock::PriorLocks::Entry& e : held_) {
      span.first = std::min(span.first, e.range.first());
      span.last = std::max(span.last, e.range.last());
    }
    within = span;
  } else {
    locks_.OwnedLocks(entry.file, entry.owner,
                      lock::ByteRange::FromFirstLast(0, lock::ByteRange::kMaxOffset), held_);
  }
  ranges_.clear();
  for (const lock::PriorLocks::Entry& e : held_) {
    ranges_.push_back(
        store::LockRange{e.type == lock::LockType::kExclusive, e.range.offset(), e.range.length()});
  }
  return within;
}

store::ReplaceLocks StoreLockJournal::CurrentLocks(const nlm::JournalEntryRef& entry) {
  store::ReplaceLocks replace;
  replace.within = CurrentRanges(entry);
  replace.ranges = ranges_;
  replace.file_key = entry.file.value();
  replace.host = entry.owner.host.value();
  replace.svid = entry.owner.svid;
  replace.owner_handle = entry.owner.oh.value();
  return replace;
}

StoreLockJournal::OwnerKeyView StoreLockJournal::OwnerKey(const nlm::JournalEntryRef& entry) {
  return OwnerKeyView{entry.file.value(), entry.owner.host.value(), entry.owner.svid,
                      entry.owner.oh.value()};
}

store::LockChange StoreLockJournal::CurrentShare(const lock::FileKey& file,
                                                 const lock::LockOwner& owner) const {
  store::ShareRecord record;
  record.file_key = file.value();
  record.host = owner.host.value();
  record.owner_handle = owner.oh.value();
  lock::StateFilter filter;
  filter.host = owner.host;
  filter.file = file;
  for (const lock::ShareInfo& share : locks_.ListShares(filter)) {
    if (!(share.owner == owner)) continue;
    record.mode = static_cast<int32_t>(share.deny);
    record.access = static_cast<int32_t>(share.access);
    return store::PutShare{std::move(record)};
  }
  return store::RemoveShare{std::move(record)};
}

std::optional<store::LockChange> StoreLockJournal::ChangeFor(const nlm::JournalEntryRef& entry) {
  if (entry.kind == nlm::JournalEntry::Kind::kShare) return CurrentShare(entry.file, entry.owner);
  if (HoldsRestoredRows(entry)) return std::nullopt;  // The store has these rows already.
  ForgetRestoredRows(entry);
  return CurrentLocks(entry);
}

StoreLockJournal::Plan StoreLockJournal::PlanWrites(const std::vector<nlm::JournalEntry>& entries) {
  Plan plan;
  std::vector<store::LockChange> batch;
  auto flush = [&] {
    if (batch.empty()) return;
    plan.changes += batch.size();
    plan.writes.push_back([this, changes = std::move(batch)](store::Done done) mutable {
      store_.ApplyLockChanges(std::move(changes), std::move(done));
    });
    batch.clear();
  };
  for (const nlm::JournalEntry& entry : entries) {
    switch (entry.kind) {
      case nlm::JournalEntry::Kind::kLocks:
      case nlm::JournalEntry::Kind::kShare:
        if (std::optional<store::LockChange> change = ChangeFor(entry)) {
          batch.push_back(std::move(*change));
        }
        break;
      case nlm::JournalEntry::Kind::kHostReleased:
        // Its own write, in order: later entries of the same call may lock again.
        flush();
        std::erase_if(restored_rows_, [&](const auto& row) {
          return std::get<1>(row.first) == entry.owner.host.value();
        });
        ++plan.changes;
        plan.writes.push_back([this, host = entry.owner.host.value()](store::Done done) {
          store_.ReleaseHost(host, std::move(done));
        });
        break;
    }
  }
  flush();
  return plan;
}

void StoreLockJournal::Failed(size_t changes, const std::exception_ptr& error) {
  ++failures_;
  spdlog::error("lock journal cannot persist {} changes: {}", changes, Describe(error));
}

asio::awaitable<bool> StoreLockJournal::Write(std::vector<store::Write> writes, size_t changes) {
  auto [error] = co_await store::AsyncWrite(std::move(writes), rpc::kUseTuple);
  if (!error) co_return true;
  Failed(changes, error);
  co_return false;
}

template <typename Entries>
void StoreLockJournal::MarkSynced(const Entries& entries) {
  if (unsynced_.empty()) return;
  for (const nlm::JournalEntryRef entry : entries) {
    if (entry.kind != nlm::JournalEntry::Kind::kLocks) continue;
    const auto it = unsynced_.find(OwnerKey(entry));
    if (it != unsynced_.end()) unsynced_.erase(it);
  }
}

template <typename Entries>
void StoreLockJournal::MarkUnsynced(const Entries& entries) {
  for (const nlm::JournalEntryRef entry : entries) {
    if (entry.kind != nlm::JournalEntry::Kind::kLocks) continue;
    const OwnerKeyView key = OwnerKey(entry);
    unsynced_.emplace(std::string(std::get<0>(key)), std::string(std::get<1>(key)),
                      std::get<2>(key), std::string(std::get<3>(key)));
  }
}

std::shared_ptr<StoreLockJournal::Batch> StoreLockJournal::WriteBatch(
    const asio::any_io_executor& executor, std::vector<nlm::JournalEntry> entries) {
  auto batch = std::make_shared<Batch>();
  batch->entries = std::move(entries);
  // One write per owner, file and range, however often the batch names them: the state is read
  // now, so a repeat would write the same rows again.
  auto key = [](const nlm::JournalEntry& e) {
    const bool ranged = e.range.has_value();
    return std::tuple<nlm::JournalEntry::Kind, const std::string&, const std::string&, int32_t,
                      const std::string&, bool, uint64_t, uint64_t>(
        e.kind, e.file.value(), e.owner.host.value(), e.owner.svid, e.owner.oh.value(), ranged,
        ranged ? e.range->first() : 0, ranged ? e.range->last() : 0);
  };
  std::sort(batch->entries.begin(), batch->entries.end(),
            [&](const auto& a, const auto& b) { return key(a) < key(b); });
  batch->entries.erase(std::unique(batch->entries.begin(), batch->entries.end(),
                                   [&](const auto& a, const auto& b) { return key(a) == key(b); }),
                       batch->entries.end());
  Plan plan = PlanWrites(batch->entries);
  // The owners written in full are in sync again unless this write fails.
  MarkSynced(batch->entries);
  auto finish = [this, batch, changes = plan.changes](std::exception_ptr error) {
    batch->ok = !error;
    batch->finished = true;
    if (error) {
      Failed(changes, error);
      MarkUnsynced(batch->entries);
    }
    // The waiting call made the timer before this could run: a completion that is not inline
    // comes through the executor, after the call's turn.
    if (batch->written) batch->written->Set();
  };
  if (plan.writes.size() != 1) {
    store::AsyncWrite(std::move(plan.writes), asio::bind_executor(executor, std::move(finish)));
    return batch;
  }
  // One write (no host release joins a batch). A store that acknowledges it at once, as the lock
  // log does, runs its Done on this thread within the call: the batch then completes here,
  // without a post back; one that finishes on its own thread posts the completion.
  plan.writes.front()([finish = std::move(finish), executor,
                       here = std::this_thread::get_id()](std::exception_ptr error) mutable {
    if (std::this_thread::get_id() == here) {
      finish(std::move(error));
      return;
    }
    asio::post(executor, [finish = std::move(finish), error = std::move(error)]() mutable {
      finish(std::move(error));
    });
  });
  return batch;
}

asio::awaitable<bool> StoreLockJournal::Record(std::vector<nlm::JournalEntry> entries) {
  const bool releases_host = std::any_of(entries.begin(), entries.end(), [](const auto& e) {
    return e.kind == nlm::JournalEntry::Kind::kHostReleased;
  });
  if (releases_host) {
    // Rare (FREE_ALL, a reboot): written on its own; the store applies writes in the order
    // they are submitted.
    Plan plan = PlanWrites(entries);
    MarkSynced(entries);
    const bool ok = co_await Write(std::move(plan.writes), plan.changes);
    if (!ok) MarkUnsynced(entries);
    co_return ok;
  }
  // NLM hands in the calls of a whole turn at once (nlm::JournalBarrier): written now, not
  // after another trip through the executor.
  const asio::any_io_executor executor = co_await asio::this_coro::executor;
  std::shared_ptr<Batch> batch = WriteBatch(executor, std::move(entries));
  if (!batch->finished) {
    batch->written.emplace(executor);
    co_await batch->written->Wait();
  }
  co_return batch->ok;
}

bool StoreLockJournal::RecordInline(std::span<const nlm::JournalEntryRef> entries) {
  NLOCKD_REQUIRE(records_inline());
  for (const nlm::JournalEntryRef& entry : entries) {
    NLOCKD_REQUIRE(entry.kind != nlm::JournalEntry::Kind::kHostReleased);
  }
  return log_ != nullptr ? AppendInline(entries) : ApplyInline(entries);
}

bool StoreLockJournal::AppendInline(std::span<const nlm::JournalEntryRef> entries) {
  record_.clear();
  store::LockChangesRecord record(record_);
  for (const nlm::JournalEntryRef& entry : entries) {
    if (entry.kind == nlm::JournalEntry::Kind::kShare) {
      record.Add(CurrentShare(entry.file, entry.owner));
      continue;
    }
    if (HoldsRestoredRows(entry)) continue;  // The store has these rows already.
    ForgetRestoredRows(entry);
    const std::optional<store::OffsetSpan> within = CurrentRanges(entry);
    record.Add(store::ReplaceLocksView{entry.file.value(), entry.owner.host.value(),
                                       entry.owner.svid, entry.owner.oh.value(), ranges_, within});
  }
  if (record.changes() == 0) return true;
  record.Finish();
  MarkSynced(entries);
  const std::exception_ptr error = log_->AppendLockChanges(record_);
  if (!error) return true;
  Failed(record.changes(), error);
  MarkUnsynced(entries);
  return false;
}

bool StoreLockJournal::ApplyInline(std::span<const nlm::JournalEntryRef> entries) {
  std::vector<store::LockChange> changes;
  changes.reserve(entries.size());
  for (const nlm::JournalEntryRef& entry : entries) {
    if (std::optional<store::LockChange> change = ChangeFor(entry)) {
      changes.push_back(std::move(*change));
    }
  }
  if (changes.empty()) return true;
  const size_t count = changes.size();
  MarkSynced(entries);
  bool acknowledged = false;
  std::exception_ptr error;
  store_.ApplyLockChanges(std::move(changes), [&](std::exception_ptr outcome) {
    error = std::move(outcome);
    acknowledged = true;
  });
  NLOCKD_ASSERT(acknowledged, "a store that acknowledges at once did not");
  if (!error) return true;
  Failed(count, error);
  MarkUnsynced(entries);
  return false;
}

void StoreLockJournal::RememberRestoredLock(const lock::RestoredLock& lock) {
  const lock::LockOwner& owner = lock.owner;
  restored_.emplace(false, lock.file.value(), owner.host.value(), owner.svid, owner.oh.value());
  std::vector<store::LockRange>& rows =
      restored_rows_[{lock.file.value(), owner.host.value(), owner.svid, owner.oh.value()}];
  const store::LockRange row{lock.type == lock::LockType::kExclusive, lock.range.offset(),
                             lock.range.length()};
  rows.insert(std::upper_bound(rows.begin(), rows.end(), row,
                               [](const auto& x, const auto& y) { return x.offset < y.offset; }),
              row);
}

bool StoreLockJournal::HoldsRestoredRows(const nlm::JournalEntryRef& entry) const {
  if (restored_rows_.empty()) return false;
  const auto known = restored_rows_.find(OwnerKey(entry));
  if (known == restored_rows_.end()) return false;
  const std::vector<lock::PriorLocks::Entry> held = locks_.OwnedLocks(entry.file, entry.owner);
  if (held.size() != known->second.size()) return false;
  // Both in offset order (OwnedLocks walks the file's locks in range order).
  for (size_t i = 0; i < held.size(); ++i) {
    const store::LockRange& row = known->second[i];
    if (row.exclusive != (held[i].type == lock::LockType::kExclusive) ||
        row.offset != held[i].range.offset() || row.length != held[i].range.length()) {
      return false;
    }
  }
  return true;
}

void StoreLockJournal::ForgetRestoredRows(const nlm::JournalEntryRef& entry) {
  if (restored_rows_.empty()) return;
  const auto known = restored_rows_.find(OwnerKey(entry));
  if (known != restored_rows_.end()) restored_rows_.erase(known);
}

void StoreLockJournal::RememberRestoredShare(const lock::FileKey& file,
                                             const lock::LockOwner& owner) {
  restored_.emplace(true, file.value(), owner.host.value(), owner.svid, owner.oh.value());
}

asio::awaitable<bool> StoreLockJournal::SettleRestored(std::optional<lock::HostId> host) {
  std::vector<nlm::JournalEntry> entries;
  for (auto it = restored_.begin(); it != restored_.end();) {
    const auto& [is_share, file, owner_host, svid, oh] = *it;
    if (host && owner_host != host->value()) {
      ++it;
      continue;
    }
    lock::LockOwner owner{lock::HostId(owner_host), svid, lock::OwnerHandle(oh)};
    nlm::JournalEntry entry = is_share
                                  ? nlm::JournalEntry::Share(lock::FileKey(file), std::move(owner))
                                  : nlm::JournalEntry::Locks(lock::FileKey(file), std::move(owner));
    // An owner that holds all its restored rows again (reclaimed, nothing dropped) needs none.
    if (is_share || !HoldsRestoredRows(entry)) {
      entries.push_back(std::move(entry));
    } else {
      ForgetRestoredRows(entry);
    }
    it = restored_.erase(it);
  }
  if (entries.empty()) co_return true;
  co_return co_await Record(std::move(entries));
}

}  // namespace nlockd::server
