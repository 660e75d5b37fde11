// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "base/log_limiter.hpp"
#include "store/log/lock_log.hpp"
#include "store/store.hpp"

namespace nlockd::store {

// A Store whose lock-table writes (ApplyLockChanges, ReleaseHost) are acknowledged once they are
// appended to a log with write(2), before the wrapped store has them: the page cache holds them
// through a crash of the process, which is the kCommitted promise. Each is then handed to the
// wrapped store, whose writer thread applies it in the background in order with every other
// write; every other write goes to the wrapped store as before (so a kSynced write still makes
// every earlier write durable). Logged writes are handed on in bunches, coalesced first
// (CoalesceLogged): a change a later one of the bunch overwrites never reaches the wrapped store,
// so a LOCK and its UNLOCK cost it one change, not three. A log segment is deleted once the wrapped
// store has applied its last record; a segment past kSegmentBytes is closed and a new one begun, so
// the log holds at most about one segment plus the wrapped store's backlog.
//
// Opening replays the segments a crashed run left (their records are idempotent "set these
// rows" writes, so one the wrapped store applied already is harmless to apply again) and
// deletes them. Reads wait until the wrapped store has applied every write acknowledged before
// them, so they see what Store promises. Thread-safe.
//
// Files: `log_prefix` + "." + a sequence number, e.g. nlockd.db.journal.17.
class LoggedStore final : public Store {
 public:
  // Replays and removes the segments of log_prefix, then starts a new one. Throws
  // nlockd::Error(kFailed) when a segment cannot be read or the wrapped store refuses a replayed
  // write.
  LoggedStore(std::unique_ptr<Store> inner, std::string log_prefix);
  // Waits for the wrapped store to apply everything, removes the log, closes the wrapped store.
  ~LoggedStore() override;

  const StartupInfo& startup() const override { return inner_->startup(); }
  LoadedState LoadAll() override;
  StoreCounts Counts() override;
  std::vector<StateChange> StateHistory() override;
  // The wrapped store's transactions, and the logged writes this store fails itself (a full
  // backlog, a log that cannot be written); the old observer sees those of every write
  // acknowledged before the call.
  void SetCommitObserver(CommitObserver observer) override;
  // ApplyLockChanges and ReleaseHost are acknowledged once appended, or failed, within the call.
  bool AcknowledgesLockChangesAtOnce() const override { return true; }
  // ApplyLockChanges of a record already encoded (LockChangesRecord): logs it as is and returns
  // its failure (null: acknowledged), without a LockChangesOp or a Done. What the lock journal
  // calls per LOCK or UNLOCK. REQUIRES: `record` is one whole record a LockChangesRecord made.
  std::exception_ptr AppendLockChanges(std::string_view record);

  // The log's files right now (oldest first), for tests and the benchmark.
  std::vector<std::string> SegmentPaths() const;
  // Records replayed when opening.
  size_t replayed() const { return replayed_; }

  // A segment is closed, and a new one begun, past this size.
  static constexpr uint64_t kSegmentBytes = 4U << 20;
  // Logged writes the wrapped store may have yet to apply; past it they fail with kOverloaded,
  // as the wrapped store's own queue would.
  static constexpr uint64_t kMaxBacklog = 50000;
  // How long logged writes gather before they are handed on, and how many at most.
  static constexpr std::chrono::milliseconds kHandOnDelay{10};
  static constexpr size_t kHandOnBatch = 1024;

 protected:
  void Submit(WriteOp op, Done done) override;

