// SPDX-License-Identifier: Apache-2.0
#include "store/postgres/pg_lease.hpp"

#include <utility>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "base/error.hpp"

namespace nlockd::store {
namespace {

// pg_advisory_xact_lock key that serialises schema changes of nodes sharing a database (the
// same key PgStore's migrations take).
constexpr int64_t kSchemaLockKey = 0x6e6c6f636b64;  // "nlockd"

// The class of the session advisory lock (class, hashtext(service)) that the active node holds
// on its lease connection: while that session lives the lock stays taken. Distinct from the
// class of the non-HA holder lock of PgStore, which a node with ha never takes.
constexpr int32_t kLeaseSessionLockClass = 0x4e4c5353;  // "NLSS"

// PostgreSQL-only: SQLite stores serve one node and have no lease. Expiry is read from
// clock_timestamp(), the database's clock at the statement, not the transaction's start.
constexpr const char* kLeaseDdl = R"sql(
CREATE TABLE IF NOT EXISTS service_lease (
  service TEXT NOT NULL PRIMARY KEY,
  holder TEXT NOT NULL,
  epoch BIGINT NOT NULL,
  expires_at TIMESTAMPTZ NOT NULL
);
-- Whether the holder holds the session lock of the service: only then may a standby that
-- takes that lock conclude that the holder's session ended and take the lease before expiry.
ALTER TABLE service_lease ADD COLUMN IF NOT EXISTS session_locked BOOLEAN NOT NULL DEFAULT false;
-- The holder's lease length (0: taken by a build before it was recorded): the holder's store
-- bounds its sessions' waits by it (StoreSessionLimits).
ALTER TABLE service_lease ADD COLUMN IF NOT EXISTS lease_ms BIGINT NOT NULL DEFAULT 0;
CREATE OR REPLACE FUNCTION nlockd_fence(p_service TEXT, p_epoch BIGINT) RETURNS INTEGER
LANGUAGE plpgsql AS $fence$
DECLARE
  held BIGINT;
  live BOOLEAN;
BEGIN
  SELECT epoch, expires_at > clock_timestamp() INTO held, live
    FROM service_lease WHERE service = p_service FOR SHARE;
  IF held IS DISTINCT FROM p_epoch OR NOT live THEN
    RAISE EXCEPTION 'nlockd lease lost: service % is no longer held at epoch % (lease epoch %)',
      p_service, p_epoch, held USING ERRCODE = 'NLFEN';
  END IF;
  RETURN 1;
END
$fence$;
)sql";

// Whether kLeaseDdl ran already: its newest column exists. Reads the catalog only.
constexpr const char* kLeaseSchemaCurrentSql =
    "SELECT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass('service_lease') "
    "AND attname = 'lease_ms' AND NOT attisdropped)::int4";

constexpr const char* kTryLockSql = "SELECT pg_try_advisory_lock($1, hashtext($2))::int4";
constexpr const char* kUnlockSql = "SELECT pg_advisory_unlock($1, hashtext($2))::int4";

// $4: whether this session holds the session lock. The lease is free when it expired, or when
// its holder held the session lock and this session now holds it (the holder's session ended).
// The expiry of a takeover is computed in DO UPDATE, which runs once the row is locked: a
// takeover that waited for the row (for a fenced write of the old holder) gets a full lease
// from the moment it was granted, not one that ran out while it waited. It returns how long the
// lease runs from the statement's start (statement_timestamp(), when the database began this
// request, hence after the taker sent it): the taker counts that from the moment it sent the
// request.
constexpr const char* kAcquireSql =
    "INSERT INTO service_lease (service, holder, epoch, expires_at, session_locked, lease_ms) "
    "VALUES ($1, $2, 1, clock_timestamp() + $3::float8 * interval '1 millisecond', "
    "$4::int4 <> 0, $3) "
    "ON CONFLICT (service) DO UPDATE SET holder = excluded.holder, "
    "epoch = service_lease.epoch + 1, "
    "expires_at = clock_timestamp() + $3::float8 * interval '1 millisecond', "
    "session_locked = excluded.session_locked, lease_ms = excluded.lease_ms "
    "WHERE service_lease.expires_at <= clock_timestamp() "
    "OR (excluded.session_locked AND service_lease.session_locked) "
    "RETURNING epoch, "
    "FLOOR(EXTRACT(EPOCH FROM expires_at - statement_timestamp()) * 1000)::int8";

constexpr const char* kRenewSql =
    "UPDATE service_lease SET expires_at = clock_timestamp() + $3::float8 * interval "
    "'1 millisecond', session_locked = session_locked OR $4::int4 <> 0, lease_ms = $3 "
    "WHERE service = $1 AND epoch = $2 AND expires_at > clock_timestamp() "
    "RETURNING epoch";

constexpr const char* kReleaseSql =
    "UPDATE service_lease SET holder = '', expires_at = clock_timestamp() "
    "WHERE service = $1 AND epoch = $2";

constexpr const char* kReadSql =
    "SELECT holder, epoch, (expires_at > clock_timestamp())::int4, "
    "GREATEST(0, EXTRACT(EPOCH FROM expires_at - clock_timestamp()) * 1000)::int8, "
    "session_locked::int4 FROM service_lease WHERE service = $1";

// The transaction holding the lease row locked (its xmax: a share-locker's, or an uncommitted
// updater's), provided that the lease is free by the rule of kAcquireSql ($2: this session
// holds the session lock) and that transaction touched service_lease. Several share-lockers at
// once (a MultiXact in xmax) match nothing: nlockd's fenced writes run on one connection.
constexpr const char* kEndStaleSql =
    "SELECT l.pid::int4, pg_terminate_backend(l.pid)::int4 FROM service_lease s "
    "JOIN pg_locks l ON l.locktype = 'transactionid' AND l.transactionid = s.xmax "
    "AND l.mode = 'ExclusiveLock' AND l.granted "
    "WHERE s.service = $1 AND l.pid <> pg_backend_pid() "
    "AND (s.expires_at <= clock_timestamp() OR (s.session_locked AND $2::int4 <> 0)) "
    "AND EXISTS (SELECT 1 FROM pg_locks r WHERE r.pid = l.pid AND r.locktype = 'relation' "
    "AND r.relation = 'service_lease'::regclass AND r.granted)";

}  // namespace

