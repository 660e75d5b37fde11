// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "store/postgres/pg_conn.hpp"
#include "store/postgres/pg_session_limits.hpp"

namespace nlockd::store {

// The lease of a service in a PostgreSQL store, as the database sees it.
struct LeaseView {
  std::string holder;  // who took it ("nlockd pid P on HOST"); "" once released
  int64_t epoch = 0;   // 1 for the first holder, +1 per takeover; the fencing token
  bool live = false;   // not expired and not released, by the database clock
  std::chrono::milliseconds remaining{0};  // until it expires, by the database clock
  // The holder holds the service's session lock on its lease connection (see LockSession).
  bool session_locked = false;
};

// A lease just taken.
struct LeaseGrant {
  int64_t epoch = 0;
  // How long the lease runs from when the database began the request, however long the request
  // then waited for the lease row: the taker may count it from when it sent the request.
  std::chrono::milliseconds valid_for{0};
};

// The lease row that makes one node at a time the active one of a service (the service name is
// the row's key, as it keys the service's state). Expiry is computed by the database's clock
// (clock_timestamp()), so the nodes' clocks need not agree. Each holder gets the next epoch; a
// PgStore opened with that epoch (StoreOptions::fence_epoch) checks it inside every write
// transaction, so a node that lost the lease can no longer commit. Owns one connection of its own
// (reopened after a failure), whose waits `limits` bound. Not thread-safe. Calls throw
// nlockd::Error: kDisconnected when the database is unreachable (a caller that cannot renew must
// treat the lease as lost by its own clock), kOverloaded when the lease row stayed locked past the
// lock timeout.
class PgLease {
 public:
  // Connects and creates the lease table and fence function if missing. Each connection sets
  // `limits` (LeaseSessionLimits) and logs a warning for any that does not hold.
  PgLease(std::string conninfo, std::chrono::seconds connect_timeout, std::string service,
          std::string holder, PgSessionLimits limits);

  // Takes the service's session advisory lock on this connection if it is free (it stays
  // taken until the session ends or UnlockSession()); returns whether this session holds it.
  // The active node holds it, so that a standby that can take it knows the active's database
  // session ended (the process died, or its connection did).
  bool LockSession();
  void UnlockSession();
  // Takes the lease for `length` if it is free (never taken, expired or released; or, when
  // this session holds the session lock, its holder held that lock: the holder's session
  // ended); returns the new epoch, or nullopt if another holder has a live lease. The lease
  // runs `length` from when the database granted it.
  std::optional<LeaseGrant> TryAcquire(std::chrono::milliseconds length);
  // Ends (pg_terminate_backend) the transaction that keeps the lease row locked, if the lease is
  // free by TryAcquire's rule: a transaction of an earlier holder (or taker) that cannot finish,
  // its connection cut after the fence but before COMMIT. It never committed, so its holder
  // never acted on it. Returns the server process ids ended. Throws kFailed when this role may
  // not end that process (another role's, without pg_signal_backend).
  std::vector<int> EndStaleTransactions();
  // Extends the lease held at epoch to now() + length; false if it is no longer ours (expired,
  // or taken at a later epoch). Takes the session lock first if this session lacks it.
  bool Renew(int64_t epoch, std::chrono::milliseconds length);
  // A round trip on the lease connection: throws kDisconnected once its session ended (and
  // with it the session lock).
  void Ping();
  // Gives the lease and the session lock up at once (a planned stop): the next TryAcquire of
  // any node succeeds.
  void Release(int64_t epoch);
  // The lease row, if the service ever had one.
  std::optional<LeaseView> Read();

  const std::string& service() const { return service_; }

 private:
  PgConn& Conn();
  // Runs fn on the connection; drops the connection when it failed so that the next call
  // reconnects.
  template <typename Fn>
  auto Run(Fn&& fn);

  const std::string conninfo_;
  const std::chrono::seconds connect_timeout_;
  const std::string service_;
  const std::string holder_;
  const PgSessionLimits limits_;
  std::unique_ptr<PgConn> conn_;
  bool session_locked_ = false;  // conn_'s session holds the session lock
};

// Creates the lease table and the fence function nlockd_fence(service, epoch) if missing.
// The function fails the transaction with SQLSTATE kFenceSqlState unless the service's lease is
// live at exactly that epoch; it share-locks the lease row, so a takeover waits for a fenced
// write in flight and the write, once committed, is seen by the new holder.
void EnsureLeaseSchema(PgConn& conn);

inline constexpr const char* kFenceSqlState = "NLFEN";

}  // namespace nlockd::store
