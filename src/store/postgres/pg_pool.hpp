// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "store/postgres/pg_conn.hpp"

namespace nlockd::store {

struct PgPoolOptions {
  size_t size = 3;  // connections at most
  std::chrono::seconds connect_timeout{5};
  std::chrono::milliseconds backoff_initial{50};
  std::chrono::milliseconds backoff_max{2000};
};

// A small pool of PostgreSQL connections that reconnects, backing off, when the server goes
// away. Thread-safe. A connection is lent out whole (a Lease) and comes back when the lease ends,
// unless it broke, in which case the pool drops it and opens a new one when next asked.
class PgPool {
 public:
  // Lends one connection; returns it to the pool (or drops it, if broken) when destroyed.
  // REQUIRES: the pool outlives the lease.
  class Lease {
   public:
    Lease(Lease&& other) noexcept;
    Lease& operator=(Lease&&) = delete;
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    ~Lease();
    PgConn& conn() const { return *conn_; }

   private:
    friend class PgPool;
    Lease(PgPool& pool, std::unique_ptr<PgConn> conn) : pool_(&pool), conn_(std::move(conn)) {}
    PgPool* pool_;
    std::unique_ptr<PgConn> conn_;
  };

  // Connects the first connection at once, so that a server that cannot be reached is reported
  // at start-up: throws nlockd::Error(kDisconnected) naming the server and libpq's reason.
  PgPool(std::string conninfo, PgPoolOptions options);
  ~PgPool();
  PgPool(const PgPool&) = delete;
  PgPool& operator=(const PgPool&) = delete;

  // A healthy connection: an idle one, or a new one while fewer than `size` are open, connecting
  // with exponential backoff until `deadline`. Throws nlockd::Error: kDisconnected with the last
  // connect failure when the deadline passes (or the pool is shut down), kOverloaded when every
  // connection stays lent out until then.
  Lease Acquire(std::chrono::steady_clock::time_point deadline);

  // Wakes every Acquire waiting for a connection or a backoff; later ones fail at once.
  void Shutdown();

 private:
  void Return(std::unique_ptr<PgConn> conn);

  const std::string conninfo_;
  const PgPoolOptions options_;

  std::mutex mu_;  // guards idle_, open_, shut_down_
  std::condition_variable changed_;
  std::vector<std::unique_ptr<PgConn>> idle_;
  size_t open_ = 0;  // idle or lent out
  bool shut_down_ = false;
};

}  // namespace nlockd::store
