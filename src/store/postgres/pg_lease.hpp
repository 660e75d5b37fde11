#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "store/postgres/pg_conn.hpp"

namespace nlockd::store {

// The lease of a service in a PostgreSQL store, as the database sees it.
struct LeaseView {
  std::string holder;  // who took it ("nlockd pid P on HOST"); "" once released
  int64_t epoch = 0;   // 1 for the first holder, +1 per takeover; the fencing token
  bool live = false;   // not expired and not released, by the database clock
};

// The lease row that makes one node at a time the active one of a service (the service name is
// the row's key, as it keys the service's state). Expiry is computed by the database's clock
// (now()), so the nodes' clocks need not agree. Each holder gets the next epoch; a PgStore opened
// with that epoch (StoreOptions::fence_epoch) checks it inside every write transaction, so a node
// that lost the lease can no longer commit. Owns one connection of its own (reopened after a
// failure). Not thread-safe. Calls throw nlockd::Error: kDisconnected when the database is
// unreachable (a caller that cannot renew must treat the lease as lost by its own clock).
class PgLease {
 public:
  // Connects and creates the lease table and fence function if missing.
  PgLease(std::string conninfo, std::chrono::seconds connect_timeout, std::string service,
          std::string holder);

  // Takes the lease for `length` if it is free (never taken, expired or released); returns the
  // new epoch, or nullopt if another holder has a live lease.
  std::optional<int64_t> TryAcquire(std::chrono::milliseconds length);
  // Extends the lease held at epoch to now() + length; false if it is no longer ours (expired,
  // or taken at a later epoch).
  bool Renew(int64_t epoch, std::chrono::milliseconds length);
  // Gives the lease up at once (a planned stop): the next TryAcquire of any node succeeds.
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
  std::unique_ptr<PgConn> conn_;
};

// Creates the lease table and the fence function nlockd_fence(service, epoch) if missing.
// The function fails the transaction with SQLSTATE kFenceSqlState unless the service's lease is
// live at exactly that epoch; it share-locks the lease row, so a takeover waits for a fenced
// write in flight and the write, once committed, is seen by the new holder.
void EnsureLeaseSchema(PgConn& conn);

inline constexpr const char* kFenceSqlState = "NLFEN";

}  // namespace nlockd::store
