// SPDX-License-Identifier: Apache-2.0
#include "store/postgres/pg_store.hpp"

#include <algorithm>
#include <chrono>
#include <thread>
#include <utility>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "base/error.hpp"
#include "store/postgres/libpq.hpp"
#include "store/postgres/pg_lease.hpp"
#include "store/postgres/pg_session_limits.hpp"
#include "store/run_record.hpp"

namespace nlockd::store {
namespace {

using SteadyClock = std::chrono::steady_clock;

// pg_advisory_xact_lock key that serialises migrations of nodes sharing a database.
constexpr int64_t kMigrationLockKey = 0x6e6c6f636b64;  // "nlockd"

// Durable writes rely on the server's default, synchronous_commit = on (or stronger); a server
// configured with off would acknowledge commits it has not flushed.
constexpr const char* kSessionSetup =
    "SELECT set_config('synchronous_commit', 'on', false) "
    "WHERE current_setting('synchronous_commit') = 'off'";

// The server's incarnation: the postmaster's start, and the bgwriter statistics' reset time,
// which a crash recovery without a postmaster restart also resets (a manual reset of those
// statistics reads as a restart too: on the safe side).
constexpr const char* kStorageEpochSql =
    "SELECT 'postmaster ' || pg_postmaster_start_time()::text || ', stats reset ' || "
    "COALESCE((SELECT stats_reset::text FROM pg_stat_bgwriter), 'never')";

// The lease length of the holder at this epoch, as its keeper recorded it in the lease row (0 if
// none is recorded). Reads without locking.
constexpr const char* kLeaseLengthSql =
    "SELECT lease_ms FROM service_lease WHERE service = $1 AND epoch = $2";

// The lease length assumed when the row records none: the default of ha_lease.
constexpr std::chrono::milliseconds kDefaultLease{5000};

StoreOptions Validated(StoreOptions options) {
  ValidateOptions(options);
  return options;
}

const std::string& CheckedConninfo(const std::string& conninfo) {
  const std::string error = PgConninfoError(conninfo);
  if (!error.empty()) {
    throw Error(ErrorKind::kFailed, fmt::format("invalid PostgreSQL connection URI: {}", error));
  }
  return conninfo;
}

PgPoolOptions PoolOptions(const StoreOptions& options) {
  if (options.pg_pool_size < 2) {
    throw Error(ErrorKind::kFailed,
                "store options: pg_pool_size must be at least 2 (the writer keeps one)");
  }
  return PgPoolOptions{options.pg_pool_size, options.pg_connect_timeout, options.pg_backoff_initial,
                       options.pg_backoff_max};
}

// Rolls back conn's open transaction after a failure, if the connection still works.
void RollbackQuietly(PgConn& conn) {
  if (!conn.ok()) {
    return;
  }
  try {
    conn.Exec("ROLLBACK");
  } catch (const Error& e) {
    spdlog::warn("store: PostgreSQL rollback failed: {}", e.what());
  }
}

}  // namespace

PgStore::PgStore(const std::string& conninfo, StoreOptions options,
                 std::span<const Migration> migrations)
    : options_(Validated(std::move(options))),
      pool_(CheckedConninfo(conninfo), PoolOptions(options_)),
      fence_params_{SqlValue::Text(options_.node_id), SqlValue::Int64(options_.fence_epoch)} {
  if (options_.fence_epoch == 0) {
    holder_ = std::make_unique<PgHolder>(conninfo, options_.pg_connect_timeout, options_.node_id);
  }
  {
    PgPool::Lease lease = pool_.Acquire(SteadyClock::now());
    if (fenced()) session_limits_ = StoreSessionLimits(LeaseLength(lease.conn()));
    SetUpSession(lease.conn());
    Migrate(lease.conn(), migrations);
    if (fenced()) EnsureLeaseSchema(lease.conn());
    RecordRun(lease.conn());
  }
  StartCommitter(
      [this](std::span<const QueuedWrite> batch, Durability durability) {
        CommitBatch(batch, durability);
      },
      GroupCommitOptions{options_.group_commit, options_.max_batch, options_.max_queued});
}

PgStore::~PgStore() { StopCommitter(); }

PgStep PgStore::FenceStep() const {
  return PgStep{nullptr, "SELECT nlockd_fence($1, $2)", fence_params_, {}};
}

void PgStore::Migrate(PgConn& conn, std::span<const Migration> migrations) {
  conn.Exec("BEGIN");
  try {
    conn.Exec(fmt::format("SELECT pg_advisory_xact_lock({})", kMigrationLockKey));
    conn.Exec(kSchemaVersionDdl);
    std::optional<int64_t> current;
    conn.ForEachRow(PgStep{nullptr, "SELECT version::bigint FROM schema_version", {}, {}},
                    [&](const SqlRow& row) { current = row.Int(0); });
    if (!current) {
      conn.Exec("INSERT INTO schema_version (version) VALUES (0)");
      current = 0;
    }
    for (const Migration* m : PendingMigrations(*current, migrations, "PostgreSQL database")) {
      conn.Exec(RenderMigration(*m, Dialect::kPostgres));
      conn.Exec(fmt::format("UPDATE schema_version SET version = {}", m->version));
    }
    conn.Exec("COMMIT");
  } catch (...) {
    RollbackQuietly(conn);
    throw;
  }
}

void PgStore::RecordRun(PgConn& conn) {
  const std::string read_sql = std::string(Statement(Stmt::kReadRun).sql) + " FOR UPDATE";
  const std::vector<SqlValue> node{SqlValue::Text(options_.node_id)};
  conn.Exec("BEGIN");
  try {
    if (fenced()) {
      conn.ForEachRow(FenceStep(), [](const SqlRow&) {});
    }
    std::optional<RunRecord> previous;
    conn.ForEachRow(PgStep{nullptr, read_sql.c_str(), node, {}},
                    [&](const SqlRow& row) { previous = DecodeRunRecord(row); });
    storage_epoch_ = ReadStorageEpoch(conn);
    const RunStart start =
        BeginRun(previous, CurrentBootId(options_), storage_epoch_, options_.keeps_lock_table);
    const std::vector<SqlValue> params =
        WriteRunParams(options_.node_id, start.record, WallNow(options_));
    conn.ForEachRow(PgStep{nullptr, Statement(Stmt::kWriteRun).sql, params, {}},
                    [](const SqlRow&) {});
    conn.Exec("COMMIT");  // synchronous_commit is on: durable when answered
    set_startup(start.info);
  } catch (...) {
    RollbackQuietly(conn);
    throw;
  }
}

std::string PgStore::ReadStorageEpoch(PgConn& conn) {
  std::string epoch;
  conn.ForEachRow(PgStep{nullptr, kStorageEpochSql, {}, {}},
                  [&](const SqlRow& row) { epoch = std::string(row.Bytes(0)); });
  return epoch;
}

void PgStore::CheckStorageEpoch(PgConn& conn) {
  std::string epoch = ReadStorageEpoch(conn);
  if (epoch == storage_epoch_) {
    return;
  }
  // Commits made with synchronous_commit off may be gone: the lock table cannot be trusted
  // until the server says it is whole again (MarkLockTableComplete).
  const std::vector<SqlValue> params{SqlValue::Text(options_.node_id), SqlValue::Text(epoch)};
  conn.ForEachRow(PgStep{Statement(Stmt::kNewStorageEpoch).name, nullptr, params, {}},
                  [](const SqlRow&) {});
  spdlog::warn(
      "store: the PostgreSQL server restarted or recovered ({} -> {}); committed lock-table "
      "writes may be lost, so the stored lock table is marked incomplete",
      storage_epoch_, epoch);
  storage_epoch_ = std::move(epoch);
}

std::chrono::milliseconds PgStore::LeaseLength(PgConn& conn) const {
  std::chrono::milliseconds length{0};
  try {
    conn.ForEachRow(PgStep{nullptr, kLeaseLengthSql, fence_params_, {}},
                    [&](const SqlRow& row) { length = std::chrono::milliseconds(row.Int(0)); });
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::kDisconnected) throw;
    // No lease table yet: the fence refuses this store's first write in any case.
  }
  return length.count() > 0 ? length : kDefaultLease;
}

