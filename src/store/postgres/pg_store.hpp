// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "store/postgres/pg_holder.hpp"
#include "store/postgres/pg_pool.hpp"
#include "store/postgres/pg_session_limits.hpp"
#include "store/sql/committed_store.hpp"
#include "store/sql/group_commit.hpp"
#include "store/sql/migrations.hpp"
#include "store/store.hpp"
#include "store/store_options.hpp"

namespace nlockd::store {

// The shared Store: one PostgreSQL database that several nodes may use, each seeing its own
// rows. Owns a PgPool; the GroupCommitter's thread holds one connection for the writes (a batch
// goes out as one pipelined transaction), the synchronous reads borrow the others. When the
// server goes away, writes wait (reconnecting with backoff) up to pg_retry_for and are then
// replayed whole: a write is acknowledged only after its COMMIT was answered.
class PgStore final : public CommittedStore {
 public:
  // Connects, takes the node (PgHolder: one process per node; with options.fence_epoch the
  // caller holds the service's PgLease instead and every write checks it), migrates and durably
  // records the start of this run. Throws nlockd::Error: kDisconnected (naming the server, never
  // the password) when it cannot be reached, kFailed for a bad URI, a schema newer than this build,
  // or a node another live process holds (naming that process).
  PgStore(const std::string& conninfo, StoreOptions options,
          std::span<const Migration> migrations = SchemaMigrations());
  // Commits every queued write (waiting up to pg_retry_for for the server), then closes.
  ~PgStore() override;

  LoadedState LoadAll() override;
  StoreCounts Counts() override;
  std::vector<StateChange> StateHistory() override;

 private:
  bool fenced() const { return options_.fence_epoch != 0; }
  // The statement that fails the transaction with LeaseLost unless the lease is still ours.
  PgStep FenceStep() const;
  void Migrate(PgConn& conn, std::span<const Migration> migrations);
  void RecordRun(PgConn& conn);
  static std::string ReadStorageEpoch(PgConn& conn);
  // On a new writer connection: if the server restarted since storage_epoch_, durably marks the
  // lock table incomplete (RunRecord::storage_epoch).
  void CheckStorageEpoch(PgConn& conn);
  // The lease length recorded for this store's epoch (fenced only), or the default.
  std::chrono::milliseconds LeaseLength(PgConn& conn) const;
  // Session settings: synchronous_commit, and when fenced the limits on its waits.
  void SetUpSession(PgConn& conn) const;
  // Readies a connection on first use: session settings and prepared statements.
  void EnsurePrepared(PgConn& conn);
  void CommitBatch(std::span<const QueuedWrite> batch, Durability durability);
  // Runs read on a pooled connection inside a read-only snapshot, again on a new connection
  // if the server went away, until pg_retry_for has passed.
  void Read(const std::function<void(PgConn&)>& read);
  // Calls on_row for each row of a read statement whose only parameter is the node.
  void ReadRows(PgConn& conn, Stmt stmt, const std::function<void(const SqlRow&)>& on_row) const;

  const StoreOptions options_;
  PgPool pool_;
  // The arguments of nlockd_fence() (service, epoch) when fenced().
  const std::vector<SqlValue> fence_params_;
  std::unique_ptr<PgHolder> holder_;  // unless fenced(): taken first; released after the writer
  // When fenced(): what bounds the waits of each session (StoreSessionLimits of the lease).
  std::optional<PgSessionLimits> session_limits_;

  // The writer thread's own (the constructor's, before the writer starts).
  std::optional<PgPool::Lease> writer_lease_;
  std::string storage_epoch_;
  std::vector<SqlCommand> commands_;
};

}  // namespace nlockd::store
