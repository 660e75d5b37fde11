// SPDX-License-Identifier: Apache-2.0
// LockManager: read-only views for the store, the admin API and tests.

#include <algorithm>
#include <utility>

#include "lock/lock_manager.hpp"

namespace nlockd::lock {

LockCounts LockManager::Counts() const {
  LockCounts counts;
  counts.locks = locks_;
  counts.awaiting_locks = awaiting_locks_;
  counts.shares = shares_;
  counts.awaiting_shares = awaiting_shares_;
  counts.waiters = waiters_;
  counts.pending_grants = pending_grants_;
  counts.owners = owners_.size();
  counts.files = files_.size() - idle_files_;
  counts.idle_files = idle_files_;
  counts.hosts = hosts_.size();
  counts.active_hosts = host_states_.size();
  return counts;
}

namespace {

// Calls fn(const FileState&) for the files `filter` selects, using the host's file index when
// it names a host.
template <typename Fn>
void ForEachSelectedFile(const std::unordered_map<FileKey, FileState>& files,
                         const std::unordered_map<const HostInfo*, HostState>& host_states,
                         const HostRegistry& hosts, const StateFilter& filter, Fn&& fn) {
  if (filter.file) {
    auto it = files.find(*filter.file);
    if (it != files.end()) fn(it->second);
    return;
  }
  if (filter.host) {
    const HostInfo* info = hosts.Find(*filter.host);
    if (info == nullptr) return;
    auto state = host_states.find(info);
    if (state == host_states.end()) return;
    for (const auto& [file, records] : state->second.files) fn(*file);
    return;
  }
  for (const auto& [key, file] : files) fn(file);
}

}  // namespace

void LockManager::ForEachLock(const std::function<void(const LockView&)>& fn,
                              const StateFilter& filter) const {
  ForEachSelectedFile(files_, host_states_, hosts_, filter, [&](const FileState& file) {
    file.locks.ForEach([&](const LockEntry& e) {
      const LockOwner& owner = owners_.owner(e.owner);
      if (filter.host && owner.host != *filter.host) return;
      fn(LockView{*file.key, owner, e.range, e.type, e.awaiting_reclaim});
    });
  });
}

std::vector<LockInfo> LockManager::ListLocks(const StateFilter& filter) const {
  std::vector<LockInfo> out;
  ForEachLock(
      [&](const LockView& v) {
        out.push_back(LockInfo{v.file, v.owner, v.range, v.type, v.awaiting_reclaim});
      },
      filter);
  return out;
}

std::vector<ShareInfo> LockManager::ListShares(const StateFilter& filter) const {
  std::vector<ShareInfo> out;
  ForEachSelectedFile(files_, host_states_, hosts_, filter, [&](const FileState& file) {
    for (const ShareEntry& e : file.shares.entries()) {
      const LockOwner& owner = owners_.owner(e.owner);
      if (filter.host && owner.host != *filter.host) continue;
      out.push_back(ShareInfo{*file.key, owner, e.access, e.deny, e.awaiting_reclaim});
    }
  });
  return out;
}

std::vector<WaiterInfo> LockManager::ListWaiters(const StateFilter& filter) const {
  std::vector<WaiterInfo> out;
  ForEachSelectedFile(files_, host_states_, hosts_, filter, [&](const FileState& file) {
    for (const Waiter& w : file.waiters) {
      const LockOwner& owner = owners_.owner(w.owner);
      if (filter.host && owner.host != *filter.host) continue;
      out.push_back(WaiterInfo{w.id, *file.key, owner, w.range, w.type,
                               w.state == Waiter::State::kGranted, w.since});
    }
  });
  return out;
}

std::vector<WaitForInfo> LockManager::ListWaitFor(const StateFilter& filter,
                                                  size_t max_blockers) const {
  std::vector<WaitForInfo> out;
  ForEachSelectedFile(files_, host_states_, hosts_, filter, [&](const FileState& file) {
    for (const Waiter& w : file.waiters) {
      const LockOwner& owner = owners_.owner(w.owner);
      if (filter.host && owner.host != *filter.host) continue;
      WaitForInfo info{WaiterInfo{w.id, *file.key, owner, w.range, w.type,
                                  w.state == Waiter::State::kGranted, w.since},
                       {},
                       0};
      if (w.state == Waiter::State::kQueued) {
        file.locks.ForEachOverlapping(w.range, [&](const LockEntry& e) {
          if (e.owner == w.owner || !TypesConflict(e.type, w.type)) return;
          if (++info.blockers > max_blockers) return;
          Blocker blocker{owners_.owner(e.owner), e.range, e.type, {}};
          wait_for_.ForEachWaiter(e.owner, [&](const Waiter& held) {
            if (blocker.holder_waits.size() < max_blockers) blocker.holder_waits.push_back(held.id);
          });
          std::sort(blocker.holder_waits.begin(), blocker.holder_waits.end());
          info.blocked_by.push_back(std::move(blocker));
        });
      }
      out.push_back(std::move(info));
    }
  });
  return out;
}

std::string LockManager::DebugString() const {
  std::vector<const FileState*> files;
  files.reserve(files_.size());
  for (const auto& [key, file] : files_) {
    if (!file.Empty()) files.push_back(&file);
  }
  std::sort(files.begin(), files.end(),
            [](const FileState* a, const FileState* b) { return *a->key < *b->key; });
  std::string out;
  for (const FileState* file : files) {
    out += "file " + EscapeBytes(file->key->value()) + "\n";
    file->locks.ForEach([&](const LockEntry& e) {
      out += "  lock " + owners_.owner(e.owner).ToString() + " " + std::string(ToString(e.type)) +
             " " + e.range.ToString() + (e.awaiting_reclaim ? " awaiting-reclaim" : "") + "\n";
    });
    for (const ShareEntry& e : file->shares.entries()) {
      out += "  share " + owners_.owner(e.owner).ToString() + " " +
             std::string(ToString(e.access)) + " " + std::string(ToString(e.deny)) +
             (e.awaiting_reclaim ? " awaiting-reclaim" : "") + "\n";
    }
    for (const Waiter& w : file->waiters) {
      out += "  waiter " + std::to_string(w.id.value()) + " " + owners_.owner(w.owner).ToString() +
             " " + std::string(ToString(w.type)) + " " + w.range.ToString() +
             (w.state == Waiter::State::kGranted ? " granted" : " queued") + "\n";
    }
  }
  return out;
}

}  // namespace nlockd::lock
