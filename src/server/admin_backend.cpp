// SPDX-License-Identifier: Apache-2.0
// AdminBackend: start-up marks, status and readiness, the grace view, and the services' own
// counters for Metrics.
#include "server/admin_backend.hpp"

#include <array>

#include "admin/metrics.hpp"
#include "lock/lock_manager.hpp"
#include "nsm/registry.hpp"
#include "server/admin_backend_calls.hpp"
#include "server/nsm_bridge.hpp"

namespace nlockd::server {

using admin::ApiError;
using admin::ApiErrorKind;

AdminBackend::AdminBackend(AdminBackendParts parts, std::chrono::milliseconds timeout)
    : parts_(std::move(parts)), timeout_(timeout), started_(parts_.clock.Now()) {
  parts_.metrics.SetServiceCountsSource(
      [this] { return OnExecutor([this] { return ReadServiceCounts(); }); });
}

AdminBackend::~AdminBackend() {
  // Waits for a Refresh that is reading through this backend now.
  parts_.metrics.SetServiceCountsSource({});
}

void AdminBackend::MarkListening(std::span<const std::unique_ptr<rpc::Server>> rpc_servers) {
  rpc_servers_.clear();
  for (const auto& server : rpc_servers) rpc_servers_.push_back(server.get());
  MarkServing();
}

void AdminBackend::MarkServing() {
  reclaims_expected_ = parts_.locks.AwaitingReclaimCount();
  serving_.store(true);
}

void AdminBackend::CheckOpen() const {
  if (closed_.load()) throw ApiError(ApiErrorKind::kUnavailable, "nlockd is shutting down");
  if (!store_loaded_.load()) throw ApiError(ApiErrorKind::kUnavailable, "nlockd is starting");
}

admin::GraceView AdminBackend::GraceNow() const {
  const lock::GracePeriod& grace = parts_.locks.grace();
  admin::GraceView view;
  view.active = grace.IsActive();
  if (view.active && grace.mode()) view.mode = std::string(lock::ToString(*grace.mode()));
  if (view.active) view.seconds_left = Seconds(grace.Remaining());
  if (grace.last_end_reason()) {
    view.last_end_reason = std::string(lock::ToString(*grace.last_end_reason()));
  }
  // Of the restored locks and shares the window started with, those no longer awaiting their
  // reclaim (once grace is over, the rest were dropped).
  view.reclaims_expected = reclaims_expected_;
  if (parts_.grace != nullptr) {
    view.reclaims_expected = parts_.grace->expected();
    view.reclaims_counted = parts_.grace->reclaimed();
  } else if (view.active) {
    const uint64_t awaiting = parts_.locks.AwaitingReclaimCount();
    view.reclaims_counted = reclaims_expected_ > awaiting ? reclaims_expected_ - awaiting : 0;
  }
  return view;
}

admin::StatusView AdminBackend::StatusNow() const {
  admin::StatusView status;
  status.state_number = parts_.nsm.state();
  status.server_name = parts_.server_name;
  status.uptime_seconds = Seconds(parts_.clock.Now() - started_);
  status.grace = GraceNow();
  status.registrations = parts_.nsm.registry().size();
  status.monitored_hosts = parts_.nsm.registry().peer_count();
  lock::LockCounts counts = parts_.locks.Counts();
  status.hosts = counts.hosts;
  status.locks = counts.locks;
  status.shares = counts.shares;
  status.waiters = counts.waiters;
  status.pending_grants = counts.pending_grants;
  return status;
}

admin::ServiceCounts AdminBackend::ReadServiceCounts() const {
  using admin::CallbackKind;
  using admin::CallbackResult;
  admin::ServiceCounts counts;
  const nsm::NsmStats& nsm = parts_.nsm.stats();
  counts.crashes_detected = nsm.crashes_detected;
  counts.callback(CallbackKind::kStatus, CallbackResult::kOk) =
      nsm.callbacks_ok + nsm.callbacks_local;
  counts.callback(CallbackKind::kStatus, CallbackResult::kFailed) = nsm.callbacks_failed;
  counts.callback(CallbackKind::kStatus, CallbackResult::kRefused) = nsm.callbacks_refused;
  counts.crash_cleanups = parts_.bridge.crash_cleanups();
  counts.locks_cleaned_on_crash = parts_.bridge.locks_cleaned();

  const nlm::NlmStats& nlm = parts_.nlm.stats();
  const CallbackKind granted =
      parts_.granted_msg ? CallbackKind::kGrantedMsg : CallbackKind::kGranted;
  counts.callback(granted, CallbackResult::kOk) = nlm.callbacks_acknowledged;
  counts.callback(granted, CallbackResult::kRefused) = nlm.callbacks_refused;
  counts.callback(granted, CallbackResult::kFailed) = nlm.callbacks_failed;
  // The _RES calls answering _MSG calls, in procedure order from NLM_TEST_RES.
  constexpr std::array<CallbackKind, nlm::NlmStats::kResProcedures> kResKinds = {
      CallbackKind::kTestRes, CallbackKind::kLockRes, CallbackKind::kCancelRes,
      CallbackKind::kUnlockRes, CallbackKind::kGrantedRes};
  for (size_t i = 0; i < kResKinds.size(); ++i) {
    const nlm::NlmStats::ResOutcomes& res = nlm.res_by_procedure[i];
    counts.callback(kResKinds[i], CallbackResult::kOk) = res.delivered;
    counts.callback(kResKinds[i], CallbackResult::kTimedOut) = res.timed_out;
    counts.callback(kResKinds[i], CallbackResult::kFailed) = res.failed;
  }
  counts.reclaims = nlm.reclaims_granted;
  counts.deadlocks_refused = nlm.deadlocks_refused;

  if (serving_.load()) {
    for (const rpc::Server* server : rpc_servers_) {
      const rpc::ServerStats& rpc = server->stats();
      counts.bytes_received += rpc.bytes_received;
      counts.bytes_sent += rpc.bytes_sent;
      counts.records_too_large += rpc.records_too_large;
      counts.open_connections += rpc.open_connections;
    }
  }
  return counts;
}

admin::StatusView AdminBackend::Status() {
  admin::StatusView view = OnExecutor([this] { return StatusNow(); });
  if (parts_.ha) view.ha = parts_.ha();
  return view;
}

admin::ReadinessView AdminBackend::Readiness() {
  admin::ReadinessView view;
  view.store_loaded = store_loaded_.load();
  view.listening = serving_.load() && !closed_.load();
  if (parts_.ha) view.ha = parts_.ha();
  // Grace lives on the executor, which does not run before the server listens.
  if (view.ready() && !closed_.load()) view.grace = OnExecutor([this] { return GraceNow(); });
  return view;
}

admin::GraceView AdminBackend::Grace() {
  return OnExecutor([this] { return GraceNow(); });
}

}  // namespace nlockd::server
