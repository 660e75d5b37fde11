// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>

#include <asio/any_io_executor.hpp>
#include <asio/awaitable.hpp>
#include <asio/steady_timer.hpp>

#include "base/clock.hpp"
#include "lock/lock_manager.hpp"
#include "rpc/task_gate.hpp"
#include "rpc/wait_bounds.hpp"
#include "server/recovery.hpp"
#include "store/store.hpp"

namespace nlockd::server {

class StoreLockJournal;

struct GraceControllerOptions {
  // The window (config grace); the plan decides whether there is one.
  std::chrono::seconds duration{90};
  // Classic grace ends early only this long after the last notification answer (or give-up).
  std::chrono::seconds floor{10};
  bool end_early = true;
  // The lock table is written to the store: once grace is over it is marked complete.
  bool persist_locks = true;
  // A host the notifier gave up on loses its restored locks at once.
  bool drop_unreachable = true;
  // How often the window is checked (timer end, early end).
  std::chrono::milliseconds tick{100};
};

// What the controller needs of NLM and the notifier (server/ wires them; tests fake them).
struct GraceHooks {
  // Journals and sends the callbacks of grants made by dropping restored state.
  std::function<void(lock::Grants)> send_grants;
  // Whether the restart notification round still has hosts to answer or give up.
  std::function<bool()> notifications_in_progress;
};

// The window opened (GraceController::Begin).
struct GraceStartedEvent {
  lock::GraceMode mode = lock::GraceMode::kClassic;
  std::chrono::seconds duration{0};
  std::string reason;           // Why this kind of grace (GracePlan::reason).
  size_t restored_locks = 0;    // Persisted locks installed.
  size_t restored_shares = 0;   // Persisted shares installed.
  size_t awaiting_reclaim = 0;  // Of those, what awaits a reclaim once unmonitored hosts went.
};

// The window closed, however it did (timer, early, admin).
struct GraceEndedEvent {
  lock::GraceEndReason reason = lock::GraceEndReason::kTimer;
  uint64_t reclaimed = 0;  // GraceController::reclaimed() at the end.
  uint64_t dropped = 0;    // GraceController::dropped() at the end.
  Clock::duration lasted{};
};

// Who hears of the window: each runs on the controller's executor, once per window, and must
// not call back into the controller. Either may be empty.
struct GraceEvents {
  std::function<void(const GraceStartedEvent&)> started;
  std::function<void(const GraceEndedEvent&)> ended;
};

// The grace period of one start-up, from the restored table to the store marked complete
// (docs/architecture.md, grace plans). Runs on the lock executor.
//
// Begin() installs the persisted locks and shares as expected reclaims and opens the window the
// plan chose; a watcher then ends it at its timer or early (fine-grained: once nothing awaits a
// reclaim; classic: also once the notification round is over and `floor` has passed since its
// last answer, never with the memory store, whose clients were never told). However it ends
// (timer, early, the admin API ending it on the LockManager), the watcher drops what was not
// reclaimed, serves the waiters that frees, rewrites the restored owners' rows from what they
// hold now, and marks the store's lock table complete.
//
// Every coroutine it spawns (the watcher, store writes) holds a pass of its TaskGate: Shutdown()
// wakes them and waits for them, so that none resumes into a destroyed controller. clock, locks
// and store must outlive it. REQUIRES: Shutdown() has completed before destruction, if Begin()
// ran.
class GraceController {
 public:
  GraceController(asio::any_io_executor executor, const Clock& clock, lock::LockManager& locks,
                  store::Store& store, GraceHooks hooks, GraceControllerOptions options);

  // The journal whose restored rows are settled when grace ends; null when locks are not
  // persisted. Set before Begin().
  void set_journal(StoreLockJournal* journal) { journal_ = journal; }

  // Tells `events` when the window opens and when it closes. A plan without a window ("none")
  // reports nothing; a window still open at Stop() reports no end. REQUIRES: before Begin().
  void set_events(GraceEvents events) { events_ = std::move(events); }

  // Start-up: applies `plan` to the loaded table; reports `started` before returning.
  // REQUIRES: called once, before serving.
  void Begin(const GracePlan& plan, const store::LoadedState& loaded);

  // The notifier's per-host outcomes (classic grace waits for the last one; an unreachable host
  // loses its restored locks when drop_unreachable).
  void NotificationAnswered(const std::string& mon_name);
  void HostUnreachable(const std::string& mon_name);

  // Stops the watcher and spawns nothing more. Grace is left as it is: the store keeps the
  // restored rows.
  void Stop();
  // Stop(), then cancel and wait (at most `bound`) for the coroutines it spawned: the watcher
  // ends at once, a store write is let finish (it is not cut short). False, with one warning
  // naming what still runs, if some do (a store that hangs).
  asio::awaitable<bool> Shutdown(std::chrono::steady_clock::duration bound = rpc::kGraceTasksBound);

  // Ends the window now (the admin API): drops what awaits a reclaim, serves its waiters and
  // reports `ended`; the watcher then settles the store. False if no window is open.
  bool End(lock::GraceEndReason reason);

  const GracePlan& plan() const { return plan_; }
  // Restored locks and shares awaiting a reclaim when the window opened.
  uint64_t expected() const { return expected_; }
  // Restored locks and shares dropped unreclaimed (timer, admin, unreachable, unmonitored, or
  // released with their host: a reboot notification, FREE_ALL).
  uint64_t dropped() const;
  // Of those expected, how many are back with their owners: no longer awaiting and not dropped
  // (reclaimed, or changed by their owner's own call).
  uint64_t reclaimed() const;

 private:
  asio::awaitable<void> Watch(rpc::TaskGate::Pass pass);
  // Reports the end of the window, once: from End(), or from the watcher that noticed it.
  void ReportEnded();
  bool MayEndEarly() const;
  // Drops restored state of hosts nobody will notify (not monitored: NM_LOCK locks).
  void DropUnmonitored(const store::LoadedState& loaded);
  // Sends the callbacks of the waiters that dropping restored state granted.
  void ServeDropped(lock::DropOutcome& dropped);
  // After grace: settles restored rows and marks the lock table complete.
  asio::awaitable<void> Finish();
  // Grace "none": the persisted rows are stale; clear them and mark the table complete.
  asio::awaitable<void> ClearStaleTable(std::vector<std::string> hosts, rpc::TaskGate::Pass pass);
  // Rewrites the rows of a host whose restored state was dropped.
  asio::awaitable<void> SettleHost(lock::HostId host, rpc::TaskGate::Pass pass);
  asio::awaitable<bool> MarkComplete();

  asio::any_io_executor executor_;
  const Clock& clock_;
  lock::LockManager& locks_;
  store::Store& store_;
  GraceHooks hooks_;
  GraceControllerOptions options_;
  StoreLockJournal* journal_ = nullptr;

  GracePlan plan_{GracePlan::Kind::kNone, "not started"};
  Clock::time_point started_{};
  // Last notification answer or give-up; the classic floor counts from it.
  Clock::time_point last_notify_event_{};
  size_t expected_ = 0;
  // LockManager::DroppedRestoredCount() when the window opened.
  uint64_t dropped_before_ = 0;
  rpc::TaskGate tasks_;
  bool stopped_ = false;
  bool end_reported_ = false;
  GraceEvents events_;
  std::optional<asio::steady_timer> timer_;
};

}  // namespace nlockd::server