 private:
  struct Closed {
    std::string path;
    uint64_t last_seq;  // its last record
  };
  void Replay();
  void SubmitLogged(LoggedOp op, Done done);
  // Logs the record `encode(buffer)` appends to a buffer; returns the failure, if any.
  template <typename Encode>
  std::exception_ptr Log(const Encode& encode);
  // Hands op to the wrapped store through its public interface.
  void Forward(WriteOp op, Done done);
  // Coalesces logged writes first_seq, first_seq + 1, ... and hands them on, each kept write
  // reporting the writes it accounts for as applied. REQUIRES: forward_mu_ held.
  void ForwardLogged(std::vector<LoggedOp> ops, uint64_t first_seq);
  // Logged writes not yet handed on, as their log records: the writes themselves stay with the
  // thread that made them (allocated and freed there), and the hand-on thread decodes its own
  // copies, so that no allocation of one thread is freed by another.
  struct Gathered {
    std::string records;
    size_t count = 0;
  };
  // Decodes `gathered` and forwards its writes (ForwardLogged). REQUIRES: forward_mu_ held.
  void ForwardGathered(const Gathered& gathered, uint64_t first_seq);
  // Takes the gathered writes and the sequence number of the first. REQUIRES: mu_ held.
  std::pair<Gathered, uint64_t> TakeGatheredLocked();
  // Hands on every gathered logged write. REQUIRES: forward_mu_ and mu_ held.
  void HandOnLocked();
  // The hand-on thread.
  void RunHandOn();
  // Runs on the wrapped store's writer thread when logged write `seq` is applied (or failed).
  void Applied(uint64_t seq, bool ok);
  // Blocks until every logged write acknowledged so far is applied.
  void AwaitApplied();
  // Removes every segment: the closed ones, and the open one, which starts over empty if
  // `reopen`. REQUIRES: mu_ held and everything logged applied.
  void RemoveAllSegments(bool reopen);
  std::string SegmentPath(uint64_t number) const;
  // Closes the current segment, if any, and begins segment `number` (a mapped one of
  // kSegmentBytes). Throws nlockd::Error(kFailed) and leaves no segment if it cannot.
  // REQUIRES: mu_ held.
  void BeginSegmentLocked(uint64_t number);

  const std::unique_ptr<Store> inner_;
  const std::string prefix_;
  size_t replayed_ = 0;

  // Held while writes are handed on to the wrapped store, so that it gets them in log order.
  // Taken before mu_, never after it (the hand-on thread coalesces a bunch under it alone, so
  // that logging goes on meanwhile).
  std::mutex forward_mu_;
  // Held while a write is logged. Taken before applied_mu_, never after it.
  mutable std::mutex mu_;
  std::unique_ptr<LogSegment> segment_;  // guarded by mu_; null if one could not be begun
  uint64_t segment_number_ = 0;          // guarded by mu_
  uint64_t logged_seq_ = 0;              // guarded by mu_: the last logged write
  // Logged, acknowledged, not yet handed on (the last is logged_seq_); guarded by mu_.
  Gathered gathered_;
  // With mu_: the first write gathered, a full bunch, or stopping.
  std::condition_variable gathered_cv_;
  bool stopping_ = false;  // guarded by mu_

  // The wrapped store's progress; its writer thread reports under this alone (a write it
  // refuses at once reports on the submitting thread, which holds mu_).
  mutable std::mutex applied_mu_;
  std::condition_variable applied_cv_;
  std::deque<Closed> closed_;  // guarded by applied_mu_; oldest first
  // Every logged write up to it is applied (or failed). Written under applied_mu_.
  std::atomic<uint64_t> applied_seq_{0};
  // A logged write the wrapped store failed: the segments stay for the next start to replay.
  bool keep_segments_ = false;  // guarded by applied_mu_

  // Told of the writes this store fails itself; held while it runs and while it is replaced.
  std::mutex observer_mu_;
  CommitObserver observer_;  // guarded by observer_mu_
  // While the wrapped store fails (a disk that stopped answering), every bunch handed on fails
  // with a line per write: a few lines, then a count, not one per call.
  LogLimiter forward_failure_log_{"store: logged lock-table writes failed"};

  std::thread hand_on_;  // started last in the constructor, joined first in the destructor
};

}  // namespace nlockd::store