void EnsureLeaseSchema(PgConn& conn) {
  // ALTER TABLE takes the table's strongest lock before it looks whether there is anything to
  // do: it would wait for any open transaction that fenced (one stranded by a network fault
  // for as long as the server keeps it), and every lease statement and fence would queue
  // behind it. So the DDL runs only when the newest column is missing.
  bool current = false;
  conn.ForEachRow(PgStep{nullptr, kLeaseSchemaCurrentSql, {}, {}},
                  [&](const SqlRow& row) { current = row.Int(0) != 0; });
  if (current) return;
  conn.Exec("BEGIN");
  try {
    conn.Exec(fmt::format("SELECT pg_advisory_xact_lock({})", kSchemaLockKey));
    conn.Exec(kLeaseDdl);
    conn.Exec("COMMIT");
  } catch (...) {
    if (conn.ok()) conn.Exec("ROLLBACK");
    throw;
  }
}

PgLease::PgLease(std::string conninfo, std::chrono::seconds connect_timeout, std::string service,
                 std::string holder, PgSessionLimits limits)
    : conninfo_(std::move(conninfo)),
      connect_timeout_(connect_timeout),
      service_(std::move(service)),
      holder_(std::move(holder)),
      limits_(limits) {
  EnsureLeaseSchema(Conn());
}

PgConn& PgLease::Conn() {
  if (!conn_ || !conn_->ok()) {
    conn_.reset();
    session_locked_ = false;  // a new session holds nothing
    auto conn = std::make_unique<PgConn>(conninfo_, connect_timeout_, limits_.client);
    for (const std::string& problem : ApplySessionLimits(*conn, limits_)) {
      spdlog::warn(
          "ha: the lease connection of service '{}' cannot bound its waits as it should: {}; "
          "a takeover may then wait for a stranded transaction (docs/operator-guide.md, High "
          "availability)",
          service_, problem);
    }
    conn_ = std::move(conn);
  }
  return *conn_;
}

