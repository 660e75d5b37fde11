// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "store/store.hpp"
#include "store/store_options.hpp"

namespace nlockd::store {

// The store a --store URI names:
//   "memory:"                         MemoryStore (nothing survives a restart)
//   "sqlite:PATH"                     SqliteStore on the file PATH (parent directories created),
//                                     its lock-table writes logged in PATH.journal.N first
//                                     (LoggedStore); PATH.lock holds the holder's PID
//   "postgresql://..." "postgres://..."  PgStore; any libpq connection URI
// Opening migrates the schema and records the start of this run (Store::startup()).
// Throws nlockd::Error with a message that says what is wrong: kFailed for an unknown scheme, a
// damaged or newer database; kDisconnected when PostgreSQL cannot be reached.
std::unique_ptr<Store> OpenStore(const std::string& uri, const StoreOptions& options);

// The file of a "sqlite:PATH" URI; nullopt for any other store.
std::optional<std::string> SqliteStorePath(const std::string& uri);

class FileHolder;

// The lock a SqliteStore holds on PATH.lock, taken by a process before it opens the store, so
// that what it does first (the status monitor's early round) is not done beside another process
// serving the store. Given to the store through StoreOptions::sqlite_lock, which keeps it: the
// lock is never released in between (two holders conflict, in one process too).
class SqliteStoreLock {
 public:
  // Throws nlockd::Error as opening the store would when another process holds it.
  explicit SqliteStoreLock(const std::string& path);
  ~SqliteStoreLock();
  SqliteStoreLock(const SqliteStoreLock&) = delete;
  SqliteStoreLock& operator=(const SqliteStoreLock&) = delete;

  const std::string& path() const { return path_; }
  // For the SqliteStore on `path`: the lock itself, once. Throws nlockd::Error for another path
  // or a lock already taken.
  std::unique_ptr<FileHolder> TakeHolder(const std::string& path);

 private:
  std::string path_;
  std::unique_ptr<FileHolder> holder_;
};

// Whether uri names a store several nodes share (PostgreSQL), whose rows are keyed by service.
bool IsSharedStoreUri(const std::string& uri);

// The default --store URI.
inline constexpr const char* kDefaultStoreUri = "sqlite:./var/nlockd.db";

}  // namespace nlockd::store
