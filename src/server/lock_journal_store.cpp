#include "server/lock_journal_store.hpp"

#include <spdlog/spdlog.h>

#include "rpc/use_tuple.hpp"

namespace nlockd::server {

namespace {

std::string Describe(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "unknown error";
  }
}

}  // namespace

store::ReplaceLocks StoreLockJournal::CurrentLocks(const lock::FileKey& file,
                                                   const lock::LockOwner& owner) const {
  store::ReplaceLocks replace;
  replace.file_key = file.value();
  replace.host = owner.host.value();
  replace.svid = owner.svid;
  replace.owner_handle = owner.oh.value();
  lock::StateFilter filter;
  filter.host = owner.host;
  filter.file = file;
  locks_.ForEachLock(
      [&](const lock::LockView& view) {
        if (!(view.owner == owner)) return;
        replace.ranges.push_back(store::LockRange{view.type == lock::LockType::kExclusive,
                                                  view.range.offset(), view.range.length()});
      },
      filter);
  return replace;
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
        batch.push_back(CurrentLocks(entry.file, entry.owner));
        break;
      case nlm::JournalEntry::Kind::kShare:
        batch.push_back(CurrentShare(entry.file, entry.owner));
        break;
      case nlm::JournalEntry::Kind::kHostReleased:
        // Its own write, in order: later entries of the same call may lock again.
        flush();
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

asio::awaitable<bool> StoreLockJournal::Write(std::vector<store::Write> writes, size_t changes) {
  auto [error] = co_await store::AsyncWrite(std::move(writes), rpc::kUseTuple);
  if (!error) co_return true;
  ++failures_;
  spdlog::error("lock journal cannot persist {} changes: {}", changes, Describe(error));
  co_return false;
}

asio::awaitable<bool> StoreLockJournal::Record(std::vector<nlm::JournalEntry> entries) {
  Plan plan = PlanWrites(entries);
  co_return co_await Write(std::move(plan.writes), plan.changes);
}

void StoreLockJournal::RememberRestoredLock(const lock::FileKey& file,
                                            const lock::LockOwner& owner) {
  restored_.emplace(false, file.value(), owner.host.value(), owner.svid, owner.oh.value());
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
    entries.push_back(is_share ? nlm::JournalEntry::Share(lock::FileKey(file), std::move(owner))
                               : nlm::JournalEntry::Locks(lock::FileKey(file), std::move(owner)));
    it = restored_.erase(it);
  }
  if (entries.empty()) co_return true;
  co_return co_await Record(std::move(entries));
}

}  // namespace nlockd::server
