// SPDX-License-Identifier: Apache-2.0
#include "store/log/logged_store.hpp"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <utility>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "base/describe.hpp"
#include "base/error.hpp"

namespace nlockd::store {
namespace {

// The segment numbers next to prefix (PREFIX.N), ascending.
std::vector<uint64_t> SegmentNumbers(const std::string& prefix) {
  const std::filesystem::path path(prefix);
  const std::filesystem::path dir = path.has_parent_path() ? path.parent_path() : ".";
  const std::string stem = path.filename().string() + ".";
  std::vector<uint64_t> numbers;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    const std::string name = entry.path().filename().string();
    if (!name.starts_with(stem)) continue;
    const std::string_view digits = std::string_view(name).substr(stem.size());
    uint64_t n = 0;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
    if (ec == std::errc() && end == digits.data() + digits.size() && !digits.empty()) {
      numbers.push_back(n);
    }
  }
  if (error) {
    throw Error(ErrorKind::kFailed, fmt::format("cannot list lock log directory {}: {}",
                                                dir.string(), error.message()));
  }
  std::sort(numbers.begin(), numbers.end());
  return numbers;
}

void RemoveFile(const std::string& path) {
  std::error_code error;
  std::filesystem::remove(path, error);
  if (error) spdlog::warn("store: cannot remove lock log {}: {}", path, error.message());
}

}  // namespace

LoggedStore::LoggedStore(std::unique_ptr<Store> inner, std::string log_prefix)
    : inner_(std::move(inner)), prefix_(std::move(log_prefix)) {
  NLOCKD_REQUIRE(inner_ != nullptr && !prefix_.empty());
  Replay();
  {
    std::lock_guard lock(mu_);
    segment_ = std::make_unique<LogSegment>(SegmentPath(segment_number_), kSegmentBytes);
  }
  hand_on_ = std::thread([this] { RunHandOn(); });
}

LoggedStore::~LoggedStore() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  gathered_cv_.notify_one();
  hand_on_.join();
  AwaitApplied();
  std::lock_guard forward(forward_mu_);
  std::lock_guard lock(mu_);
  bool keep = false;
  {
    std::lock_guard applied(applied_mu_);
    keep = keep_segments_;
  }
  if (!keep) RemoveAllSegments(/*reopen=*/false);
}

std::string LoggedStore::SegmentPath(uint64_t number) const {
  return fmt::format("{}.{}", prefix_, number);
}

void LoggedStore::Replay() {
  const std::vector<uint64_t> numbers = SegmentNumbers(prefix_);
  std::mutex done_mu;
  std::condition_variable done_cv;
  size_t pending = 0;
  std::exception_ptr first_error;
  for (const uint64_t number : numbers) {
    std::vector<LoggedOp> ops = ReadLogRecords(SegmentPath(number));
    replayed_ += ops.size();
    // Coalesced as in a run: the result is the same as applying every record.
    for (CoalescedOp& kept : CoalesceLogged(std::move(ops))) {
      {
        std::lock_guard lock(done_mu);
        ++pending;
      }
      Forward(std::visit([](auto& o) -> WriteOp { return std::move(o); }, kept.op),
              [&](std::exception_ptr error) {
                std::lock_guard lock(done_mu);
                if (error && !first_error) first_error = error;
                if (--pending == 0) done_cv.notify_all();
              });
    }
  }
  {
    std::unique_lock lock(done_mu);
    done_cv.wait(lock, [&] { return pending == 0; });
  }
  if (first_error) {
    throw Error(ErrorKind::kFailed,
                fmt::format("cannot replay lock log {}.*: {}", prefix_, Describe(first_error)));
  }
  for (const uint64_t number : numbers) RemoveFile(SegmentPath(number));
  segment_number_ = numbers.empty() ? 0 : numbers.back() + 1;
  if (replayed_ > 0) {
    spdlog::info("store: replayed {} lock-table writes from the lock log of the previous run",
                 replayed_);
  }
}

void LoggedStore::Forward(WriteOp op, Done done) {
  struct Visitor {
    Store& inner;
    Done& done;
    void operator()(PutRegistrationOp& o) {
      inner.PutRegistration(std::move(o.registration), std::move(done));
    }
    void operator()(RemoveRegistrationOp& o) {
      inner.RemoveRegistration(std::move(o.mon_name), std::move(o.my_id), std::move(done));
    }
    void operator()(RemoveRegistrationsOfOp& o) {
      inner.RemoveRegistrationsOf(std::move(o.my_id), std::move(done));
    }
    void operator()(PutNotifyOwedOp& o) { inner.PutNotifyOwed(std::move(o.owed), std::move(done)); }
    void operator()(ClearOp&) { inner.Clear(std::move(done)); }
    void operator()(BumpStateOp& o) {
      std::exception_ptr error;
      try {
        *o.new_state = o.to ? inner.MoveStateTo(*o.to) : inner.BumpState();
      } catch (...) {
        error = std::current_exception();
      }
      done(error);
    }
    void operator()(MarkCleanShutdownOp&) {
      std::exception_ptr error;
      try {
        inner.MarkCleanShutdown();
      } catch (...) {
        error = std::current_exception();
      }
      done(error);
    }
    void operator()(LockChangesOp& o) {
      inner.ApplyLockChanges(std::move(o.changes), std::move(done));
    }
    void operator()(ReleaseHostOp& o) { inner.ReleaseHost(std::move(o.host), std::move(done)); }
    void operator()(RemoveNotifyOwedOp& o) {
      inner.RemoveNotifyOwed(std::move(o.mon_name), std::move(done));
    }
    void operator()(MarkLockTableCompleteOp&) { inner.MarkLockTableComplete(std::move(done)); }
  };
  std::visit(Visitor{*inner_, done}, op);
}

