#include "store/postgres/pg_lease.hpp"

#include <utility>
#include <vector>

#include <fmt/format.h>

#include "base/error.hpp"

namespace nlockd::store {
namespace {

// pg_advisory_xact_lock key that serialises schema changes of nodes sharing a database (the
// same key PgStore's migrations take).
constexpr int64_t kSchemaLockKey = 0x6e6c6f636b64;  // "nlockd"

// PostgreSQL-only: SQLite stores serve one node and have no lease. Expiry is read from
// clock_timestamp(), the database's clock at the statement, not the transaction's start.
constexpr const char* kLeaseDdl = R"sql(
CREATE TABLE IF NOT EXISTS service_lease (
  service TEXT NOT NULL PRIMARY KEY,
  holder TEXT NOT NULL,
  epoch BIGINT NOT NULL,
  expires_at TIMESTAMPTZ NOT NULL
);
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

constexpr const char* kAcquireSql =
    "INSERT INTO service_lease (service, holder, epoch, expires_at) "
    "VALUES ($1, $2, 1, clock_timestamp() + $3::float8 * interval '1 millisecond') "
    "ON CONFLICT (service) DO UPDATE SET holder = excluded.holder, "
    "epoch = service_lease.epoch + 1, expires_at = excluded.expires_at "
    "WHERE service_lease.expires_at <= clock_timestamp() RETURNING epoch";

constexpr const char* kRenewSql =
    "UPDATE service_lease SET expires_at = clock_timestamp() + $3::float8 * interval "
    "'1 millisecond' WHERE service = $1 AND epoch = $2 AND expires_at > clock_timestamp() "
    "RETURNING epoch";

constexpr const char* kReleaseSql =
    "UPDATE service_lease SET holder = '', expires_at = clock_timestamp() "
    "WHERE service = $1 AND epoch = $2";

constexpr const char* kReadSql =
    "SELECT holder, epoch, (expires_at > clock_timestamp())::int4 FROM service_lease "
    "WHERE service = $1";

}  // namespace

void EnsureLeaseSchema(PgConn& conn) {
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
                 std::string holder)
    : conninfo_(std::move(conninfo)),
      connect_timeout_(connect_timeout),
      service_(std::move(service)),
      holder_(std::move(holder)) {
  EnsureLeaseSchema(Conn());
}

PgConn& PgLease::Conn() {
  if (!conn_ || !conn_->ok()) {
    conn_.reset();
    conn_ = std::make_unique<PgConn>(conninfo_, connect_timeout_);
  }
  return *conn_;
}

template <typename Fn>
auto PgLease::Run(Fn&& fn) {
  try {
    return fn(Conn());
  } catch (...) {
    if (conn_ && !conn_->ok()) conn_.reset();
    throw;
  }
}

std::optional<int64_t> PgLease::TryAcquire(std::chrono::milliseconds length) {
  return Run([&](PgConn& conn) {
    const std::vector<SqlValue> params{SqlValue::Text(service_), SqlValue::Text(holder_),
                                       SqlValue::Int64(length.count())};
    std::optional<int64_t> epoch;
    conn.ForEachRow(PgStep{nullptr, kAcquireSql, params, {}},
                    [&](const SqlRow& row) { epoch = row.Int(0); });
    return epoch;
  });
}

bool PgLease::Renew(int64_t epoch, std::chrono::milliseconds length) {
  return Run([&](PgConn& conn) {
    const std::vector<SqlValue> params{SqlValue::Text(service_), SqlValue::Int64(epoch),
                                       SqlValue::Int64(length.count())};
    bool renewed = false;
    conn.ForEachRow(PgStep{nullptr, kRenewSql, params, {}},
                    [&](const SqlRow&) { renewed = true; });
    return renewed;
  });
}

void PgLease::Release(int64_t epoch) {
  Run([&](PgConn& conn) {
    const std::vector<SqlValue> params{SqlValue::Text(service_), SqlValue::Int64(epoch)};
    conn.ForEachRow(PgStep{nullptr, kReleaseSql, params, {}}, [](const SqlRow&) {});
  });
}

std::optional<LeaseView> PgLease::Read() {
  return Run([&](PgConn& conn) {
    const std::vector<SqlValue> params{SqlValue::Text(service_)};
    std::optional<LeaseView> view;
    conn.ForEachRow(PgStep{nullptr, kReadSql, params, {}}, [&](const SqlRow& row) {
      view = LeaseView{std::string(row.Bytes(0)), row.Int(1), row.Int(2) != 0};
    });
    return view;
  });
}

}  // namespace nlockd::store
