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

// The lock a SqliteStore holds on PATH.lock, taken by a process about to act on the store before
// it opens it (the status monitor's early round), so that nothing is done beside another
// process serving the store. Released before the store opens: both conflict, in one process too.
class SqliteStoreLock {
 public:
  // Throws nlockd::Error as opening the store would when another process holds it.
  explicit SqliteStoreLock(const std::string& path);
  ~SqliteStoreLock();
  SqliteStoreLock(const SqliteStoreLock&) = delete;
  SqliteStoreLock& operator=(const SqliteStoreLock&) = delete;

 private:
  std::unique_ptr<FileHolder> holder_;
};

// Whether uri names a store several nodes share (PostgreSQL), whose rows are keyed by service.
bool IsSharedStoreUri(const std::string& uri);

// The default --store URI.
inline constexpr const char* kDefaultStoreUri = "sqlite:./var/nlockd.db";

}  // namespace nlockd::store
