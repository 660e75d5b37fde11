// SPDX-License-Identifier: Apache-2.0
#include "store/sqlite/sqlite_store.hpp"

#include <algorithm>
#include <filesystem>
#include <functional>
#include <optional>
#include <system_error>
#include <thread>
#include <utility>

#include <fmt/format.h>
#include <sqlite3.h>

#include "base/error.hpp"
#include "store/open_store.hpp"
#include "store/run_record.hpp"

namespace nlockd::store {
namespace {

constexpr int kWriterCacheKiB = 64 * 1024;

// Checkpoint every 40 MB of WAL rather than SQLite's 4 MB: a page rewritten by many small
// transactions is copied into the database file once per checkpoint, not once per 4 MB.
constexpr int kCheckpointPages = 10000;
// What a checkpointed WAL file is truncated to, after a huge transaction made it grow.
constexpr int64_t kWalLimitBytes = int64_t{64} << 20;

// How much of the file the reader maps (SQLite caps it at its own limit, 2 GiB on Debian).
constexpr int64_t kReaderMmapBytes = int64_t{1} << 30;

const char* PragmaValue(SqliteSync level) {
  switch (level) {
    case SqliteSync::kOff:
      return "OFF";
    case SqliteSync::kNormal:
      return "NORMAL";
    case SqliteSync::kFull:
      return "FULL";
    case SqliteSync::kExtra:
      return "EXTRA";
  }
  return "FULL";
}

// Rolls back the open transaction of db, if any, when an exception leaves the scope.
class RollbackOnError {
 public:
  explicit RollbackOnError(SqliteDb& db) : db_(db) {}
  ~RollbackOnError() {
    if (std::uncaught_exceptions() > count_ && sqlite3_get_autocommit(db_.get()) == 0) {
      sqlite3_exec(db_.get(), "ROLLBACK", nullptr, nullptr, nullptr);
    }
  }
  RollbackOnError(const RollbackOnError&) = delete;
  RollbackOnError& operator=(const RollbackOnError&) = delete;

 private:
  SqliteDb& db_;
  int count_ = std::uncaught_exceptions();
};

// Resets a statement when the scope ends, however it ends.
class ResetOnExit {
 public:
  explicit ResetOnExit(SqliteStatement& stmt) : stmt_(stmt) {}
  ~ResetOnExit() { stmt_.Reset(); }
  ResetOnExit(const ResetOnExit&) = delete;
  ResetOnExit& operator=(const ResetOnExit&) = delete;

