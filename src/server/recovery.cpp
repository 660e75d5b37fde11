// SPDX-License-Identifier: Apache-2.0
#include "server/recovery.hpp"

#include <spdlog/spdlog.h>

namespace nlockd::server {

GracePlan DecideGrace(const store::StartupInfo& startup, const store::LoadedState& loaded,
                      std::chrono::seconds configured) {
  using Kind = GracePlan::Kind;
  if (configured.count() <= 0) return {Kind::kNone, "grace disabled by configuration"};
  if (!startup.persistent) {
    return {Kind::kClassic, "the memory store cannot prove what was held before"};
  }
  if (startup.first_run) return {Kind::kNone, "new store: nothing was held before"};
  if (loaded.registrations.empty() && loaded.locks.empty() && loaded.shares.empty()) {
    return {Kind::kNone, "no monitored host, lock or share was recorded"};
  }
  if (startup.lock_table_complete) {
    return {Kind::kFineGrained, "restored lock table is complete"};
  }
  if (!startup.previous_boot_id.empty() && startup.previous_boot_id != startup.boot_id) {
    return {Kind::kClassic, "the host rebooted since the last run: lock writes may be lost"};
  }
  return {Kind::kClassic, "restored lock table may be incomplete"};
}

std::vector<lock::RestoredLock> ToRestoredLocks(const std::vector<store::LockRecord>& rows) {
  std::vector<lock::RestoredLock> locks;
  locks.reserve(rows.size());
  for (const store::LockRecord& row : rows) {
    auto range = lock::ByteRange::FromOffsetLength(row.offset, row.length);
    if (!range) {
      // Only a corrupt row can hold one: every persisted lock was validated when granted.
      spdlog::warn("restore: skipping lock with invalid range offset={} length={} host={}",
                   row.offset, row.length, row.host);
      continue;
    }
    locks.push_back(lock::RestoredLock{
        lock::FileKey(row.file_key),
        lock::LockOwner{lock::HostId(row.host), row.svid, lock::OwnerHandle(row.owner_handle)},
        *range, row.exclusive ? lock::LockType::kExclusive : lock::LockType::kShared});
  }
  return locks;
}

std::vector<lock::RestoredShare> ToRestoredShares(const std::vector<store::ShareRecord>& rows) {
  std::vector<lock::RestoredShare> shares;
  shares.reserve(rows.size());
  for (const store::ShareRecord& row : rows) {
    if (row.access < 0 || row.access > 3 || row.mode < 0 || row.mode > 3) {
      spdlog::warn("restore: skipping share with invalid mode={} access={} host={}", row.mode,
                   row.access, row.host);
      continue;
    }
    shares.push_back(lock::RestoredShare{
        lock::FileKey(row.file_key),
        lock::LockOwner{lock::HostId(row.host), 0, lock::OwnerHandle(row.owner_handle)},
        static_cast<lock::ShareAccess>(row.access), static_cast<lock::ShareDeny>(row.mode)});
  }
  return shares;
}

}  // namespace nlockd::server
