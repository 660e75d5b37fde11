// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "store/store.hpp"
#include "store/store_options.hpp"

namespace nlockd::store {

// Where Linux publishes the id of the current boot.
inline constexpr const char* kBootIdPath = "/proc/sys/kernel/random/boot_id";

// The per-node row that outlives a run: the state number and what the last run left behind.
struct RunRecord {
  int32_t state = 0;
  std::string boot_id;
  // Where the database keeps its own durability, when that is another machine: PostgreSQL's
  // server incarnation (it changes when the server restarts or recovers from a crash, which may
  // lose commits made with synchronous_commit off). "" for SQLite, whose file lives beside us.
  std::string storage_epoch;
  bool clean_shutdown = false;
  bool locks_complete = true;
  // The boot on which BumpState last moved the state (it records the run's boot_id); read only.
  std::string state_boot_id;
};

// What opening a store reports, and the record it writes (durably) before serving.
struct RunStart {
  StartupInfo info;
  RunRecord record;
};

// Decides, from the previous run's record (none for a new store), what start-up may trust:
// the lock table is complete unless a run ended uncleanly on an earlier boot (a local file:
// `storage_epoch` empty) or an earlier storage epoch (a database server, whatever host ran
// nlockd), and it stays incomplete (sticky) until MarkLockTableComplete(). A run that
// does not keep the lock table (StoreOptions::keeps_lock_table false) records it incomplete, so
// that the next start does not trust rows this run left stale.
RunStart BeginRun(const std::optional<RunRecord>& previous, const std::string& boot_id,
                  const std::string& storage_epoch, bool keeps_lock_table = true);

// The first line of the file at path, or "" if it cannot be read (then every unclean start
// counts as a host crash).
std::string ReadBootId(const std::string& path);

// options.boot_id, or the kernel's.
std::string CurrentBootId(const StoreOptions& options);

// Throws nlockd::Error(kFailed) unless the options can be used (node id syntax, sizes).
void ValidateOptions(const StoreOptions& options);

// options.wall_clock (or system_clock) now, truncated to microseconds, the precision stored.
std::chrono::system_clock::time_point WallNow(const StoreOptions& options);

}  // namespace nlockd::store
