#include "admin/metrics.hpp"

#include <sstream>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

namespace nlockd::admin {
namespace {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;
using prometheus::Counter;
using prometheus::Family;
using prometheus::Gauge;
using prometheus::Histogram;

// The nlm4_stats names (RFC 1813 appendix II), lowercase, plus the outcomes of void procedures
// and of requests that never reached the service.
constexpr std::string_view kNlmResults[] = {
    "granted",  "denied", "denied_nolocks", "blocked", "denied_grace_period", "deadlck",   "rofs",
    "stale_fh", "fbig",   "failed",         "ok",      "garbage_args",        "system_err"};
// sm_inter.x res (stat_succ, stat_fail), void procedures, and refusals of privileged procedures
// to callers outside the allowlist.
constexpr std::string_view kNsmResults[] = {"stat_succ", "stat_fail",    "ok",
                                            "denied",    "garbage_args", "system_err"};

constexpr std::string_view kNotificationResultNames[] = {"delivered", "failed", "gave_up"};
constexpr std::string_view kCallbackKindNames[] = {"granted",     "granted_msg", "test_res",
                                                   "lock_res",    "cancel_res",  "unlock_res",
                                                   "granted_res", "status"};
constexpr std::string_view kCallbackResultNames[] = {"ok", "refused", "failed", "timed_out"};
// lock::ToString(GraceEndReason) spellings, as GraceView carries them.
constexpr std::array<std::string_view, 3> kGraceEndReasons = {"timer", "all-reclaimed", "admin"};
constexpr std::string_view kMalformedReasonNames[] = {
    "record_too_large", "bad_message",   "rpc_mismatch", "auth_error",
    "prog_unavail",     "prog_mismatch", "proc_unavail", "garbage_args"};

// Request handling: 50 us to 5 s.
Histogram::BucketBoundaries RequestBuckets() {
  return {0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
          0.025,   0.05,   0.1,     0.25,   0.5,   1,      2.5,   5};
}
// One SM_NOTIFY attempt: bounded by its deadline (5 s by default), longer if configured.
Histogram::BucketBoundaries NotificationBuckets() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};
}
Histogram::BucketBoundaries CommitBuckets() {
  return {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1};
}
Histogram::BucketBoundaries BatchBuckets() {
  return {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096};
}

template <typename E>
size_t Index(E value) {
  return static_cast<size_t>(value);
}

}  // namespace

RequestMetrics::RequestMetrics(Family<Counter>& requests, Histogram& duration,
                               std::map<std::string, std::string> labels,
                               std::span<const std::string_view> known_results)
    : requests_(requests),
      duration_(duration),
      labels_(std::move(labels)),
      known_results_(known_results),
      known_(new std::atomic<Counter*>[known_results.size()]) {
  for (size_t i = 0; i < known_results_.size(); ++i) known_[i].store(nullptr);
}

RequestMetrics::~RequestMetrics() = default;

Counter& RequestMetrics::CounterFor(std::string_view result) {
  for (size_t i = 0; i < known_results_.size(); ++i) {
    if (known_results_[i] != result) continue;
    Counter* counter = known_[i].load(std::memory_order_acquire);
    if (counter == nullptr) {
      // Family::Add is idempotent, so two threads racing here get the same child.
      auto labels = labels_;
      labels.emplace("result", std::string(result));
      counter = &requests_.Add(labels);
      known_[i].store(counter, std::memory_order_release);
    }
    return *counter;
  }
  auto labels = labels_;
  labels.emplace("result", std::string(result));
  return requests_.Add(labels);
}

void RequestMetrics::Observe(std::string_view result, double seconds) {
  CounterFor(result).Increment();
  duration_.Observe(seconds);
}

