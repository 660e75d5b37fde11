// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace nlockd::store {

class SqliteStoreLock;

// How hard SQLite syncs a transaction that holds a durable (fsync-class) write; PRAGMA synchronous.
enum class SqliteSync { kOff, kNormal, kFull, kExtra };

// When SQLite's PRAGMA quick_check runs at open (it reads every page: about 0.4 s per million
// locks), so that a damaged file is refused at start-up rather than met by a later write.
enum class SqliteCheck {
  kNever,
  kAfterUncleanShutdown,  // when the last run of this node crashed: when a torn write can be
  kAlways,
};

// Everything a store is configured with beyond its URI. The defaults are the production values.
struct StoreOptions {
  // The node this nlockd is; every row carries it and a store sees only its own node's rows, so
  // that several nodes can share one PostgreSQL database. 1..128 bytes of [A-Za-z0-9._:@-].
  std::string node_id = "default";

  // PostgreSQL with --ha: the epoch of the service's lease this node holds (PgLease; node_id is
  // the service). Every write transaction then checks, inside the transaction, that the lease is
  // still live at this epoch and fails with LeaseLost otherwise, and the store takes no session
  // lock on the node (the lease decides who is active). 0: no lease; a session lock makes the
  // node one process's.
  int64_t fence_epoch = 0;
  // With fence_epoch: called (on the writer thread, before the failed writes complete) when a
  // write is refused because the lease is gone, so that the process stops serving at once
  // rather than waiting for its lease keeper to notice. Must not throw.
  std::function<void(const std::string& what)> on_lease_lost;

  // The kernel's boot id; empty means read kBootIdPath. Tests inject one to fake a host reboot.
  std::string boot_id;

  // SQLite: the store's lock, taken by the caller before it opened the store (the status
  // monitor's early round decides under it); the store keeps it rather than taking it again.
  std::shared_ptr<SqliteStoreLock> sqlite_lock;

  // Whether this run writes the lock table (nlockd --persist-locks). false records the table as
  // incomplete for the next start, whatever the previous run left.
  bool keeps_lock_table = true;

  // The wall clock that stamps registrations and the state history; null means system_clock.
  std::function<std::chrono::system_clock::time_point()> wall_clock;

  // Group commit: the writer thread commits every queued write in one transaction. false commits
  // one transaction per write (the benchmark's baseline).
  bool group_commit = true;
  // Writes per transaction at most; bounds the latency a huge backlog adds to its first write.
  size_t max_batch = 1024;
  // Writes waiting for the writer at most; past it writes fail with kOverloaded, so a store that
  // cannot keep up (disk stalled, database gone) does not take all memory.
  size_t max_queued = 100000;

  // SQLite: synchronous level of transactions holding a durable write. Lock-table-only
  // transactions use NORMAL (or this level, if lower).
  SqliteSync sqlite_synchronous = SqliteSync::kFull;
  // SQLite: when to check the file's integrity at open.
  SqliteCheck sqlite_check = SqliteCheck::kAfterUncleanShutdown;
  // SQLite: how long a write waits for another process holding the database lock.
  std::chrono::milliseconds sqlite_busy_timeout{5000};
  // SQLite: a database file of at least this size has its locks read at start-up (LoadAll) on
  // two connections at once, half each; a smaller one on one connection, without opening the
  // second, which costs more than reading a small table (at start-up in a slow VM, a second
  // open is about a tenth of the store's opening).
  uint64_t sqlite_split_scan_min_bytes = 16U << 20;

  // PostgreSQL: connections in the pool, at least 2 (one is the writer's; the rest serve reads).
  size_t pg_pool_size = 3;
  // PostgreSQL: connect_timeout for each attempt, unless the URI sets one.
  std::chrono::seconds pg_connect_timeout{5};
  // PostgreSQL: how long a write waits for the server to come back before it fails with
  // kDisconnected. Reconnects back off from pg_backoff_initial, doubling up to pg_backoff_max.
  std::chrono::milliseconds pg_retry_for{30000};
  std::chrono::milliseconds pg_backoff_initial{50};
  std::chrono::milliseconds pg_backoff_max{2000};
};

}  // namespace nlockd::store