void PgStore::SetUpSession(PgConn& conn) const {
  conn.Exec(kSessionSetup);
  if (!session_limits_) return;
  for (const std::string& problem : ApplySessionLimits(conn, *session_limits_)) {
    spdlog::warn(
        "store: a PostgreSQL session of service '{}' cannot bound its waits as it should: {}; "
        "a takeover may then wait for a transaction of this node stranded by a network fault "
        "(docs/operator-guide.md, High availability)",
        options_.node_id, problem);
  }
}

void PgStore::EnsurePrepared(PgConn& conn) {
  if (conn.prepared()) {
    return;
  }
  try {
    SetUpSession(conn);
    for (size_t i = 0; i < kStmtCount; ++i) {
      const StatementDef& def = Statement(static_cast<Stmt>(i));
      conn.Prepare(def.name, def.sql, def.params);
    }
  } catch (...) {
    // Half prepared, it would fail every later setup ("already exists") and every statement
    // not yet prepared ("does not exist"): a new connection starts over instead.
    conn.MarkBroken();
    throw;
  }
  conn.set_prepared();
}

void PgStore::CommitBatch(std::span<const QueuedWrite> batch, Durability durability) {
  const auto now = WallNow(options_);
  commands_.clear();
  for (const QueuedWrite& write : batch) {
    AppendCommands(write.op, options_.node_id, now, commands_);
  }
  std::vector<PgStep> steps;
  steps.reserve(commands_.size() + 3);
  steps.push_back(PgStep{nullptr, "BEGIN", {}, {}});
  if (durability == Durability::kCommitted) {
    // Committed before the answer, but the WAL flush may follow (the kCommitted class, store.hpp).
    steps.push_back(PgStep{nullptr, "SET LOCAL synchronous_commit TO off", {}, {}});
  }
  if (fenced()) {
    // First, so that a node that lost its lease commits nothing (LeaseLost).
    steps.push_back(FenceStep());
  }
  for (const SqlCommand& command : commands_) {
    PgStep step{Statement(command.stmt).name, nullptr, command.params, {}};
    if (command.returned_state != nullptr) {
      step.on_rows = [out = command.returned_state](const pg_result* result) {
        NLOCKD_ASSERT(Pq().PQntuples(result) == 1, "the node's run record is missing");
        *out = DecodeInt32(PgRow(result, 0).Int(0), "node_state.state");
      };
    }
    steps.push_back(std::move(step));
  }
  steps.push_back(PgStep{nullptr, "COMMIT", {}, {}});

  // Every write is idempotent, so a batch whose COMMIT went unanswered is replayed whole.
  const auto deadline = SteadyClock::now() + options_.pg_retry_for;
  std::chrono::milliseconds backoff = options_.pg_backoff_initial;
  for (;;) {
    try {
      if (!writer_lease_) {
        // Kept only once ready: a batch after a failed setup sets a connection up again rather
        // than writing without its statements or its storage epoch checked.
        PgPool::Lease lease = pool_.Acquire(deadline);
        EnsurePrepared(lease.conn());
        CheckStorageEpoch(lease.conn());
        writer_lease_.emplace(std::move(lease));
      }
      writer_lease_->conn().RunPipeline(steps);
      return;
    } catch (const Error& e) {
      if (writer_lease_) {
        RollbackQuietly(writer_lease_->conn());
        if (!writer_lease_->conn().ok()) {
          writer_lease_.reset();
        }
      }
      if (dynamic_cast<const LeaseLost*>(&e) != nullptr && options_.on_lease_lost) {
        options_.on_lease_lost(e.what());
      }
      if (e.kind() != ErrorKind::kDisconnected || SteadyClock::now() >= deadline) {
        throw;
      }
      spdlog::warn("store: PostgreSQL write failed, retrying: {}", e.what());
    }
    // A server that accepts connections but fails every transaction must not make this spin.
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, options_.pg_backoff_max);
  }
}

