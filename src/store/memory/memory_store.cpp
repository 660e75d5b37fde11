// SPDX-License-Identifier: Apache-2.0
#include "store/memory/memory_store.hpp"

#include <utility>

#include "store/run_record.hpp"

namespace nlockd::store {
namespace {

std::tuple<std::string, std::string, int32_t, int32_t, int32_t> KeyOf(const std::string& mon_name,
                                                                      const MyId& id) {
  return {mon_name, id.my_name, id.my_prog, id.my_vers, id.my_proc};
}

std::tuple<std::string, std::string, int32_t, std::string, uint64_t> KeyOf(const LockRecord& l) {
  return {l.file_key, l.host, l.svid, l.owner_handle, l.offset};
}

std::tuple<std::string, std::string, std::string> KeyOf(const ShareRecord& s) {
  return {s.file_key, s.host, s.owner_handle};
}

template <typename Map, typename Pred>
void EraseIf(Map& map, Pred pred) {
  for (auto it = map.begin(); it != map.end();) {
    it = pred(it->second) ? map.erase(it) : std::next(it);
  }
}

}  // namespace

// Applies one write to the maps. REQUIRES: store.mu_ held.
struct MemoryStore::Applier {
  MemoryStore& store;

  void operator()(const PutRegistrationOp& op) const {
    Registration row = op.registration;
    row.updated = WallNow(store.options_);
    auto key = KeyOf(row.mon_name, row.my_id);
    auto it = store.registrations_.find(key);
    row.created = it == store.registrations_.end() ? row.updated : it->second.created;
    store.registrations_[std::move(key)] = std::move(row);
  }
  void operator()(const RemoveRegistrationOp& op) const {
    store.registrations_.erase(KeyOf(op.mon_name, op.my_id));
  }
  void operator()(const RemoveRegistrationsOfOp& op) const {
    EraseIf(store.registrations_, [&](const Registration& r) { return r.my_id == op.my_id; });
  }
  void operator()(const PutNotifyOwedOp& op) const {
    for (const NotifyOwed& owed : op.owed) {
      store.notify_owed_[owed.mon_name] = owed;
    }
  }
  void operator()(const ClearOp&) const {
    store.registrations_.clear();
    store.locks_.clear();
    store.shares_.clear();
  }
  void operator()(const BumpStateOp& op) const {
    store.state_ = op.to.value_or(NextOddState(store.state_));
    store.history_.push_back({store.state_, WallNow(store.options_)});
    *op.new_state = store.state_;
  }
  void operator()(const MarkCleanShutdownOp&) const {
    store.state_ = NextEvenState(store.state_);
    store.history_.push_back({store.state_, WallNow(store.options_)});
  }
  void operator()(const LockChangesOp& op) const {
    for (const LockChange& change : op.changes) {
      std::visit(*this, change);
    }
  }
  void operator()(const PutLock& change) const { store.locks_[KeyOf(change.lock)] = change.lock; }
  void operator()(const RemoveLock& change) const { store.locks_.erase(KeyOf(change.lock)); }
  void operator()(const ReplaceLocks& change) const {
    EraseIf(store.locks_, [&](const LockRecord& l) {
      return l.file_key == change.file_key && l.host == change.host && l.svid == change.svid &&
             l.owner_handle == change.owner_handle &&
             (!change.within || change.within->Contains(l.offset));
    });
    for (const LockRange& range : change.ranges) {
      LockRecord lock{change.file_key, change.host,  change.svid, change.owner_handle,
                      range.exclusive, range.offset, range.length};
      store.locks_[KeyOf(lock)] = std::move(lock);
    }
  }
  void operator()(const PutShare& change) const {
    store.shares_[KeyOf(change.share)] = change.share;
  }
  void operator()(const RemoveShare& change) const { store.shares_.erase(KeyOf(change.share)); }
  void operator()(const ReleaseHostOp& op) const {
    EraseIf(store.locks_, [&](const LockRecord& l) { return l.host == op.host; });
    EraseIf(store.shares_, [&](const ShareRecord& s) { return s.host == op.host; });
  }
  void operator()(const RemoveNotifyOwedOp& op) const { store.notify_owed_.erase(op.mon_name); }
  void operator()(const MarkLockTableCompleteOp&) const {}
};

MemoryStore::MemoryStore(StoreOptions options) : options_(std::move(options)) {
  ValidateOptions(options_);
  startup_.persistent = false;
  startup_.first_run = true;
  startup_.boot_id = CurrentBootId(options_);
}

LoadedState MemoryStore::LoadAll() {
  std::lock_guard lock(mu_);
  LoadedState loaded;
  loaded.state = state_;
  for (const auto& [key, row] : registrations_) loaded.registrations.push_back(row);
  for (const auto& [key, row] : locks_) loaded.locks.push_back(row);
  for (const auto& [key, row] : shares_) loaded.shares.push_back(row);
  for (const auto& [key, row] : notify_owed_) loaded.notify_owed.push_back(row);
  return loaded;
}

StoreCounts MemoryStore::Counts() {
  std::lock_guard lock(mu_);
  return {registrations_.size(), locks_.size(), shares_.size(), notify_owed_.size()};
}

std::vector<StateChange> MemoryStore::StateHistory() {
  std::lock_guard lock(mu_);
  return history_;
}

void MemoryStore::Submit(WriteOp op, Done done) {
  {
    std::lock_guard lock(mu_);
    std::visit(Applier{*this}, op);
  }
  done(nullptr);
}

}  // namespace nlockd::store
