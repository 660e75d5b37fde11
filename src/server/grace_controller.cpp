// SPDX-License-Identifier: Apache-2.0
#include "server/grace_controller.hpp"

#include <algorithm>
#include <set>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <spdlog/spdlog.h>

#include "nsm/registry.hpp"
#include "rpc/use_tuple.hpp"
#include "server/lock_journal_store.hpp"
#include "store/async_write.hpp"

namespace nlockd::server {

namespace {

std::string_view KindName(GracePlan::Kind kind) {
  switch (kind) {
    case GracePlan::Kind::kNone:
      return "none";
    case GracePlan::Kind::kClassic:
      return "classic";
    case GracePlan::Kind::kFineGrained:
      return "fine-grained";
  }
  return "?";
}

}  // namespace

GraceController::GraceController(asio::any_io_executor executor, const Clock& clock,
                                 lock::LockManager& locks, store::Store& store, GraceHooks hooks,
                                 GraceControllerOptions options)
    : executor_(std::move(executor)),
      clock_(clock),
      locks_(locks),
      store_(store),
      hooks_(std::move(hooks)),
      options_(options),
      tasks_(executor_, "grace") {}

void GraceController::Begin(const GracePlan& plan, const store::LoadedState& loaded) {
  plan_ = plan;
  started_ = clock_.Now();
  last_notify_event_ = started_;
  const std::optional<lock::GraceMode> mode = plan.mode();
  if (!mode) {
    spdlog::info("grace period none reason=\"{}\"", plan.reason);
    std::set<std::string> hosts;
    for (const auto& row : loaded.locks) hosts.insert(row.host);
    for (const auto& row : loaded.shares) hosts.insert(row.host);
    if (auto pass = tasks_.TryEnter("stale lock table clear")) {
      asio::co_spawn(executor_, ClearStaleTable({hosts.begin(), hosts.end()}, std::move(*pass)),
                     asio::detached);
    }
    return;
  }
  locks_.StartGrace(*mode, options_.duration);
  dropped_before_ = locks_.DroppedRestoredCount();
  const std::vector<lock::RestoredLock> restored_locks = ToRestoredLocks(loaded.locks);
  const std::vector<lock::RestoredShare> restored_shares = ToRestoredShares(loaded.shares);
  lock::LoadOutcome load = locks_.LoadRestored(restored_locks, restored_shares);
  if (journal_ != nullptr) {
    // Every persisted row, installed or not: settling rewrites each from what its owner holds,
    // which also removes rows that were rejected as conflicting.
    for (const auto& lock : restored_locks) journal_->RememberRestoredLock(lock);
    for (const auto& share : restored_shares) {
      journal_->RememberRestoredShare(share.file, share.owner);
    }
  }
  if (load.rejected > 0) {
    spdlog::warn("restore: {} persisted records conflicted with others and were skipped",
                 load.rejected);
  }
  hooks_.send_grants(std::move(load.grants));
  expected_ = locks_.AwaitingReclaimCount();
  DropUnmonitored(loaded);
  const size_t awaiting = locks_.AwaitingReclaimCount();
  spdlog::info(
      "grace period started mode={} seconds={} restored_locks={} restored_shares={} "
      "awaiting={} reason=\"{}\"",
      KindName(plan.kind), options_.duration.count(), load.locks, load.shares, awaiting,
      plan.reason);
  timer_.emplace(executor_);
  if (auto pass = tasks_.TryEnter("grace watcher")) {
    asio::co_spawn(executor_, Watch(std::move(*pass)), asio::detached);
  }
  if (events_.started) {
    events_.started(GraceStartedEvent{*mode, options_.duration, plan.reason, load.locks,
                                      load.shares, awaiting});
  }
}

void GraceController::DropUnmonitored(const store::LoadedState& loaded) {
  std::set<std::string> monitored;
  for (const auto& registration : loaded.registrations) {
    monitored.insert(nsm::FoldName(registration.mon_name));
  }
  std::set<std::string> unmonitored;
  for (const auto& row : loaded.locks) {
    if (!monitored.contains(nsm::FoldName(row.host))) unmonitored.insert(row.host);
  }
  for (const auto& row : loaded.shares) {
    if (!monitored.contains(nsm::FoldName(row.host))) unmonitored.insert(row.host);
  }
  // Nobody will tell these hosts to reclaim (NM_LOCK and shares take no monitor), as with
  // Linux lockd, whose unmonitored locks do not survive a restart.
  for (const std::string& host : unmonitored) {
    lock::DropOutcome dropped = locks_.DropRestored(lock::HostId(host));
    spdlog::info("restore: host {} is not monitored; dropped its {} locks and {} shares", host,
                 dropped.locks, dropped.shares);
    ServeDropped(dropped);
  }
}

void GraceController::ServeDropped(lock::DropOutcome& dropped) {
  hooks_.send_grants(std::move(dropped.grants));
}

void GraceController::NotificationAnswered(const std::string& /*mon_name*/) {
  last_notify_event_ = clock_.Now();
}

void GraceController::HostUnreachable(const std::string& mon_name) {
  last_notify_event_ = clock_.Now();
  if (!options_.drop_unreachable || !locks_.grace().IsActive()) return;
  lock::HostId host(mon_name);
  lock::DropOutcome dropped = locks_.DropRestored(host);
  if (dropped.locks + dropped.shares == 0) return;
  spdlog::warn(
      "grace: host {} never answered SM_NOTIFY; dropped its {} restored locks and {} "
      "shares, serving {} waiters",
      mon_name, dropped.locks, dropped.shares, dropped.grants.size());
  ServeDropped(dropped);
  if (journal_ == nullptr) return;
  if (auto pass = tasks_.TryEnter("host rows settle")) {
    asio::co_spawn(executor_, SettleHost(std::move(host), std::move(*pass)), asio::detached);
  }
}

asio::awaitable<void> GraceController::SettleHost(lock::HostId host, rpc::TaskGate::Pass /*pass*/) {
  co_await journal_->SettleRestored(host);
}

bool GraceController::End(lock::GraceEndReason reason) {
  if (!locks_.grace().IsActive()) return false;
  lock::DropOutcome dropped = locks_.EndGrace(reason);
  ServeDropped(dropped);
  ReportEnded();
  return true;
}

void GraceController::ReportEnded() {
  if (end_reported_) return;
  end_reported_ = true;
  const auto reason = locks_.grace().last_end_reason();
  const uint64_t reclaimed_now = reclaimed();
  const uint64_t dropped_now = dropped();
  const Clock::duration lasted = clock_.Now() - started_;
  spdlog::info("grace period ended reason={} reclaimed={} dropped={} seconds={:.3f}",
               reason ? lock::ToString(*reason) : "unknown", reclaimed_now, dropped_now,
               std::chrono::duration<double>(lasted).count());
  if (events_.ended && reason) {
    events_.ended(GraceEndedEvent{*reason, reclaimed_now, dropped_now, lasted});
  }
}

uint64_t GraceController::dropped() const {
  return locks_.DroppedRestoredCount() - dropped_before_;
}

uint64_t GraceController::reclaimed() const {
  const uint64_t settled = expected_ - std::min<uint64_t>(expected_, locks_.AwaitingReclaimCount());
  return settled - std::min(settled, dropped());
}

bool GraceController::MayEndEarly() const {
  if (!options_.end_early || locks_.AwaitingReclaimCount() > 0) return false;
  if (plan_.kind == GracePlan::Kind::kFineGrained) return true;
  // Classic: reclaims of locks the store never saw may still come. Wait for every host to
  // answer (or be given up) and for the floor past the last answer, so that a client's
  // retried reclaim gets in; with the memory store nobody was notified, so run the window out.
  if (!store_.startup().persistent || hooks_.notifications_in_progress()) return false;
  return clock_.Now() >= last_notify_event_ + options_.floor;
}

void GraceController::Stop() {
  stopped_ = true;
  tasks_.Close();
  if (timer_) timer_->cancel();
}

asio::awaitable<bool> GraceController::Shutdown(std::chrono::steady_clock::duration bound) {
  Stop();
  // The passes are taken without a cancellation slot: a store write is not cut short.
  co_return co_await tasks_.CancelAndWait(bound);
}

asio::awaitable<void> GraceController::Watch(rpc::TaskGate::Pass /*pass*/) {
  while (!stopped_) {
    timer_->expires_after(options_.tick);
    co_await timer_->async_wait(rpc::kUseTuple);
    if (stopped_) co_return;
    // Ends the window if its time ran out (a request may have noticed first).
    lock::DropOutcome dropped = locks_.Tick();
    ServeDropped(dropped);
    if (locks_.grace().IsActive() && MayEndEarly()) {
      dropped = locks_.EndGrace(lock::GraceEndReason::kAllReclaimed);
      ServeDropped(dropped);
    }
    if (!locks_.grace().IsActive()) break;
  }
  if (stopped_) co_return;
  ReportEnded();
  co_await Finish();
}

asio::awaitable<void> GraceController::Finish() {
  // Not "if (...) co_return;" as the first statement: with g++ 12 that coroutine's frame loads
  // an invalid bool on resumption, and UBSan (load_invalid_value) stops the process.
  bool settled = false;
  if (journal_ != nullptr) settled = co_await journal_->SettleRestored();
  if (!settled || !options_.persist_locks) co_return;
  if (co_await MarkComplete()) spdlog::info("lock table complete: restored rows settled");
}

asio::awaitable<void> GraceController::ClearStaleTable(std::vector<std::string> hosts,
                                                       rpc::TaskGate::Pass /*pass*/) {
  if (!options_.persist_locks) co_return;
  std::vector<store::Write> writes;
  for (std::string& host : hosts) {
    writes.push_back(
        [this, host = std::move(host)](store::Done done) { store_.ReleaseHost(host, done); });
  }
  auto [error] = co_await store::AsyncWrite(std::move(writes), rpc::kUseTuple);
  if (error) {
    spdlog::error("cannot clear the stale lock table; the next start will run classic grace");
    co_return;
  }
  co_await MarkComplete();
}

asio::awaitable<bool> GraceController::MarkComplete() {
  // This run's record already says complete (the store copies it from the previous run).
  if (store_.startup().lock_table_complete) co_return true;
  std::vector<store::Write> writes;
  writes.push_back([this](store::Done done) { store_.MarkLockTableComplete(std::move(done)); });
  auto [error] = co_await store::AsyncWrite(std::move(writes), rpc::kUseTuple);
  if (error) {
    spdlog::error("cannot mark the lock table complete; the next start will run classic grace");
    co_return false;
  }
  co_return true;
}

}  // namespace nlockd::server