void PgStore::Read(const std::function<void(PgConn&)>& read) {
  const auto deadline = SteadyClock::now() + options_.pg_retry_for;
  std::chrono::milliseconds backoff = options_.pg_backoff_initial;
  for (;;) {
    try {
      PgPool::Lease lease = pool_.Acquire(deadline);
      EnsurePrepared(lease.conn());
      lease.conn().Exec("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
      try {
        read(lease.conn());
        lease.conn().Exec("COMMIT");
      } catch (...) {
        RollbackQuietly(lease.conn());
        throw;
      }
      return;
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::kDisconnected || SteadyClock::now() >= deadline) {
        throw;
      }
      spdlog::warn("store: PostgreSQL read failed, retrying: {}", e.what());
    }
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, options_.pg_backoff_max);
  }
}

void PgStore::ReadRows(PgConn& conn, Stmt stmt,
                       const std::function<void(const SqlRow&)>& on_row) const {
  const std::vector<SqlValue> node{SqlValue::Text(options_.node_id)};
  conn.ForEachRow(PgStep{Statement(stmt).name, nullptr, node, {}}, on_row);
}

LoadedState PgStore::LoadAll() {
  LoadedState loaded;
  Read([&](PgConn& conn) {
    loaded = LoadedState{};
    ReadRows(conn, Stmt::kLoadState, [&](const SqlRow& row) {
      loaded.state = DecodeInt32(row.Int(0), "node_state.state");
    });
    ReadRows(conn, Stmt::kLoadRegistrations,
             [&](const SqlRow& row) { loaded.registrations.push_back(DecodeRegistration(row)); });
    ReadRows(conn, Stmt::kLoadLocks,
             [&](const SqlRow& row) { loaded.locks.push_back(DecodeLock(row)); });
    ReadRows(conn, Stmt::kLoadShares,
             [&](const SqlRow& row) { loaded.shares.push_back(DecodeShare(row)); });
    ReadRows(conn, Stmt::kLoadNotifyOwed,
             [&](const SqlRow& row) { loaded.notify_owed.push_back(DecodeNotifyOwed(row)); });
  });
  return loaded;
}

StoreCounts PgStore::Counts() {
  StoreCounts counts;
  Read([&](PgConn& conn) {
    const auto count_into = [&](Stmt stmt, size_t& into) {
      ReadRows(conn, stmt, [&](const SqlRow& row) { into = static_cast<size_t>(row.Int(0)); });
    };
    count_into(Stmt::kCountRegistrations, counts.registrations);
    count_into(Stmt::kCountLocks, counts.locks);
    count_into(Stmt::kCountShares, counts.shares);
    count_into(Stmt::kCountNotifyOwed, counts.notify_owed);
  });
  return counts;
}

std::vector<StateChange> PgStore::StateHistory() {
  std::vector<StateChange> history;
  Read([&](PgConn& conn) {
    history.clear();
    ReadRows(conn, Stmt::kLoadStateHistory,
             [&](const SqlRow& row) { history.push_back(DecodeStateChange(row)); });
  });
  return history;
}

}  // namespace nlockd::store