template <typename Fn>
auto PgLease::Run(Fn&& fn) {
  try {
    return fn(Conn());
  } catch (...) {
    if (conn_ && !conn_->ok()) {
      conn_.reset();
      session_locked_ = false;
    }
    throw;
  }
}

bool PgLease::LockSession() {
  if (session_locked_ && conn_ && conn_->ok()) return true;
  return Run([&](PgConn& conn) {
    const std::vector<SqlValue> params{SqlValue::Int32(kLeaseSessionLockClass),
                                       SqlValue::Text(service_)};
    conn.ForEachRow(PgStep{nullptr, kTryLockSql, params, {}},
                    [&](const SqlRow& row) { session_locked_ = row.Int(0) != 0; });
    return session_locked_;
  });
}

void PgLease::UnlockSession() {
  if (!session_locked_) return;
  Run([&](PgConn& conn) {
    const std::vector<SqlValue> params{SqlValue::Int32(kLeaseSessionLockClass),
                                       SqlValue::Text(service_)};
    conn.ForEachRow(PgStep{nullptr, kUnlockSql, params, {}}, [](const SqlRow&) {});
    session_locked_ = false;
  });
}

std::optional<LeaseGrant> PgLease::TryAcquire(std::chrono::milliseconds length) {
  return Run([&](PgConn& conn) {
    const std::vector<SqlValue> params{SqlValue::Text(service_), SqlValue::Text(holder_),
                                       SqlValue::Int64(length.count()),
                                       SqlValue::Int32(session_locked_ ? 1 : 0)};
    std::optional<LeaseGrant> grant;
    conn.ForEachRow(PgStep{nullptr, kAcquireSql, params, {}}, [&](const SqlRow& row) {
      grant = LeaseGrant{row.Int(0), std::chrono::milliseconds(row.Int(1))};
    });
    return grant;
  });
}

std::vector<int> PgLease::EndStaleTransactions() {
  return Run([&](PgConn& conn) {
    const std::vector<SqlValue> params{SqlValue::Text(service_),
                                       SqlValue::Int32(session_locked_ ? 1 : 0)};
    std::vector<int> ended;
    conn.ForEachRow(PgStep{nullptr, kEndStaleSql, params, {}}, [&](const SqlRow& row) {
      if (row.Int(1) != 0) ended.push_back(static_cast<int>(row.Int(0)));
    });
    return ended;
  });
}

bool PgLease::Renew(int64_t epoch, std::chrono::milliseconds length) {
  // An active node that took the lease by expiry while the old holder's session still held
  // the session lock takes that lock as soon as it is free.
  if (!session_locked_) LockSession();
  return Run([&](PgConn& conn) {
    const std::vector<SqlValue> params{SqlValue::Text(service_), SqlValue::Int64(epoch),
                                       SqlValue::Int64(length.count()),
                                       SqlValue::Int32(session_locked_ ? 1 : 0)};
    bool renewed = false;
    conn.ForEachRow(PgStep{nullptr, kRenewSql, params, {}}, [&](const SqlRow&) { renewed = true; });
    return renewed;
  });
}

void PgLease::Ping() {
  Run([&](PgConn& conn) { conn.Exec("SELECT 1"); });
}

void PgLease::Release(int64_t epoch) {
  Run([&](PgConn& conn) {
    const std::vector<SqlValue> params{SqlValue::Text(service_), SqlValue::Int64(epoch)};
    conn.ForEachRow(PgStep{nullptr, kReleaseSql, params, {}}, [](const SqlRow&) {});
  });
  UnlockSession();
}

std::optional<LeaseView> PgLease::Read() {
  return Run([&](PgConn& conn) {
    const std::vector<SqlValue> params{SqlValue::Text(service_)};
    std::optional<LeaseView> view;
    conn.ForEachRow(PgStep{nullptr, kReadSql, params, {}}, [&](const SqlRow& row) {
      view = LeaseView{std::string(row.Bytes(0)), row.Int(1), row.Int(2) != 0,
                       std::chrono::milliseconds(row.Int(3)), row.Int(4) != 0};
    });
    return view;
  });
}

}  // namespace nlockd::store
