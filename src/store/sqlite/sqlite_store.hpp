// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <array>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "store/sql/committed_store.hpp"
#include "store/sql/group_commit.hpp"
#include "store/sql/migrations.hpp"
#include "store/sqlite/file_holder.hpp"
#include "store/sqlite/sqlite_db.hpp"
#include "store/store.hpp"
#include "store/store_options.hpp"

namespace nlockd::store {

// The embedded Store: one SQLite file in WAL mode, used by one process at a time (a FileHolder
// on PATH.lock, taken before the database is opened). Owns up to three connections: the
// writer's, used only by the GroupCommitter's thread (after the constructor), and one or two for
// the synchronous reads, used by their callers under read_mu_ (LoadAll() of a large file scans
// on two at once; the second is opened then).
class SqliteStore final : public CommittedStore {
 public:
  // Opens (creating the file and its parent directories) and migrates the database at path,
  // checks it, and durably records the start of this run. Throws nlockd::Error(kFailed) with a
  // message naming the file when it cannot be opened, is damaged, has a newer schema, or is
  // held by another process (or another SqliteStore of this one), whose PID it names.
  SqliteStore(std::string path, StoreOptions options,
              std::span<const Migration> migrations = SchemaMigrations());
  // Commits every queued write, then closes.
  ~SqliteStore() override;

  LoadedState LoadAll() override;
  StoreCounts Counts() override;
  std::vector<StateChange> StateHistory() override;

 private:
  // What the writer thread owns.
  struct Writer {
    std::unique_ptr<SqliteDb> db;
    std::array<std::unique_ptr<SqliteStatement>, kStmtCount> statements;
    std::optional<SqliteSync> synchronous;  // as last set on db
    std::vector<SqlCommand> commands;       // scratch
    // Prepared once: parsing them for every transaction showed up in the lock journal's profile.
    std::unique_ptr<SqliteStatement> begin;
    std::unique_ptr<SqliteStatement> commit;
  };

  // A read-only connection with its prepared statements; used under read_mu_.
  struct Reader {
    std::unique_ptr<SqliteDb> db;
    std::array<std::unique_ptr<SqliteStatement>, kStmtCount> statements;
  };

  void Configure(SqliteDb& db);
  void OpenReader(Reader& reader);
  // Whether LoadAll() reads the locks on both readers at once: a large file. REQUIRES: read_mu_.
  bool SplitLockScan();
  bool PreviousRunWasClean(SqliteDb& db) const;
  void Migrate(SqliteDb& db, std::span<const Migration> migrations);
  void RecordRun(SqliteDb& db);
  void SetSynchronous(SqliteSync level);
  // Steps a parameterless statement to its end, then resets it.
  static void RunOnce(SqliteStatement& stmt);
  void CommitBatch(std::span<const QueuedWrite> batch, Durability durability);
  void Run(const SqlCommand& command);
  SqliteStatement& WriterStatement(Stmt stmt);
  // Runs stmt (a read whose first parameter is the node, followed by `extra`) on reader and
  // calls on_row for each row. REQUIRES: read_mu_ held.
  template <typename OnRow>
  void ReadRows(Reader& reader, Stmt stmt, OnRow&& on_row, const SqlValue* extra = nullptr);

  const std::string path_;
  const StoreOptions options_;
  std::unique_ptr<FileHolder> holder_;  // before the connections: released after they close
  Writer writer_;

  // Held by the writer thread around each transaction, and by LoadAll() while it opens the
  // snapshots of its two readers, which therefore see the same state of this node's rows.
  std::mutex commit_mu_;

  std::mutex read_mu_;             // guards readers_
  std::array<Reader, 2> readers_;  // [1] scans half the locks in parallel in LoadAll(); opened
                                   // by the first LoadAll() that splits its scan
};

}  // namespace nlockd::store