Metrics::Metrics() : registry_(std::make_shared<prometheus::Registry>()) {
  auto& registry = *registry_;
  nsm_requests_ = &BuildCounter()
                       .Name("nsm_requests_total")
                       .Help("NSM requests handled, by procedure and result.")
                       .Register(registry);
  nsm_request_duration_ = &BuildHistogram()
                               .Name("nsm_request_duration_seconds")
                               .Help("Time to handle an NSM request, store writes included.")
                               .Register(registry);
  clients_registered_ = &BuildGauge()
                             .Name("nsm_clients_registered")
                             .Help("NSM monitor registrations (SM_MON) held.")
                             .Register(registry)
                             .Add({});
  monitored_hosts_ = &BuildGauge()
                          .Name("nsm_monitored_hosts")
                          .Help("Distinct hosts watched by the NSM registrations.")
                          .Register(registry)
                          .Add({});
  state_number_ = &BuildGauge()
                       .Name("nsm_state_number")
                       .Help("This server's NSM state number (odd while up).")
                       .Register(registry)
                       .Add({});
  auto& notifications = BuildCounter()
                            .Name("nsm_notifications_total")
                            .Help("SM_NOTIFY attempts to peers' status monitors, by result.")
                            .Register(registry);
  for (size_t i = 0; i < kNotificationResults; ++i) {
    notifications_[i] = &notifications.Add({{"result", std::string(kNotificationResultNames[i])}});
  }
  notification_duration_ = &BuildHistogram()
                                .Name("nsm_notification_duration_seconds")
                                .Help("Time of one SM_NOTIFY attempt (resolve, connect, call).")
                                .Register(registry)
                                .Add({}, NotificationBuckets());
  crashes_detected_ = &BuildCounter()
                           .Name("nsm_crashes_detected_total")
                           .Help(
                               "Reboots of monitored hosts detected (SM_NOTIFY received or "
                               "notification given up).")
                           .Register(registry)
                           .Add({});
  crash_cleanups_ = &BuildCounter()
                         .Name("nsm_crash_cleanups_total")
                         .Help("Releases of a crashed host's lock state.")
                         .Register(registry)
                         .Add({});
  locks_cleaned_on_crash_ = &BuildCounter()
                                 .Name("nsm_locks_cleaned_on_crash_total")
                                 .Help("Lock entries released because their host crashed.")
                                 .Register(registry)
                                 .Add({});

  nlm_requests_ = &BuildCounter()
                       .Name("nlm_requests_total")
                       .Help("NLM requests handled, by procedure, version and result.")
                       .Register(registry);
  nlm_request_duration_ = &BuildHistogram()
                               .Name("nlm_request_duration_seconds")
                               .Help("Time to handle an NLM request, store writes included.")
                               .Register(registry);
  locks_held_ = &BuildGauge()
                     .Name("nlm_locks_held")
                     .Help(
                         "Byte-range lock entries held (restored ones awaiting reclaim "
                         "included).")
                     .Register(registry)
                     .Add({});
  shares_held_ = &BuildGauge()
                      .Name("nlm_shares_held")
                      .Help("Share reservations held.")
                      .Register(registry)
                      .Add({});
  waiters_ = &BuildGauge()
                  .Name("nlm_waiters")
                  .Help("Blocked lock requests queued.")
                  .Register(registry)
                  .Add({});
  pending_grants_ = &BuildGauge()
                         .Name("nlm_pending_grants")
                         .Help("Granted blocked requests whose client has not acknowledged.")
                         .Register(registry)
                         .Add({});
  hosts_ = &BuildGauge()
                .Name("nlm_hosts")
                .Help("Client hosts known to the lock manager.")
                .Register(registry)
                .Add({});
  auto& callbacks = BuildCounter()
                        .Name("nlm_callbacks_total")
                        .Help(
                            "Calls to NLM clients (GRANTED, _RES) and status callbacks, by "
                            "kind and result.")
                        .Register(registry);
  for (size_t kind = 0; kind < kCallbackKinds; ++kind) {
    for (size_t result = 0; result < kCallbackResults; ++result) {
      callbacks_[kind][result] =
          &callbacks.Add({{"kind", std::string(kCallbackKindNames[kind])},
                          {"result", std::string(kCallbackResultNames[result])}});
    }
  }
  grace_active_ = &BuildGauge()
                       .Name("nlm_grace_active")
                       .Help("1 while the grace period runs.")
                       .Register(registry)
                       .Add({});
  grace_seconds_left_ = &BuildGauge()
                             .Name("nlm_grace_seconds_left")
                             .Help("Seconds until the grace period ends by its timer.")
                             .Register(registry)
                             .Add({});
  grace_reclaims_expected_ =
      &BuildGauge()
           .Name("nlm_grace_reclaims_expected")
           .Help("Restored locks and shares awaiting a reclaim when the last grace period began.")
           .Register(registry)
           .Add({});
  grace_reclaims_counted_ =
      &BuildGauge()
           .Name("nlm_grace_reclaims_counted")
           .Help("Of those, how many are back with their owners.")
           .Register(registry)
           .Add({});
  auto& last_end = BuildGauge()
                       .Name("nlm_grace_last_end")
                       .Help("1 for the reason the last grace period ended (timer, "
                             "all-reclaimed, admin), 0 for the others.")
                       .Register(registry);
  for (size_t i = 0; i < kGraceEndReasons.size(); ++i) {
    grace_last_end_[i] = &last_end.Add({{"reason", std::string(kGraceEndReasons[i])}});
  }
  reclaims_ = &BuildCounter()
                   .Name("nlm_reclaims_total")
                   .Help("Locks and shares reclaimed during grace.")
                   .Register(registry)
                   .Add({});

  connections_ = &BuildGauge()
                      .Name("rpc_connections")
                      .Help("Open RPC TCP connections.")
                      .Register(registry)
                      .Add({});
  bytes_received_ = &BuildCounter()
                         .Name("rpc_bytes_received_total")
                         .Help("RPC bytes received (TCP and UDP).")
                         .Register(registry)
                         .Add({});
  bytes_sent_ = &BuildCounter()
                     .Name("rpc_bytes_sent_total")
                     .Help("RPC bytes sent (TCP and UDP).")
                     .Register(registry)
                     .Add({});
  auto& malformed = BuildCounter()
                        .Name("rpc_malformed_requests_total")
                        .Help("RPC requests refused before reaching a service, by reason.")
                        .Register(registry);
  for (size_t i = 0; i < kMalformedReasons; ++i) {
    malformed_[i] = &malformed.Add({{"reason", std::string(kMalformedReasonNames[i])}});
  }

  store_commit_duration_ = &BuildHistogram()
                                .Name("store_commit_duration_seconds")
                                .Help("Latency of one store group commit.")
                                .Register(registry)
                                .Add({}, CommitBuckets());
  store_commit_batch_size_ = &BuildHistogram()
                                  .Name("store_commit_batch_size")
                                  .Help("Writes carried by one store group commit.")
                                  .Register(registry)
                                  .Add({}, BatchBuckets());
  uptime_ = &BuildGauge()
                 .Name("nlockd_uptime_seconds")
                 .Help("Seconds since nlockd started.")
                 .Register(registry)
                 .Add({});
}