 private:
  SqliteStatement& stmt_;
};

void BindAll(SqliteStatement& stmt, Stmt which, const std::vector<SqlValue>& params) {
  NLOCKD_ASSERT(params.size() == Statement(which).params.size(), "parameter count mismatch");
  for (size_t i = 0; i < params.size(); ++i) {
    stmt.Bind(static_cast<int>(i) + 1, params[i]);
  }
}

}  // namespace

SqliteStore::SqliteStore(std::string path, StoreOptions options,
                         std::span<const Migration> migrations)
    : path_(std::move(path)), options_(std::move(options)) {
  ValidateOptions(options_);
  if (path_.empty()) {
    throw Error(ErrorKind::kFailed, "SQLite store: empty database path");
  }
  // The holder creates the parent directories, as the lock file comes first.
  holder_ = options_.sqlite_lock
                ? options_.sqlite_lock->TakeHolder(path_)
                : std::make_unique<FileHolder>(path_ + ".lock", "SQLite database " + path_);
  writer_.db = std::make_unique<SqliteDb>(path_);
  Configure(*writer_.db);
  OpenReader(readers_[0]);
  if (options_.sqlite_check == SqliteCheck::kAlways ||
      (options_.sqlite_check == SqliteCheck::kAfterUncleanShutdown &&
       !PreviousRunWasClean(*readers_[0].db))) {
    const std::string verdict = readers_[0].db->QueryText("PRAGMA quick_check");
    if (verdict != "ok") {
      throw Error(ErrorKind::kFailed,
                  fmt::format("SQLite database {} failed its integrity check ({}); restore it "
                              "from a backup or move it away",
                              path_, verdict));
    }
  }
  // The writer's working set (the pages its upserts touch) stays cached between transactions.
  writer_.db->Exec(fmt::format("PRAGMA cache_size = -{}", kWriterCacheKiB));
  writer_.db->Exec(fmt::format("PRAGMA wal_autocheckpoint = {}", kCheckpointPages));
  writer_.db->Exec(fmt::format("PRAGMA journal_size_limit = {}", kWalLimitBytes));
  SetSynchronous(options_.sqlite_synchronous);
  Migrate(*writer_.db, migrations);
  RecordRun(*writer_.db);

  StartCommitter(
      [this](std::span<const QueuedWrite> batch, Durability durability) {
        CommitBatch(batch, durability);
      },
      GroupCommitOptions{options_.group_commit, options_.max_batch, options_.max_queued});
}

SqliteStore::~SqliteStore() { StopCommitter(); }

void SqliteStore::Configure(SqliteDb& db) {
  sqlite3_busy_timeout(db.get(), static_cast<int>(options_.sqlite_busy_timeout.count()));
  const std::string mode = db.QueryText("PRAGMA journal_mode = WAL");
  if (mode != "wal") {
    throw Error(ErrorKind::kFailed,
                fmt::format("SQLite database {}: cannot switch to WAL mode (journal_mode is {})",
                            path_, mode));
  }
}

bool SqliteStore::PreviousRunWasClean(SqliteDb& db) const {
  // Reading the run record before the check also reads the pages on its path: a file too
  // damaged for that fails here, with the same clear error.
  if (db.QueryText("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND "
                   "name = 'node_state'") == "0") {
    return false;
  }
  const SqlValue node = SqlValue::Text(options_.node_id);
  SqliteStatement read(db, "SELECT clean_shutdown FROM node_state WHERE node = ?1");
  ResetOnExit reset(read);
  read.Bind(1, node);
  return read.Step() && read.Int(0) != 0;
}

void SqliteStore::OpenReader(Reader& reader) {
  reader.db = std::make_unique<SqliteDb>(path_);
  Configure(*reader.db);
  reader.db->Exec("PRAGMA query_only = 1");
  // Start-up scans whole tables: reading pages in place beats copying them out of the kernel.
  reader.db->Exec(fmt::format("PRAGMA mmap_size = {}", kReaderMmapBytes));
}

void SqliteStore::Migrate(SqliteDb& db, std::span<const Migration> migrations) {
  db.Exec("BEGIN IMMEDIATE");
  RollbackOnError rollback(db);
  const bool versioned = db.QueryText(
                             "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND "
                             "name = 'schema_version'") != "0";
  if (!versioned) {
    if (db.QueryText("SELECT count(*) FROM sqlite_master") != "0") {
      throw Error(ErrorKind::kFailed,
                  fmt::format("SQLite database {} holds tables but no schema_version table: it "
                              "is not an nlockd store",
                              path_));
    }
    db.Exec(kSchemaVersionDdl);
    db.Exec("INSERT INTO schema_version (version) VALUES (0)");
  }
  SqliteStatement version_query(db, "SELECT version FROM schema_version");
  if (!version_query.Step()) {
    throw Error(
        ErrorKind::kFailed,
        fmt::format("SQLite database {}: schema_version is empty: damaged database", path_));
  }
  const int64_t current = version_query.Int(0);
  version_query.Reset();
  for (const Migration* m : PendingMigrations(current, migrations, "SQLite database " + path_)) {
    db.Exec(RenderMigration(*m, Dialect::kSqlite));
    db.Exec(fmt::format("UPDATE schema_version SET version = {}", m->version));
  }
  db.Exec("COMMIT");
}

void SqliteStore::RecordRun(SqliteDb& db) {
  db.Exec("BEGIN IMMEDIATE");
  RollbackOnError rollback(db);
  std::optional<RunRecord> previous;
  {
    const SqlValue node = SqlValue::Text(options_.node_id);
    SqliteStatement read(db, ToSqlitePlaceholders(Statement(Stmt::kReadRun).sql));
    ResetOnExit reset(read);
    read.Bind(1, node);
    if (read.Step()) {
      previous = DecodeRunRecord(read);
    }
  }
  const RunStart start = BeginRun(previous, CurrentBootId(options_), "", options_.keeps_lock_table);
  {
    const std::vector<SqlValue> params =
        WriteRunParams(options_.node_id, start.record, WallNow(options_));
    SqliteStatement write(db, ToSqlitePlaceholders(Statement(Stmt::kWriteRun).sql));
    ResetOnExit reset(write);
    BindAll(write, Stmt::kWriteRun, params);
    write.Step();
  }
  db.Exec("COMMIT");
  set_startup(start.info);
}

void SqliteStore::SetSynchronous(SqliteSync level) {
  if (writer_.synchronous == level) {
    return;
  }
  writer_.db->Exec(fmt::format("PRAGMA synchronous = {}", PragmaValue(level)));
  writer_.synchronous = level;
}

void SqliteStore::CommitBatch(std::span<const QueuedWrite> batch, Durability durability) {
  SetSynchronous(durability == Durability::kSynced
                     ? options_.sqlite_synchronous
                     : std::min(SqliteSync::kNormal, options_.sqlite_synchronous));
  SqliteDb& db = *writer_.db;
  const auto now = WallNow(options_);
  std::lock_guard lock(commit_mu_);
  if (!writer_.begin) {
    writer_.begin = std::make_unique<SqliteStatement>(db, "BEGIN IMMEDIATE");
    writer_.commit = std::make_unique<SqliteStatement>(db, "COMMIT");
  }
  RunOnce(*writer_.begin);
  RollbackOnError rollback(db);
  for (const QueuedWrite& write : batch) {
    writer_.commands.clear();
    AppendCommands(write.op, options_.node_id, now, writer_.commands);
    for (const SqlCommand& command : writer_.commands) {
      Run(command);
    }
  }
  RunOnce(*writer_.commit);
}

void SqliteStore::RunOnce(SqliteStatement& stmt) {
  ResetOnExit reset(stmt);
  while (stmt.Step()) {
  }
}

void SqliteStore::Run(const SqlCommand& command) {
  SqliteStatement& stmt = WriterStatement(command.stmt);
  ResetOnExit reset(stmt);
  BindAll(stmt, command.stmt, command.params);
  if (command.returned_state != nullptr) {
    NLOCKD_ASSERT(stmt.Step(), "the node's run record is missing");
    *command.returned_state = DecodeInt32(stmt.Int(0), "node_state.state");
  }
  while (stmt.Step()) {
  }
}

SqliteStatement& SqliteStore::WriterStatement(Stmt stmt) {
  auto& slot = writer_.statements[static_cast<size_t>(stmt)];
  if (!slot) {
    slot =
        std::make_unique<SqliteStatement>(*writer_.db, ToSqlitePlaceholders(Statement(stmt).sql));
  }
  return *slot;
}

template <typename OnRow>
void SqliteStore::ReadRows(Reader& reader, Stmt stmt, OnRow&& on_row, const SqlValue* extra) {
  auto& slot = reader.statements[static_cast<size_t>(stmt)];
  if (!slot) {
    slot = std::make_unique<SqliteStatement>(*reader.db, ToSqlitePlaceholders(Statement(stmt).sql));
  }
  const SqlValue node = SqlValue::Text(options_.node_id);  // bound, not copied: outlives Step()
  ResetOnExit reset(*slot);
  slot->Bind(1, node);
  if (extra != nullptr) {
    slot->Bind(2, *extra);
  }
  while (slot->Step()) {
    on_row(static_cast<const SqlRow&>(*slot));
  }
}

bool SqliteStore::SplitLockScan() {
  if (options_.sqlite_split_scan_min_bytes == 0) return true;
  const uint64_t bytes = std::stoull(readers_[0].db->QueryText("PRAGMA page_count")) *
                         std::stoull(readers_[0].db->QueryText("PRAGMA page_size"));
  return bytes >= options_.sqlite_split_scan_min_bytes;
}

LoadedState SqliteStore::LoadAll() {
  std::lock_guard lock(read_mu_);
  const bool split = SplitLockScan();
  if (split && !readers_[1].db) OpenReader(readers_[1]);
  SqliteDb& main = *readers_[0].db;
  RollbackOnError rollback_main(main);
  std::optional<RollbackOnError> rollback_helper;
  if (split) rollback_helper.emplace(*readers_[1].db);
  {
    // Both snapshots begin while no transaction of ours commits. Only this store writes this
    // node's rows, so both see the same state of them (other nodes' commits do not matter).
    std::lock_guard pause_writer(commit_mu_);
    main.Exec("BEGIN");
    main.QueryText("SELECT count(*) FROM schema_version");  // a read pins the snapshot
    if (split) {
      readers_[1].db->Exec("BEGIN");
      readers_[1].db->QueryText("SELECT count(*) FROM schema_version");
    }
  }

  // The locks are split by the first byte of their (uniformly distributed) owner digest: the
  // upper half on the second reader, in parallel, when the scan is split; else after the lower.
  const SqlValue middle = SqlValue::Bytes(std::string(1, '\x80'));
  std::vector<LockRecord> upper_locks;
  std::exception_ptr helper_error;
  auto scan_upper = [&](Reader& reader) {
    try {
      ReadRows(
          reader, Stmt::kLoadLocksFrom,
          [&](const SqlRow& row) { upper_locks.push_back(DecodeLock(row)); }, &middle);
    } catch (...) {
      helper_error = std::current_exception();
    }
  };
  std::optional<std::thread> helper_scan;
  if (split) helper_scan.emplace(scan_upper, std::ref(readers_[1]));
  LoadedState loaded;
  try {
    ReadRows(readers_[0], Stmt::kLoadState, [&](const SqlRow& row) {
      loaded.state = DecodeInt32(row.Int(0), "node_state.state");
    });
    ReadRows(readers_[0], Stmt::kLoadRegistrations,
             [&](const SqlRow& row) { loaded.registrations.push_back(DecodeRegistration(row)); });
    ReadRows(readers_[0], Stmt::kLoadShares,
             [&](const SqlRow& row) { loaded.shares.push_back(DecodeShare(row)); });
    ReadRows(readers_[0], Stmt::kLoadNotifyOwed,
             [&](const SqlRow& row) { loaded.notify_owed.push_back(DecodeNotifyOwed(row)); });
    ReadRows(
        readers_[0], Stmt::kLoadLocksBelow,
        [&](const SqlRow& row) { loaded.locks.push_back(DecodeLock(row)); }, &middle);
  } catch (...) {
    if (helper_scan) helper_scan->join();
    throw;
  }
  if (helper_scan) {
    helper_scan->join();
  } else {
    scan_upper(readers_[0]);
  }
  if (helper_error) {
    std::rethrow_exception(helper_error);
  }
  loaded.locks.insert(loaded.locks.end(), std::make_move_iterator(upper_locks.begin()),
                      std::make_move_iterator(upper_locks.end()));
  main.Exec("COMMIT");
  if (split) readers_[1].db->Exec("COMMIT");
  return loaded;
}

StoreCounts SqliteStore::Counts() {
  std::lock_guard lock(read_mu_);
  StoreCounts counts;
  SqliteDb& db = *readers_[0].db;
  db.Exec("BEGIN");
  RollbackOnError rollback(db);
  const auto count_into = [&](Stmt stmt, size_t& into) {
    ReadRows(readers_[0], stmt, [&](const SqlRow& row) { into = static_cast<size_t>(row.Int(0)); });
  };
  count_into(Stmt::kCountRegistrations, counts.registrations);
  count_into(Stmt::kCountLocks, counts.locks);
  count_into(Stmt::kCountShares, counts.shares);
  count_into(Stmt::kCountNotifyOwed, counts.notify_owed);
  db.Exec("COMMIT");
  return counts;
}

std::vector<StateChange> SqliteStore::StateHistory() {
  std::lock_guard lock(read_mu_);
  std::vector<StateChange> history;
  ReadRows(readers_[0], Stmt::kLoadStateHistory,
           [&](const SqlRow& row) { history.push_back(DecodeStateChange(row)); });
  return history;
}

}  // namespace nlockd::store
