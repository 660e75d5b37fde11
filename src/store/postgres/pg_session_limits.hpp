// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "store/postgres/pg_conn.hpp"

namespace nlockd::store {

// The bounds an HA node puts on the waits of one kind of PostgreSQL session, all chosen from the
// lease length (docs/decisions/0017, addendum "bounded waits"): set with SET on the session when
// it connects (server side) and as libpq parameters (client side). A zero field leaves that
// setting alone.
struct PgSessionLimits {
  // How long a statement waits for a lock (lock_timeout).
  std::chrono::milliseconds lock_timeout{0};
  // The server ends a session left idle inside a transaction this long
  // (idle_in_transaction_session_timeout).
  std::chrono::milliseconds idle_in_transaction{0};
  // The server's TCP keepalive and user timeout on this session (tcp_keepalives_idle,
  // tcp_keepalives_interval, tcp_keepalives_count, tcp_user_timeout).
  std::chrono::seconds server_keepalives_idle{0};
  std::chrono::seconds server_keepalives_interval{0};
  int server_keepalives_count = 0;
  std::chrono::milliseconds server_user_timeout{0};
  // The client's side of the same (libpq connection parameters).
  PgClientTcp client;
};

// The lease connection of an HA node (PgLease). Its statements touch one row; a fenced write of
// the holder keeps that row share-locked for a commit's time. The server must not end a
// partitioned holder's lease session (which frees its session lock, letting a standby take over
// at once) before that holder stopped by its own deadline, at most one lease after the cut: its
// server-side TCP timeouts are therefore at least a lease, whatever the server's defaults.
PgSessionLimits LeaseSessionLimits(std::chrono::milliseconds lease);

// The store connections of the active node (a PgStore fenced at the lease's epoch). Nothing
// depends on these sessions living on: the server may end them as soon as their path looks dead,
// and must end a transaction stranded between statements within half a lease, so that a
// standby is not kept waiting for its locks.
PgSessionLimits StoreSessionLimits(std::chrono::milliseconds lease);

// Sets `limits` on the session (and statement_timeout to 0: a statement timeout that cancels a
// commit's wait for a synchronous replica makes PostgreSQL report a commit that the replica may
// not have), then reads them back in a second round trip. Returns, for each setting that does not
// hold (a server that lacks it, a pooler that drops SET, a role pinned by the administrator), a
// sentence saying so; empty if all hold. Throws nlockd::Error as PgConn does when the connection
// fails.
std::vector<std::string> ApplySessionLimits(PgConn& conn, const PgSessionLimits& limits);

}  // namespace nlockd::store