void LoggedStore::Submit(WriteOp op, Done done) {
  if (auto* changes = std::get_if<LockChangesOp>(&op)) {
    SubmitLogged(std::move(*changes), std::move(done));
    return;
  }
  if (auto* release = std::get_if<ReleaseHostOp>(&op)) {
    SubmitLogged(std::move(*release), std::move(done));
    return;
  }
  const bool clears = std::holds_alternative<ClearOp>(op);
  const bool ends_run = std::holds_alternative<MarkCleanShutdownOp>(op);
  if (clears || ends_run) AwaitApplied();
  std::lock_guard forward(forward_mu_);
  std::lock_guard lock(mu_);
  HandOnLocked();  // the writes before this one go first
  if (clears) {
    // Replaying an older lock write after the Clear would bring back what it removed: the
    // wrapped store has everything logged (rechecked under mu_), so the log can go first.
    std::unique_lock applied(applied_mu_);
    applied_cv_.wait(applied, [&] { return applied_seq_.load() >= logged_seq_; });
    applied.unlock();
    RemoveAllSegments(/*reopen=*/true);
  }
  Forward(std::move(op), std::move(done));
  if (ends_run) {
    // Synced by the wrapped store with every write before it: the log has nothing more to say.
    std::unique_lock applied(applied_mu_);
    applied_cv_.wait(applied, [&] { return applied_seq_.load() >= logged_seq_; });
    const bool keep = keep_segments_;
    applied.unlock();
    if (!keep) RemoveAllSegments(/*reopen=*/true);
  }
}

void LoggedStore::SetCommitObserver(CommitObserver observer) {
  AwaitApplied();
  {
    std::lock_guard lock(observer_mu_);
    observer_ = observer;
  }
  inner_->SetCommitObserver(std::move(observer));
}

template <typename Encode>
std::exception_ptr LoggedStore::Log(const Encode& encode) {
  std::exception_ptr error;
  {
    std::lock_guard lock(mu_);
    if (logged_seq_ - applied_seq_.load() >= kMaxBacklog) {
      error = std::make_exception_ptr(Error(
          ErrorKind::kOverloaded, "store write queue is full (the database is not keeping up)"));
    } else {
      const size_t start = gathered_.records.size();
      encode(gathered_.records);
      try {
        // None after a segment could not be begun: try again (the write fails if that fails).
        if (!segment_) BeginSegmentLocked(segment_number_);
        segment_->Append(std::string_view(gathered_.records).substr(start));
      } catch (...) {
        error = std::current_exception();
        gathered_.records.resize(start);
      }
    }
    if (!error) {
      const uint64_t seq = ++logged_seq_;
      ++gathered_.count;
      if (gathered_.count == 1 || gathered_.count == kHandOnBatch) gathered_cv_.notify_one();
      if (segment_->size() >= kSegmentBytes) {
        {
          std::lock_guard applied(applied_mu_);
          closed_.push_back(Closed{segment_->path(), seq});
        }
        try {
          BeginSegmentLocked(segment_number_ + 1);
        } catch (const std::exception& e) {
          // This write is in the closed segment; the next one tries again, and fails if it
          // cannot begin one.
          spdlog::error("store: {}", e.what());
        }
      }
    }
  }
  if (error) {
    std::lock_guard lock(observer_mu_);
    if (observer_) observer_(CommitRecord{{}, 1, /*failed=*/true});
  }
  return error;
}

void LoggedStore::SubmitLogged(LoggedOp op, Done done) {
  // Encoded once, where the hand-on thread will read it back; `op` is freed on this thread.
  done(Log([&op](std::string& out) { EncodeLogRecordTo(op, out); }));
}

std::exception_ptr LoggedStore::AppendLockChanges(std::string_view record) {
  return Log([record](std::string& out) { out.append(record); });
}

std::pair<LoggedStore::Gathered, uint64_t> LoggedStore::TakeGatheredLocked() {
  const uint64_t first = logged_seq_ + 1 - gathered_.count;
  Gathered taken;
  // The next bunch is likely as large: its buffer grows once, not record by record.
  taken.records.reserve(gathered_.records.capacity());
  std::swap(taken, gathered_);
  return {std::move(taken), first};
}

