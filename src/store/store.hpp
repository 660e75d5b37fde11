// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "store/records.hpp"
#include "store/write_op.hpp"

namespace nlockd::store {

// Called exactly once when a write is committed (nullptr) or has failed (an nlockd::Error:
// kDisconnected when PostgreSQL stayed away, kOverloaded when the write queue is full, kFailed
// otherwise). SQL stores call it on their writer thread, the memory store before the write call
// returns; either way it must be cheap and must not throw: post the result to your own executor.
using Done = std::function<void(std::exception_ptr)>;

// A write refused because this node no longer holds its service's lease (a store opened with
// StoreOptions::fence_epoch): another node may be active now, so this one must stop serving at
// once. Its kind is kFailed: retrying cannot help.
class LeaseLost : public Error {
 public:
  explicit LeaseLost(const std::string& message) : Error(ErrorKind::kFailed, message) {}
};

// One write transaction of a SQL store's writer thread (its group commit), or writes that
// failed: their Done gets an error (the transaction failed, the queue was full, the lock log
// could not be written).
struct CommitRecord {
  std::chrono::steady_clock::duration duration{};  // Applying the batch and committing it.
  size_t writes = 0;                               // The writes it carried: the batch size.
  bool failed = false;                             // Its writes failed.
};
// Called after each committed transaction, before the Done of its writes, and for writes that
// failed (on the writer thread, or the submitting thread when a write is refused at once);
// must be cheap and must not throw (e.g. update thread-safe metrics).
using CommitObserver = std::function<void(const CommitRecord&)>;

// What the store knew when it was opened; decides the grace plan (docs/architecture.md).
struct StartupInfo {
  bool persistent = false;          // false for the memory store: nothing survived
  bool first_run = false;           // no earlier run of this node used the store
  bool previous_run_clean = false;  // the previous run ended with MarkCleanShutdown()
  std::string previous_boot_id;     // the kernel boot id of the previous run ("" if none)
  std::string boot_id;              // the kernel boot id now
  // The boot id on which the stored state was last moved to a new odd number (BumpState), ""
  // if never. Unlike previous_boot_id, not yet this boot's when a run on it stopped before
  // announcing its state.
  std::string state_boot_id;
  int32_t state = 0;  // the stored state number (even after a clean shutdown)
  // Whether the lock table LoadAll() returns holds every lock that was granted. False after an
  // unclean run on an earlier boot (a host crash may have lost kCommitted writes) or, for
  // PostgreSQL, when the database server restarted or recovered since (during a run, or between
  // an unclean run and this one); it stays false across further restarts until
  // MarkLockTableComplete(). Always false for the memory store.
  bool lock_table_complete = false;
};

// Everything of this node in the store, in no particular order.
struct LoadedState {
  int32_t state = 0;
  std::vector<Registration> registrations;
  std::vector<LockRecord> locks;
  std::vector<ShareRecord> shares;
  std::vector<NotifyOwed> notify_owed;
};

struct StoreCounts {
  size_t registrations = 0;
  size_t locks = 0;
  size_t shares = 0;
  size_t notify_owed = 0;
};

// nlockd's persistence: the NSM state number, monitor registrations, the lock and share table
// and the hosts owed an SM_NOTIFY, of one node. Thread-safe. Writes are queued and applied in
// the order they were called; reads see every write whose Done has run.
//
// Durability of each write (Durability in write_op.hpp):
//   kSynced (fsynced before Done, survives a power loss):
//     PutRegistration, RemoveRegistration, RemoveRegistrationsOf, PutNotifyOwed, Clear,
//     BumpState, MarkCleanShutdown; and the run record written when the store is opened.
//   kCommitted (committed before Done, survives a crash of the process; a crash of the host, or
//   of the PostgreSQL server, may lose it, which the next start-up detects and reports in
//   StartupInfo::lock_table_complete):
//     ApplyLockChanges, ReleaseHost, RemoveNotifyOwed, MarkLockTableComplete.
// A kSynced write also makes every write committed before it durable. (SQLite: FULL and NORMAL
// synchronous, unless StoreOptions lowers them; PostgreSQL: synchronous_commit on and off.)
class Store {
 public:
  virtual ~Store() = default;
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  virtual const StartupInfo& startup() const = 0;

  // Synchronous reads (start-up, admin). Throw nlockd::Error.
  virtual LoadedState LoadAll() = 0;
  virtual StoreCounts Counts() = 0;
  // Every change of the state number, oldest first.
  virtual std::vector<StateChange> StateHistory() = 0;

  // kSynced writes.
  // Inserts or updates (priv, source_address, updated) the registration (SM_MON).
  void PutRegistration(Registration registration, Done done);
  // Removes the registration of (mon_name, my_id), if any (SM_UNMON).
  void RemoveRegistration(std::string mon_name, MyId my_id, Done done);
  // Removes every registration whose callback is my_id (SM_UNMON_ALL).
  void RemoveRegistrationsOf(MyId my_id, Done done);
  // Inserts or updates (by mon_name) hosts owed an SM_NOTIFY.
  void PutNotifyOwed(std::vector<NotifyOwed> owed, Done done);
  // As PutNotifyOwed, returning once the rows are durable; blocks.
  void PutNotifyOwedAndWait(std::vector<NotifyOwed> owed);
  // Removes every registration, lock and share (the admin command). The state number, its
  // history and the hosts owed a notification stay.
  void Clear(Done done);
  // Moves the state number to the next odd number and returns it once it is durable; blocks.
  int32_t BumpState();
  // Moves the state number straight to `state` and returns it once it is durable; blocks. For a
  // start that must pass a number announced elsewhere (rpc.statd's, an early round's): one
  // write, where bumping up to it took one synced write per step.
  // REQUIRES: `state` is odd and newer than the stored state (the caller, the store's one
  // writer while it starts, read it).
  int32_t MoveStateTo(int32_t state);
  // Records that this run ends cleanly and moves the state number to even (down); blocks.
  // REQUIRES: no write is submitted after it.
  void MarkCleanShutdown();

  // kCommitted writes.
  // Applies the changes in order, all or none (one transaction).
  void ApplyLockChanges(std::vector<LockChange> changes, Done done);
  // Removes every lock and share held by host (the host rebooted, or FREE_ALL).
  void ReleaseHost(std::string host, Done done);
  void RemoveNotifyOwed(std::string mon_name, Done done);
  // Records that the lock table again holds every granted lock (the grace period is over).
  void MarkLockTableComplete(Done done);

  // Reports every committed transaction to `observer` from now on (an empty function: none).
  // Once it returns, the previous observer is neither running nor called again, so that it may
  // be destroyed. Transactions that fail are not reported. The memory store has no transactions
  // and reports nothing.
  virtual void SetCommitObserver(CommitObserver observer) { (void)observer; }

  // Whether ApplyLockChanges always runs its Done before it returns, on the calling thread (the
  // lock log acknowledges a write once it is appended): NLM then writes a call's change inline,
  // without suspending the call.
  virtual bool AcknowledgesLockChangesAtOnce() const { return false; }

 protected:
  Store() = default;

  // Queues op; runs done once it is committed or has failed.
  virtual void Submit(WriteOp op, Done done) = 0;

 private:
  // BumpState (no `to`) and MoveStateTo: submits the op and waits for the new state.
  int32_t WriteState(std::optional<int32_t> to);
};

}  // namespace nlockd::store