Metrics::~Metrics() = default;

RequestMetrics& Metrics::NlmRequest(uint32_t version, std::string_view procedure) {
  std::lock_guard lock(procedures_mutex_);
  auto key = std::make_tuple(RpcProgram::kNlm, version, std::string(procedure));
  auto it = procedures_.find(key);
  if (it == procedures_.end()) {
    // The duration is per procedure across versions, the count per version too.
    auto& duration =
        nlm_request_duration_->Add({{"procedure", std::string(procedure)}}, RequestBuckets());
    std::map<std::string, std::string> labels{{"procedure", std::string(procedure)},
                                              {"version", std::to_string(version)}};
    it = procedures_
             .emplace(std::move(key), std::make_unique<RequestMetrics>(
                                          *nlm_requests_, duration, std::move(labels),
                                          std::span<const std::string_view>(kNlmResults)))
             .first;
  }
  return *it->second;
}

RequestMetrics& Metrics::NsmRequest(std::string_view procedure) {
  std::lock_guard lock(procedures_mutex_);
  auto key = std::make_tuple(RpcProgram::kNsm, uint32_t{1}, std::string(procedure));
  auto it = procedures_.find(key);
  if (it == procedures_.end()) {
    auto& duration =
        nsm_request_duration_->Add({{"procedure", std::string(procedure)}}, RequestBuckets());
    std::map<std::string, std::string> labels{{"procedure", std::string(procedure)}};
    it = procedures_
             .emplace(std::move(key), std::make_unique<RequestMetrics>(
                                          *nsm_requests_, duration, std::move(labels),
                                          std::span<const std::string_view>(kNsmResults)))
             .first;
  }
  return *it->second;
}