void LoggedStore::ForwardGathered(const Gathered& gathered, uint64_t first_seq) {
  if (gathered.count == 0) return;
  size_t valid = 0;
  std::vector<LoggedOp> ops = DecodeLogRecords(gathered.records, &valid, Checksums::kTrust);
  // Encoded by SubmitLogged a moment ago, in memory: they decode, all of them.
  NLOCKD_ASSERT(ops.size() == gathered.count && valid == gathered.records.size());
  ForwardLogged(std::move(ops), first_seq);
}

void LoggedStore::ForwardLogged(std::vector<LoggedOp> ops, uint64_t first_seq) {
  if (ops.empty()) return;
  for (CoalescedOp& kept : CoalesceLogged(std::move(ops))) {
    const uint64_t seq = first_seq + kept.through;
    Forward(std::visit([](auto& o) -> WriteOp { return std::move(o); }, kept.op),
            [this, seq](std::exception_ptr failure) {
              if (failure) {
                forward_failure_log_.Log(
                    spdlog::level::err,
                    "store: applying a logged lock-table write failed: {}; the lock log is kept "
                    "for the next start to replay",
                    Describe(failure));
              }
              Applied(seq, !failure);
            });
  }
}

void LoggedStore::HandOnLocked() {
  auto [gathered, first] = TakeGatheredLocked();
  ForwardGathered(gathered, first);
}

void LoggedStore::RunHandOn() {
  std::unique_lock forward(forward_mu_, std::defer_lock);
  std::unique_lock lock(mu_);
  for (;;) {
    gathered_cv_.wait(lock, [this] { return stopping_ || gathered_.count > 0; });
    if (stopping_) break;
    // Let the bunch gather (a full bunch or a stop cuts the wait short).
    gathered_cv_.wait_for(lock, kHandOnDelay,
                          [this] { return stopping_ || gathered_.count >= kHandOnBatch; });
    lock.unlock();
    forward.lock();  // before mu_
    lock.lock();
    auto [gathered, first] = TakeGatheredLocked();
    lock.unlock();
    // Decoding, coalescing and handing on take a while: the io thread logs meanwhile.
    ForwardGathered(gathered, first);
    forward.unlock();
    lock.lock();
  }
  lock.unlock();
  forward.lock();
  lock.lock();
  HandOnLocked();
}

void LoggedStore::Applied(uint64_t seq, bool ok) {
  std::lock_guard lock(applied_mu_);
  if (!ok) keep_segments_ = true;
  // Completions come in sequence, except that a write the wrapped store refuses at once (its
  // queue full) completes ahead of earlier ones still queued: the applied sequence never goes
  // back, or reads would wait for it forever. Such a refusal keeps the segments (above), so
  // none is removed for writes not yet applied.
  if (seq > applied_seq_.load()) applied_seq_.store(seq);
  while (!keep_segments_ && !closed_.empty() && closed_.front().last_seq <= seq) {
    RemoveFile(closed_.front().path);
    closed_.pop_front();
  }
  applied_cv_.notify_all();
}

void LoggedStore::AwaitApplied() {
  uint64_t target = 0;
  {
    std::lock_guard forward(forward_mu_);
    std::lock_guard lock(mu_);
    HandOnLocked();
    target = logged_seq_;
  }
  std::unique_lock applied(applied_mu_);
  applied_cv_.wait(applied, [&] { return applied_seq_.load() >= target; });
}

void LoggedStore::RemoveAllSegments(bool reopen) {
  {
    std::lock_guard applied(applied_mu_);
    for (const Closed& closed : closed_) RemoveFile(closed.path);
    closed_.clear();
  }
  if (reopen) {
    // Truncated by reopening: the wrapped store has every record it held.
    BeginSegmentLocked(segment_number_);
  } else {
    segment_.reset();
    RemoveFile(SegmentPath(segment_number_));
  }
}

void LoggedStore::BeginSegmentLocked(uint64_t number) {
  // The old segment is closed first: closing cuts its file to its records, which must not
  // happen to a new segment of the same name (a reopen).
  segment_.reset();
  segment_number_ = number;
  segment_ = std::make_unique<LogSegment>(SegmentPath(number), kSegmentBytes);
}

std::vector<std::string> LoggedStore::SegmentPaths() const {
  const std::vector<uint64_t> numbers = SegmentNumbers(prefix_);
  std::vector<std::string> paths;
  for (const uint64_t n : numbers) paths.push_back(SegmentPath(n));
  return paths;
}

LoadedState LoggedStore::LoadAll() {
  AwaitApplied();
  return inner_->LoadAll();
}

StoreCounts LoggedStore::Counts() {
  AwaitApplied();
  return inner_->Counts();
}

std::vector<StateChange> LoggedStore::StateHistory() {
  AwaitApplied();
  return inner_->StateHistory();
}

}  // namespace nlockd::store
