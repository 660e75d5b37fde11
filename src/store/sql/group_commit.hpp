// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "store/store.hpp"
#include "store/write_op.hpp"

namespace nlockd::store {

struct QueuedWrite {
  WriteOp op;
  Done done;
};

struct GroupCommitOptions {
  bool batching = true;        // false: one transaction per write
  size_t max_batch = 1024;     // writes per transaction at most
  size_t max_queued = 100000;  // see StoreOptions::max_queued
};

// Group commit for the SQL stores. Owns one writer thread that takes every queued write (up to
// max_batch), hands them to `commit` as one transaction, and then runs each write's Done on that
// thread. Writes are committed in submission order. A transaction that fails for the database's
// reason (locked past its busy timeout, gone past its reconnection time, lease lost) fails the
// writes queued behind it at once, untried; writes submitted after that are tried again.
// Thread-safe.
class GroupCommitter {
 public:
  // Applies batch in one transaction, synced to stable storage if durability is kSynced;
  // throws nlockd::Error if the transaction did not commit (its outcome may be unknown, and then
  // the writes are not acknowledged). Runs on the writer thread only.
  using CommitFn = std::function<void(std::span<const QueuedWrite> batch, Durability durability)>;

  struct Stats {
    uint64_t transactions = 0;  // committed
    uint64_t writes = 0;        // acknowledged as committed
  };

  // `commit` must stay callable until the destructor returns.
  GroupCommitter(CommitFn commit, GroupCommitOptions options);
  // Commits everything still queued, then stops the writer thread.
  ~GroupCommitter();
  GroupCommitter(const GroupCommitter&) = delete;
  GroupCommitter& operator=(const GroupCommitter&) = delete;

  // Queues a write. Fails it at once (done runs on the calling thread) with kOverloaded when
  // max_queued writes wait already, or kFailed while the committer is being destroyed.
  void Submit(WriteOp op, Done done);

  Stats stats() const;

  // See Store::SetCommitObserver.
  void SetObserver(CommitObserver observer);

 private:
  void Run();
  using Clock = std::chrono::steady_clock;
  // Commits batch and completes its writes. If a batch of several fails with kFailed (which may
  // be one write's fault), commits them one by one so that one bad write fails alone; any other
  // failure (database gone or locked) fails the whole batch and the writes queued behind it, at
  // once and untried, rather than each waiting out the same busy timeout or reconnection (a
  // shutdown with the database hung then takes one wait, not one per batch). Writes complete in
  // submission order.
  void CommitAndComplete(std::vector<QueuedWrite>& batch);
  // One transaction; on success completes the writes, on failure returns it (nothing completed).
  std::exception_ptr Commit(std::vector<QueuedWrite>& batch, Clock::time_point start);
  // Completes `failed` with `error`, then `untried` and, if the failure was the database's, every
  // queued write, untried.
  void Fail(std::vector<QueuedWrite>& failed, std::vector<QueuedWrite>& untried,
            const std::exception_ptr& error, Clock::time_point start);
  // Empties the queue into the result.
  std::vector<QueuedWrite> TakeQueued();
  void FailUntried(std::vector<QueuedWrite>& writes, const std::exception_ptr& failure);
  void Report(const CommitRecord& record);
  void Complete(std::vector<QueuedWrite>& batch, const std::exception_ptr& error);

  const CommitFn commit_;
  const GroupCommitOptions options_;

  mutable std::mutex mu_;  // guards queue_, stopping_, stats_
  std::condition_variable wake_writer_;
  std::deque<QueuedWrite> queue_;
  bool stopping_ = false;
  Stats stats_;

  // Held while the observer runs (on the writer thread) and while it is replaced, so that a
  // replaced observer is never running once SetObserver returns.
  std::mutex observer_mu_;
  CommitObserver observer_;  // guarded by observer_mu_

  std::thread writer_;  // started last, in the constructor body
};

}  // namespace nlockd::store
