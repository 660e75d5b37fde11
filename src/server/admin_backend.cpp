#include "server/admin_backend.hpp"

#include <algorithm>
#include <array>
#include <exception>
#include <functional>
#include <future>
#include <memory>
#include <set>
#include <type_traits>
#include <utility>
#include <vector>

#include <asio/co_spawn.hpp>
#include <asio/post.hpp>
#include <asio/use_future.hpp>
#include <spdlog/spdlog.h>

#include "admin/metrics.hpp"
#include "lock/lock_manager.hpp"
#include "nsm/registry.hpp"
#include "server/nsm_bridge.hpp"

namespace nlockd::server {

namespace {

using admin::ApiError;
using admin::ApiErrorKind;

double Seconds(Clock::duration duration) { return std::chrono::duration<double>(duration).count(); }

std::string RegistrationIdOf(const store::Registration& registration) {
  const store::MyId& id = registration.my_id;
  return admin::MakeRegistrationId(registration.mon_name, id.my_name, id.my_prog, id.my_vers,
                                   id.my_proc);
}

int64_t UnixSeconds(std::chrono::system_clock::time_point at) {
  return std::chrono::duration_cast<std::chrono::seconds>(at.time_since_epoch()).count();
}

admin::RegistrationView ToView(const store::Registration& registration) {
  admin::RegistrationView view;
  view.id = RegistrationIdOf(registration);
  view.mon_name = registration.mon_name;
  view.my_name = registration.my_id.my_name;
  view.my_prog = registration.my_id.my_prog;
  view.my_vers = registration.my_id.my_vers;
  view.my_proc = registration.my_id.my_proc;
  view.priv.assign(registration.priv.begin(), registration.priv.end());
  view.source_address = registration.source_address;
  view.created_unix = UnixSeconds(registration.created);
  view.updated_unix = UnixSeconds(registration.updated);
  return view;
}

lock::StateFilter FilterOf(const admin::StateQuery& query) {
  lock::StateFilter filter;
  if (query.host) filter.host = lock::HostId(*query.host);
  if (query.file) filter.file = lock::FileKey(*query.file);
  return filter;
}

admin::LockView ToView(const lock::LockInfo& info) {
  admin::LockView view;
  view.file = info.file.value();
  view.host = info.owner.host.value();
  view.svid = info.owner.svid;
  view.owner = info.owner.oh.value();
  view.offset = info.range.offset();
  view.length = info.range.length();
  view.exclusive = info.type == lock::LockType::kExclusive;
  view.awaiting_reclaim = info.awaiting_reclaim;
  return view;
}

// The API's names of share modes (admin/backend.hpp, docs/api.md), one set for access and deny,
// rather than lock::ToString's log spellings ("read-write", "deny-write"). Both enums are bit
// sets: read 1, write 2.
template <typename Mode>
std::string ShareModeName(Mode mode) {
  const auto bits = static_cast<unsigned>(mode);
  if (bits == 3) return "read_write";
  if (bits == 1) return "read";
  if (bits == 2) return "write";
  return "none";
}

admin::ShareView ToView(const lock::ShareInfo& info) {
  admin::ShareView view;
  view.file = info.file.value();
  view.host = info.owner.host.value();
  view.owner = info.owner.oh.value();
  view.access = ShareModeName(info.access);
  view.deny = ShareModeName(info.deny);
  view.awaiting_reclaim = info.awaiting_reclaim;
  return view;
}

admin::WaiterView ToView(const lock::WaiterInfo& info, Clock::time_point now) {
  admin::WaiterView view;
  view.id = info.id.value();
  view.file = info.file.value();
  view.host = info.owner.host.value();
  view.svid = info.owner.svid;
  view.owner = info.owner.oh.value();
  view.offset = info.range.offset();
  view.length = info.range.length();
  view.exclusive = info.type == lock::LockType::kExclusive;
  view.granted = info.granted;
  view.seconds = Seconds(now - info.since);
  return view;
}

template <typename View, typename Info>
std::vector<View> ToViews(const std::vector<Info>& infos) {
  std::vector<View> views;
  views.reserve(infos.size());
  for (const auto& info : infos) views.push_back(ToView(info));
  return views;
}

// How far the counter moved since the last export; a counter never goes back.
uint64_t Delta(uint64_t now, uint64_t before) { return now > before ? now - before : 0; }

void Repeat(uint64_t times, const std::function<void()>& fn) {
  for (uint64_t i = 0; i < times; ++i) fn();
}

}  // namespace

AdminBackend::AdminBackend(AdminBackendParts parts, std::chrono::milliseconds timeout)
    : parts_(std::move(parts)), timeout_(timeout), started_(parts_.clock.Now()) {}

void AdminBackend::MarkListening(const rpc::Server& rpc_server) {
  rpc_server_.store(&rpc_server);
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

template <typename Work>
auto AdminBackend::OnExecutor(Work work) -> decltype(work()) {
  using Result = decltype(work());
  CheckOpen();
  // Shared: after a timeout the work may still run, and sets a promise nobody waits for.
  auto promise = std::make_shared<std::promise<Result>>();
  std::future<Result> future = promise->get_future();
  asio::post(parts_.executor, [promise, work = std::move(work)]() mutable {
    try {
      if constexpr (std::is_void_v<Result>) {
        work();
        promise->set_value();
      } else {
        promise->set_value(work());
      }
    } catch (...) {
      promise->set_exception(std::current_exception());
    }
  });
  if (future.wait_for(timeout_) != std::future_status::ready) {
    throw ApiError(ApiErrorKind::kUnavailable, "nlockd did not answer in time");
  }
  return future.get();
}

template <typename T>
T AdminBackend::Await(asio::awaitable<T> work) {
  CheckOpen();
  std::future<T> future = asio::co_spawn(parts_.executor, std::move(work), asio::use_future);
  if (future.wait_for(timeout_) != std::future_status::ready) {
    throw ApiError(ApiErrorKind::kUnavailable, "nlockd did not answer in time");
  }
  return future.get();
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
    view.reclaims_counted = Delta(reclaims_expected_, parts_.locks.AwaitingReclaimCount());
  }
  return view;
}

AdminBackend::Snapshot AdminBackend::TakeSnapshot() const {
  Snapshot snapshot;
  admin::StatusView& status = snapshot.status;
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

  Counters& counters = snapshot.counters;
  counters.nsm = parts_.nsm.stats();
  counters.nlm = parts_.nlm.stats();
  nsm::NotifierStats notifier = parts_.notifier.stats();
  counters.notifications_answered = notifier.answered;
  counters.notifications_failed = notifier.failed_attempts;
  counters.notifications_given_up = notifier.given_up;
  counters.crash_cleanups = parts_.bridge.crash_cleanups();
  counters.locks_cleaned = parts_.bridge.locks_cleaned();
  if (const rpc::Server* server = rpc_server_.load()) counters.rpc = server->stats();
  return snapshot;
}

void AdminBackend::ExportCounters(const Counters& now) {
  using admin::CallbackKind;
  using admin::CallbackResult;
  using admin::NotificationResult;
  admin::Metrics& metrics = parts_.metrics;
  std::lock_guard guard(export_mutex_);
  Counters& before = exported_;

  Repeat(Delta(now.nsm.crashes_detected, before.nsm.crashes_detected),
         [&] { metrics.CrashDetected(); });
  uint64_t cleanups = Delta(now.crash_cleanups, before.crash_cleanups);
  uint64_t locks_cleaned = Delta(now.locks_cleaned, before.locks_cleaned);
  for (uint64_t i = 0; i < cleanups; ++i) metrics.CrashCleanedUp(i == 0 ? locks_cleaned : 0);
  metrics.ObserveCallback(CallbackKind::kStatus, CallbackResult::kOk,
                          Delta(now.nsm.callbacks_ok + now.nsm.callbacks_local,
                                before.nsm.callbacks_ok + before.nsm.callbacks_local));
  metrics.ObserveCallback(CallbackKind::kStatus, CallbackResult::kFailed,
                          Delta(now.nsm.callbacks_failed, before.nsm.callbacks_failed));
  metrics.ObserveCallback(CallbackKind::kStatus, CallbackResult::kRefused,
                          Delta(now.nsm.callbacks_refused, before.nsm.callbacks_refused));

  metrics.CountNotifications(NotificationResult::kDelivered,
                             Delta(now.notifications_answered, before.notifications_answered));
  // failed_attempts counts the last attempt of a host given up too: that one is gave_up.
  metrics.CountNotifications(NotificationResult::kFailed,
                             Delta(now.notifications_failed - now.notifications_given_up,
                                   before.notifications_failed - before.notifications_given_up));
  metrics.CountNotifications(NotificationResult::kGaveUp,
                             Delta(now.notifications_given_up, before.notifications_given_up));

  CallbackKind granted = parts_.granted_msg ? CallbackKind::kGrantedMsg : CallbackKind::kGranted;
  metrics.ObserveCallback(granted, CallbackResult::kOk,
                          Delta(now.nlm.callbacks_acknowledged, before.nlm.callbacks_acknowledged));
  metrics.ObserveCallback(granted, CallbackResult::kRefused,
                          Delta(now.nlm.callbacks_refused, before.nlm.callbacks_refused));
  metrics.ObserveCallback(granted, CallbackResult::kFailed,
                          Delta(now.nlm.callbacks_failed, before.nlm.callbacks_failed));
  // The _RES calls answering _MSG calls, in procedure order from NLM_TEST_RES.
  constexpr std::array<CallbackKind, nlm::NlmStats::kResProcedures> kResKinds = {
      CallbackKind::kTestRes, CallbackKind::kLockRes, CallbackKind::kCancelRes,
      CallbackKind::kUnlockRes, CallbackKind::kGrantedRes};
  for (size_t i = 0; i < kResKinds.size(); ++i) {
    const nlm::NlmStats::ResOutcomes& res_now = now.nlm.res_by_procedure[i];
    const nlm::NlmStats::ResOutcomes& res_before = before.nlm.res_by_procedure[i];
    metrics.ObserveCallback(kResKinds[i], CallbackResult::kOk,
                            Delta(res_now.delivered, res_before.delivered));
    metrics.ObserveCallback(kResKinds[i], CallbackResult::kTimedOut,
                            Delta(res_now.timed_out, res_before.timed_out));
    metrics.ObserveCallback(kResKinds[i], CallbackResult::kFailed,
                            Delta(res_now.failed, res_before.failed));
  }
  metrics.Reclaimed(Delta(now.nlm.reclaims_granted, before.nlm.reclaims_granted));

  const rpc::ServerStats& rpc_now = now.rpc;
  const rpc::ServerStats& rpc_before = before.rpc;
  metrics.BytesReceived(Delta(rpc_now.bytes_received, rpc_before.bytes_received));
  metrics.BytesSent(Delta(rpc_now.bytes_sent, rpc_before.bytes_sent));
  Repeat(Delta(rpc_now.records_too_large, rpc_before.records_too_large),
         [&] { metrics.MalformedRequest(admin::MalformedReason::kRecordTooLarge); });
  for (size_t open = rpc_before.open_connections; open < rpc_now.open_connections; ++open) {
    metrics.ConnectionOpened();
  }
  for (size_t open = rpc_now.open_connections; open < rpc_before.open_connections; ++open) {
    metrics.ConnectionClosed();
  }
  exported_ = now;
}

admin::StatusView AdminBackend::Status() {
  Snapshot snapshot = OnExecutor([this] { return TakeSnapshot(); });
  ExportCounters(snapshot.counters);
  return snapshot.status;
}

admin::ReadinessView AdminBackend::Readiness() {
  admin::ReadinessView view;
  view.store_loaded = store_loaded_.load();
  view.listening = serving_.load() && !closed_.load();
  // Grace lives on the executor, which does not run before the server listens.
  if (view.ready() && !closed_.load()) view.grace = OnExecutor([this] { return GraceNow(); });
  return view;
}

std::optional<store::Registration> AdminBackend::FindRegistration(const std::string& id) const {
  for (auto& registration : parts_.nsm.registry().All()) {
    if (RegistrationIdOf(registration) == id) return std::move(registration);
  }
  return std::nullopt;
}

admin::ListResult<admin::RegistrationView> AdminBackend::ListRegistrations(
    const admin::RegistrationQuery& query) {
  std::vector<admin::RegistrationView> all = OnExecutor([this, query] {
    std::vector<admin::RegistrationView> views;
    for (const auto& registration : parts_.nsm.registry().All()) {
      if (query.mon_name && registration.mon_name != *query.mon_name) continue;
      if (query.my_name && registration.my_id.my_name != *query.my_name) continue;
      views.push_back(ToView(registration));
    }
    return views;
  });
  return admin::TakePage(std::move(all), query.page);
}

admin::RegistrationView AdminBackend::GetRegistration(const std::string& id) {
  auto registration = OnExecutor([this, id] { return FindRegistration(id); });
  if (!registration) throw ApiError(ApiErrorKind::kNotFound, "no registration " + id);
  return ToView(*registration);
}

asio::awaitable<bool> AdminBackend::RemoveRegistration(std::string mon_name, store::MyId my_id) {
  co_return co_await parts_.nsm.RemoveRegistration(std::move(mon_name), std::move(my_id));
}

void AdminBackend::DeleteRegistration(const std::string& id) {
  auto registration = OnExecutor([this, id] { return FindRegistration(id); });
  if (!registration) throw ApiError(ApiErrorKind::kNotFound, "no registration " + id);
  if (nsm::IsLocalNlmId(registration->my_id)) {
    // Removing it would leave a host holding locks unwatched: a reboot would not free them.
    throw ApiError(ApiErrorKind::kConflict, "registration " + id +
                                                " is nlockd's own NLM monitoring a client host; "
                                                "release the host instead");
  }
  // Gone meanwhile (an SM_UNMON raced us): the caller wanted it gone, and it is.
  Await(RemoveRegistration(registration->mon_name, registration->my_id));
}

std::set<std::string> AdminBackend::MonitoredKeys() const {
  std::set<std::string> keys;
  for (const auto& peer : parts_.nsm.registry().Peers()) {
    keys.insert(nsm::FoldName(peer.name));
    keys.insert(peer.addresses.begin(), peer.addresses.end());
  }
  return keys;
}

bool AdminBackend::Monitored(const std::set<std::string>& keys, const std::string& host_id,
                             const std::string& label) {
  return keys.count(nsm::FoldName(host_id)) != 0 || keys.count(host_id) != 0 ||
         (!label.empty() && keys.count(nsm::FoldName(label)) != 0);
}

admin::ListResult<admin::HostView> AdminBackend::ListHosts(const admin::Page& page) {
  std::vector<admin::HostView> all = OnExecutor([this] {
    Clock::time_point now = parts_.clock.Now();
    std::set<std::string> monitored = MonitoredKeys();
    std::vector<admin::HostView> views;
    parts_.locks.hosts().ForEach([&](const lock::HostInfo& host) {
      admin::HostView view;
      view.name = host.id.value();
      view.label = host.label;
      view.nsm_state = host.nsm_state;
      view.monitored = Monitored(monitored, view.name, view.label);
      view.first_seen_seconds_ago = Seconds(now - host.first_seen);
      view.last_seen_seconds_ago = Seconds(now - host.last_seen);
      view.locks = host.locks;
      view.shares = host.shares;
      view.waiters = host.waiters;
      view.pending_grants = host.pending_grants;
      views.push_back(std::move(view));
    });
    // The registry keeps no order; a stable one makes pages meaningful.
    std::sort(views.begin(), views.end(),
              [](const auto& a, const auto& b) { return a.name < b.name; });
    return views;
  });
  return admin::TakePage(std::move(all), page);
}

admin::HostDetail AdminBackend::GetHost(const std::string& name) {
  auto found = OnExecutor([this, name]() -> std::optional<admin::HostDetail> {
    const lock::HostInfo* host = parts_.locks.hosts().Find(lock::HostId(name));
    if (host == nullptr) return std::nullopt;
    Clock::time_point now = parts_.clock.Now();
    admin::HostDetail detail;
    detail.host.name = name;
    detail.host.label = host->label;
    detail.host.nsm_state = host->nsm_state;
    detail.host.monitored = Monitored(MonitoredKeys(), name, host->label);
    detail.host.first_seen_seconds_ago = Seconds(now - host->first_seen);
    detail.host.last_seen_seconds_ago = Seconds(now - host->last_seen);
    detail.host.locks = host->locks;
    detail.host.shares = host->shares;
    detail.host.waiters = host->waiters;
    detail.host.pending_grants = host->pending_grants;
    lock::StateFilter filter;
    filter.host = lock::HostId(name);
    detail.locks = ToViews<admin::LockView>(parts_.locks.ListLocks(filter));
    detail.shares = ToViews<admin::ShareView>(parts_.locks.ListShares(filter));
    for (const auto& waiter : parts_.locks.ListWaiters(filter)) {
      detail.waiters.push_back(ToView(waiter, now));
    }
    return detail;
  });
  if (!found) throw ApiError(ApiErrorKind::kNotFound, "no host " + name);
  return std::move(*found);
}

admin::ReleaseResult AdminBackend::ReleaseHost(const std::string& name) {
  auto released = OnExecutor([this, name]() -> std::optional<admin::ReleaseResult> {
    const lock::HostInfo* host = parts_.locks.hosts().Find(lock::HostId(name));
    if (host == nullptr) return std::nullopt;
    admin::ReleaseResult result;
    result.locks = host->locks;
    result.shares = host->shares;
    result.waiters = host->waiters;
    uint64_t host_waiters = host->waiters;
    size_t queued_before = parts_.locks.Counts().waiters;
    // The FREE_ALL path: releases the host (and any host whose caller_name label is `name`),
    // journals it, and sends the GRANTED callbacks of the waiters it serves.
    parts_.nlm.HostRebooted(name);
    size_t queued_after = parts_.locks.Counts().waiters;
    // Other hosts' queued waiters that left the queue were granted.
    result.waiters_granted = Delta(queued_before, queued_after + host_waiters);
    spdlog::info("admin released host={} locks={} shares={} waiters={} waiters_granted={}", name,
                 result.locks, result.shares, result.waiters, result.waiters_granted);
    return result;
  });
  if (!released) throw ApiError(ApiErrorKind::kNotFound, "no host " + name);
  return *released;
}

admin::ListResult<admin::LockView> AdminBackend::ListLocks(const admin::StateQuery& query) {
  auto all = OnExecutor(
      [this, query] { return ToViews<admin::LockView>(parts_.locks.ListLocks(FilterOf(query))); });
  return admin::TakePage(std::move(all), query.page);
}

admin::ListResult<admin::ShareView> AdminBackend::ListShares(const admin::StateQuery& query) {
  auto all = OnExecutor([this, query] {
    return ToViews<admin::ShareView>(parts_.locks.ListShares(FilterOf(query)));
  });
  return admin::TakePage(std::move(all), query.page);
}

admin::ListResult<admin::WaiterView> AdminBackend::ListWaiters(const admin::StateQuery& query) {
  auto all = OnExecutor([this, query] {
    Clock::time_point now = parts_.clock.Now();
    std::vector<admin::WaiterView> views;
    for (const auto& waiter : parts_.locks.ListWaiters(FilterOf(query))) {
      views.push_back(ToView(waiter, now));
    }
    return views;
  });
  return admin::TakePage(std::move(all), query.page);
}

admin::GraceView AdminBackend::Grace() {
  return OnExecutor([this] { return GraceNow(); });
}

admin::GraceView AdminBackend::EndGrace() {
  auto ended = OnExecutor([this]() -> std::optional<admin::GraceView> {
    if (!parts_.locks.grace().IsActive()) return std::nullopt;
    spdlog::info("grace period ended by the admin API");
    if (parts_.grace != nullptr) {
      parts_.grace->End(lock::GraceEndReason::kAdmin);
      return GraceNow();
    }
    lock::DropOutcome dropped = parts_.locks.EndGrace(lock::GraceEndReason::kAdmin);
    parts_.nlm.SendGrants(std::move(dropped.grants));
    return GraceNow();
  });
  if (!ended) throw ApiError(ApiErrorKind::kConflict, "no grace period is active");
  return *ended;
}

admin::NotifyResult AdminBackend::Notify(const std::optional<std::string>& host) {
  auto queued = OnExecutor([this, host]() -> std::optional<uint64_t> {
    std::vector<nsm::NotifyTarget> targets = nsm::MonitoredTargets(parts_.nsm.registry(), host);
    if (host && targets.empty()) return std::nullopt;
    uint64_t count = targets.size();
    int32_t state = parts_.nsm.state();
    spdlog::info("admin: notifying {} hosts of state {} as {}", count, state, parts_.server_name);
    if (count != 0) parts_.notifier.StartRound(parts_.server_name, state, std::move(targets));
    return count;
  });
  if (!queued) throw ApiError(ApiErrorKind::kNotFound, "no registration monitors " + *host);
  admin::NotifyResult result;
  result.hosts = *queued;
  return result;
}

}  // namespace nlockd::server