void Metrics::ObserveRpcCall(RpcProgram program, uint32_t version, std::string_view procedure,
                             std::string_view result, double seconds) {
  RequestMetrics& request =
      program == RpcProgram::kNlm ? NlmRequest(version, procedure) : NsmRequest(procedure);
  request.Observe(result, seconds);
}

void Metrics::ObserveNotification(NotificationResult result, double seconds) {
  notifications_[Index(result)]->Increment();
  notification_duration_->Observe(seconds);
}

void Metrics::CountNotifications(NotificationResult result, uint64_t count) {
  if (count != 0) notifications_[Index(result)]->Increment(static_cast<double>(count));
}

void Metrics::ObserveNotificationDuration(double seconds) {
  notification_duration_->Observe(seconds);
}

void Metrics::CrashDetected() { crashes_detected_->Increment(); }

void Metrics::CrashCleanedUp(uint64_t locks) {
  crash_cleanups_->Increment();
  locks_cleaned_on_crash_->Increment(static_cast<double>(locks));
}

void Metrics::ObserveCallback(CallbackKind kind, CallbackResult result, uint64_t count) {
  if (count != 0) callbacks_[Index(kind)][Index(result)]->Increment(static_cast<double>(count));
}

void Metrics::Reclaimed(uint64_t count) { reclaims_->Increment(static_cast<double>(count)); }

void Metrics::ConnectionOpened() { connections_->Increment(); }
void Metrics::ConnectionClosed() { connections_->Decrement(); }
void Metrics::BytesReceived(uint64_t bytes) {
  bytes_received_->Increment(static_cast<double>(bytes));
}
void Metrics::BytesSent(uint64_t bytes) { bytes_sent_->Increment(static_cast<double>(bytes)); }
void Metrics::MalformedRequest(MalformedReason reason) { malformed_[Index(reason)]->Increment(); }

void Metrics::ObserveStoreCommit(double seconds, size_t batch_size) {
  store_commit_duration_->Observe(seconds);
  store_commit_batch_size_->Observe(static_cast<double>(batch_size));
}

void Metrics::Refresh(const StatusView& status) {
  state_number_->Set(status.state_number);
  clients_registered_->Set(static_cast<double>(status.registrations));
  monitored_hosts_->Set(static_cast<double>(status.monitored_hosts));
  hosts_->Set(static_cast<double>(status.hosts));
  locks_held_->Set(static_cast<double>(status.locks));
  shares_held_->Set(static_cast<double>(status.shares));
  waiters_->Set(static_cast<double>(status.waiters));
  pending_grants_->Set(static_cast<double>(status.pending_grants));
  grace_active_->Set(status.grace.active ? 1 : 0);
  grace_seconds_left_->Set(status.grace.active ? status.grace.seconds_left : 0);
  grace_reclaims_expected_->Set(static_cast<double>(status.grace.reclaims_expected));
  grace_reclaims_counted_->Set(static_cast<double>(status.grace.reclaims_counted));
  for (size_t i = 0; i < kGraceEndReasons.size(); ++i) {
    grace_last_end_[i]->Set(status.grace.last_end_reason == kGraceEndReasons[i] ? 1 : 0);
  }
  uptime_->Set(status.uptime_seconds);
}

std::string Metrics::Serialize() const {
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, registry_->Collect());
  return out.str();
}

}  // namespace nlockd::admin
