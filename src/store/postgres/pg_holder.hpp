// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "store/postgres/pg_conn.hpp"

namespace nlockd::store {

// Makes this process the only one serving a node of a PostgreSQL store: a session-level advisory
// lock keyed by the node id, held on a connection of its own for the store's life. PostgreSQL
// drops it when that session ends, so a crashed or killed holder (or its lost connection) never
// leaves the node locked. Other nodes of the same database take other keys. Not thread-safe.
class PgHolder {
 public:
  // Connects and takes the lock. Throws nlockd::Error: kFailed naming the holder's nlockd PID,
  // host and backend when another session holds it; kDisconnected when the server cannot be
  // reached.
  PgHolder(const std::string& conninfo, std::chrono::seconds connect_timeout,
           const std::string& node_id);

  // Whether the session holding the lock is still up, as far as libpq knows.
  bool ok() const { return conn_->ok(); }

 private:
  std::unique_ptr<PgConn> conn_;
};

}  // namespace nlockd::store
