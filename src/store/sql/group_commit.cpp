// SPDX-License-Identifier: Apache-2.0
#include "store/sql/group_commit.hpp"

#include <algorithm>
#include <chrono>
#include <iterator>
#include <string_view>
#include <utility>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "base/error.hpp"

namespace nlockd::store {
namespace {

Durability BatchDurability(std::span<const QueuedWrite> batch) {
  const bool synced = std::any_of(batch.begin(), batch.end(), [](const QueuedWrite& w) {
    return DurabilityOf(w.op) == Durability::kSynced;
  });
  return synced ? Durability::kSynced : Durability::kCommitted;
}

// Whether the failure may be the fault of one write in the batch (a constraint, a value the
// database refuses) rather than of the database (gone, locked, full queue), so that committing
// the writes one by one isolates it.
bool MayBeOneWritesFault(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const LeaseLost&) {
    return false;  // every write of the batch would be refused alike
  } catch (const Error& e) {
    return e.kind() == ErrorKind::kFailed;
  } catch (...) {
    return true;
  }
}

// A new exception object equal to *error, its message after `prefix` (a LeaseLost keeps its
// own). Each Done gets its own: callers hand failures to their own threads, and one object
// shared by several threads is freed by whichever lets go last, through a reference count that
// ThreadSanitizer cannot see (libstdc++ is not built with it).
std::exception_ptr OwnCopy(const std::exception_ptr& error, std::string_view prefix = {}) {
  try {
    std::rethrow_exception(error);
  } catch (const LeaseLost& e) {
    return std::make_exception_ptr(LeaseLost(e.what()));
  } catch (const Error& e) {
    return std::make_exception_ptr(Error(e.kind(), fmt::format("{}{}", prefix, e.what())));
  } catch (...) {
    return std::current_exception();
  }
}

// The failure of a write that was not tried because the transaction before it failed for a
// reason that was the database's: the same kind (a lost lease stays a lost lease), saying so.
std::exception_ptr NotTriedBehind(const std::exception_ptr& error) {
  return OwnCopy(error, "not tried: the transaction before it failed: ");
}

}  // namespace

GroupCommitter::GroupCommitter(CommitFn commit, GroupCommitOptions options)
    : commit_(std::move(commit)), options_(options) {
  NLOCKD_REQUIRE(options_.max_batch > 0 && options_.max_queued > 0);
  writer_ = std::thread([this] { Run(); });
}

GroupCommitter::~GroupCommitter() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_writer_.notify_one();
  writer_.join();
}

void GroupCommitter::Submit(WriteOp op, Done done) {
  bool closing = false;
  {
    std::lock_guard lock(mu_);
    closing = stopping_;
    if (queue_.size() < options_.max_queued && !closing) {
      queue_.push_back(QueuedWrite{std::move(op), std::move(done)});
      if (queue_.size() == 1) {
        wake_writer_.notify_one();
      }
      return;
    }
  }
  Report(CommitRecord{{}, 1, /*failed=*/true});
  done(std::make_exception_ptr(
      closing ? Error(ErrorKind::kFailed, "store is closing")
              : Error(ErrorKind::kOverloaded,
                      "store write queue is full (the database is not keeping up)")));
}

GroupCommitter::Stats GroupCommitter::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

void GroupCommitter::Run() {
  const size_t batch_limit = options_.batching ? options_.max_batch : 1;
  std::vector<QueuedWrite> batch;
  for (;;) {
    {
      std::unique_lock lock(mu_);
      wake_writer_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) {
        return;  // stopping, and everything queued is committed
      }
      const size_t n = std::min(queue_.size(), batch_limit);
      for (size_t i = 0; i < n; ++i) {
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
    }
    CommitAndComplete(batch);
    batch.clear();
  }
}

std::vector<QueuedWrite> GroupCommitter::TakeQueued() {
  std::lock_guard lock(mu_);
  std::vector<QueuedWrite> queued(std::make_move_iterator(queue_.begin()),
                                  std::make_move_iterator(queue_.end()));
  queue_.clear();
  return queued;
}

void GroupCommitter::FailUntried(std::vector<QueuedWrite>& writes,
                                 const std::exception_ptr& failure) {
  if (writes.empty()) return;
  Report(CommitRecord{{}, writes.size(), /*failed=*/true});
  Complete(writes, NotTriedBehind(failure));
}

void GroupCommitter::SetObserver(CommitObserver observer) {
  std::lock_guard lock(observer_mu_);
  observer_ = std::move(observer);
}

void GroupCommitter::Report(const CommitRecord& record) {
  std::lock_guard lock(observer_mu_);
  if (!observer_) return;
  try {
    observer_(record);
  } catch (const std::exception& e) {
    spdlog::error("store: the commit observer threw (it must not): {}", e.what());
  }
}

std::exception_ptr GroupCommitter::Commit(std::vector<QueuedWrite>& batch,
                                          Clock::time_point start) {
  try {
    commit_(batch, BatchDurability(batch));
  } catch (...) {
    return std::current_exception();
  }
  const auto took = Clock::now() - start;
  {
    std::lock_guard lock(mu_);
    ++stats_.transactions;
    stats_.writes += batch.size();
  }
  Report(CommitRecord{took, batch.size()});
  Complete(batch, nullptr);
  return nullptr;
}

void GroupCommitter::Fail(std::vector<QueuedWrite>& failed, std::vector<QueuedWrite>& untried,
                          const std::exception_ptr& error, Clock::time_point start) {
  // On the database's failure the backlog is taken before anyone hears of it: a write
  // submitted by a caller that has seen the failure (a retry, the next step of a recovery) is
  // tried, not failed behind it. Completions keep submission order: the failed writes, the
  // rest of their batch, then the backlog (LoggedStore counts on that order).
  std::vector<QueuedWrite> behind;
  if (!MayBeOneWritesFault(error)) behind = TakeQueued();
  Report(CommitRecord{Clock::now() - start, failed.size(), /*failed=*/true});
  Complete(failed, error);
  FailUntried(untried, error);
  FailUntried(behind, error);
}

void GroupCommitter::CommitAndComplete(std::vector<QueuedWrite>& batch) {
  const auto start = Clock::now();
  const std::exception_ptr error = Commit(batch, start);
  if (!error) return;
  std::vector<QueuedWrite> none;
  if (batch.size() == 1 || !MayBeOneWritesFault(error)) {
    Fail(batch, none, error, start);
    return;
  }
  for (auto write = batch.begin(); write != batch.end(); ++write) {
    std::vector<QueuedWrite> single;
    single.push_back(std::move(*write));
    const auto single_start = Clock::now();
    const std::exception_ptr failure = Commit(single, single_start);
    if (!failure) continue;
    if (MayBeOneWritesFault(failure)) {
      Fail(single, none, failure, single_start);
      continue;
    }
    // The database's failure: the rest of the batch would meet it too.
    std::vector<QueuedWrite> rest(std::make_move_iterator(write + 1),
                                  std::make_move_iterator(batch.end()));
    Fail(single, rest, failure, single_start);
    return;
  }
}

void GroupCommitter::Complete(std::vector<QueuedWrite>& batch, const std::exception_ptr& error) {
  for (QueuedWrite& write : batch) {
    try {
      write.done(error ? OwnCopy(error) : nullptr);
    } catch (const std::exception& e) {
      spdlog::error("store: a write completion callback threw (it must not): {}", e.what());
    }
  }
}

}  // namespace nlockd::store
