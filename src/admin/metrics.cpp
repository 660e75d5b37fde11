// SPDX-License-Identifier: Apache-2.0
#include "admin/metrics.hpp"

#include <algorithm>
#include <initializer_list>
#include <sstream>
#include <utility>
#include <vector>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/metric_family.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include "admin/build_info.hpp"
#include "base/error.hpp"

namespace nlockd::admin {
namespace {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;
using prometheus::Counter;
using prometheus::Family;
using prometheus::Gauge;
using prometheus::Histogram;

// Label strings, indexed by the enums of metrics.hpp: the one place each label is spelled.
constexpr std::array<std::string_view, kRequestResults> kRequestResultLabels = {
    "granted",
    "denied",
    "denied_nolocks",
    "blocked",
    "denied_grace_period",
    "deadlck",
    "rofs",
    "stale_fh",
    "fbig",
    "failed",
    "stat_succ",
    "stat_fail",
    "ok",
    "garbage_args",
    "system_err",
    "no_reply",
    "duplicate_in_progress",
    "duplicate_replayed",
    "unknown"};
constexpr std::array<std::string_view, kNotificationResults> kNotificationResultLabels = {
    "delivered", "failed", "gave_up"};
constexpr std::array<std::string_view, kCallbackKinds> kCallbackKindLabels = {
    "granted",    "granted_msg", "test_res",    "lock_res",
    "cancel_res", "unlock_res",  "granted_res", "status"};
constexpr std::array<std::string_view, kCallbackResults> kCallbackResultLabels = {
    "ok", "refused", "failed", "timed_out"};
constexpr std::array<std::string_view, kMalformedReasons> kMalformedReasonLabels = {
    "bad_message",   "rpc_mismatch", "auth_error",   "prog_unavail",
    "prog_mismatch", "proc_unavail", "garbage_args", "record_too_large"};
// lock::ToString(GraceEndReason) spellings, as GraceView carries them.
constexpr std::array<std::string_view, 3> kGraceEndReasons = {"timer", "all-reclaimed", "admin"};

// The request series created at start, at 0: each procedure of NLM (by version) and NSM with
// the results it answers in normal operation, so that rates and alerts over them have a series
// from the first scrape. Procedure names as the services register them (nlm/ and nsm/
// service_registration.cpp); other results (RPC-level failures, duplicates) appear on first
// use.
struct PrecreatedRequests {
  RpcProgram program;
  std::initializer_list<uint32_t> versions;
  std::string_view procedure;
  std::initializer_list<RequestResult> results;
};
using R = RequestResult;
const PrecreatedRequests kPrecreatedRequests[] = {
    {RpcProgram::kNlm, {1, 3, 4}, "TEST", {R::kGranted, R::kDenied, R::kDeniedGracePeriod}},
    {RpcProgram::kNlm,
     {1, 3, 4},
     "LOCK",
     {R::kGranted, R::kDenied, R::kBlocked, R::kDeniedNolocks, R::kDeniedGracePeriod, R::kDeadlck}},
    {RpcProgram::kNlm, {1, 3, 4}, "CANCEL", {R::kGranted, R::kDenied, R::kDeniedGracePeriod}},
    {RpcProgram::kNlm, {1, 3, 4}, "UNLOCK", {R::kGranted, R::kDeniedGracePeriod}},
    {RpcProgram::kNlm, {3, 4}, "SHARE", {R::kGranted, R::kDenied, R::kDeniedGracePeriod}},
    {RpcProgram::kNlm, {3, 4}, "UNSHARE", {R::kGranted}},
    {RpcProgram::kNlm, {3, 4}, "FREE_ALL", {R::kOk}},
    {RpcProgram::kNsm, {1}, "SM_MON", {R::kStatSucc, R::kStatFail, R::kDenied}},
    {RpcProgram::kNsm, {1}, "SM_UNMON", {R::kOk, R::kDenied}},
    {RpcProgram::kNsm, {1}, "SM_UNMON_ALL", {R::kOk, R::kDenied}},
    {RpcProgram::kNsm, {1}, "SM_STAT", {R::kStatSucc, R::kStatFail}},
    {RpcProgram::kNsm, {1}, "SM_NOTIFY", {R::kOk}},
};

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

prometheus::ClientMetric Sample(double value, prometheus::MetricType type,
                                std::vector<prometheus::ClientMetric::Label> labels = {}) {
  prometheus::ClientMetric sample;
  sample.label = std::move(labels);
  if (type == prometheus::MetricType::Counter) {
    sample.counter.value = value;
  } else {
    sample.gauge.value = value;
  }
  return sample;
}

prometheus::MetricFamily Single(std::string name, std::string help, prometheus::MetricType type,
                                uint64_t value) {
  prometheus::MetricFamily family{std::move(name), std::move(help), type, {}};
  family.metric.push_back(Sample(static_cast<double>(value), type));
  return family;
}

// The families of the counters their owners keep (ServiceCounts).
std::vector<prometheus::MetricFamily> Render(const ServiceCounts& counts) {
  using prometheus::MetricType;
  std::vector<prometheus::MetricFamily> families;
  families.push_back(
      Single("nsm_crashes_detected_total",
             "Reboots of monitored hosts detected (SM_NOTIFY received or notification given up).",
             MetricType::Counter, counts.crashes_detected));
  families.push_back(Single("nsm_crash_cleanups_total", "Releases of a crashed host's lock state.",
                            MetricType::Counter, counts.crash_cleanups));
  families.push_back(Single("nsm_locks_cleaned_on_crash_total",
                            "Lock entries released because their host crashed.",
                            MetricType::Counter, counts.locks_cleaned_on_crash));
  prometheus::MetricFamily callbacks{
      "nlm_callbacks_total",
      "Calls to NLM clients (GRANTED, _RES) and status callbacks, by kind and result.",
      MetricType::Counter,
      {}};
  for (size_t kind = 0; kind < kCallbackKinds; ++kind) {
    for (size_t result = 0; result < kCallbackResults; ++result) {
      callbacks.metric.push_back(Sample(static_cast<double>(counts.callbacks[kind][result]),
                                        MetricType::Counter,
                                        {{"kind", std::string(kCallbackKindLabels[kind])},
                                         {"result", std::string(kCallbackResultLabels[result])}}));
    }
  }
  families.push_back(std::move(callbacks));
  families.push_back(Single("nlm_reclaims_total", "Locks and shares reclaimed during grace.",
                            MetricType::Counter, counts.reclaims));
  families.push_back(Single("nlm_deadlocks_refused_total",
                            "Blocking LOCK, NM_LOCK and LOCK_MSG requests refused because waiting "
                            "would have closed a cycle of waiting owners.",
                            MetricType::Counter, counts.deadlocks_refused));
  families.push_back(Single("rpc_connections", "Open RPC TCP connections.", MetricType::Gauge,
                            counts.open_connections));
  families.push_back(Single("rpc_bytes_received_total", "RPC bytes received (TCP and UDP).",
                            MetricType::Counter, counts.bytes_received));
  families.push_back(Single("rpc_bytes_sent_total", "RPC bytes sent (TCP and UDP).",
                            MetricType::Counter, counts.bytes_sent));
  prometheus::MetricFamily too_large{"rpc_malformed_requests_total", "", MetricType::Counter, {}};
  too_large.metric.push_back(Sample(
      static_cast<double>(counts.records_too_large), MetricType::Counter,
      {{"reason", std::string(kMalformedReasonLabels[Index(MalformedReason::kRecordTooLarge)])}}));
  families.push_back(std::move(too_large));  // Joins the family of the other reasons.
  return families;
}

}  // namespace

std::string_view RequestResultLabel(RequestResult result) {
  return kRequestResultLabels[Index(result)];
}

RequestResult RequestResultFromLabel(std::string_view label) {
  for (size_t i = 0; i < kRequestResults; ++i) {
    if (kRequestResultLabels[i] == label) return static_cast<RequestResult>(i);
  }
  return RequestResult::kUnknown;
}

// The registry the host's exposer (or Serialize) collects: the families of the typed methods
// plus the last ServiceCounts read. It outlives Metrics when a host holds it, so it keeps the
// reading itself.
class Metrics::Registry final : public prometheus::Registry {
 public:
  void Store(const ServiceCounts& counts) {
    std::lock_guard lock(mutex_);
    counts_ = counts;
  }

  std::vector<prometheus::MetricFamily> Collect() const override {
    std::vector<prometheus::MetricFamily> families = prometheus::Registry::Collect();
    ServiceCounts counts;
    {
      std::lock_guard lock(mutex_);
      counts = counts_;
    }
    for (auto& rendered : Render(counts)) {
      auto same = std::find_if(families.begin(), families.end(),
                               [&](const auto& family) { return family.name == rendered.name; });
      if (same == families.end()) {
        families.push_back(std::move(rendered));
      } else {
        for (auto& sample : rendered.metric) same->metric.push_back(std::move(sample));
      }
    }
    return families;
  }

 private:
  mutable std::mutex mutex_;
  ServiceCounts counts_;  // Guarded by mutex_.
};

RequestMetrics::RequestMetrics(Family<Counter>& requests, Histogram& duration,
                               std::map<std::string, std::string> labels)
    : requests_(requests), duration_(duration), labels_(std::move(labels)) {
  for (auto& counter : results_) counter.store(nullptr);
}

RequestMetrics::~RequestMetrics() = default;

void RequestMetrics::Observe(RequestResult result, double seconds) {
  std::atomic<Counter*>& slot = results_[Index(result)];
  Counter* counter = slot.load(std::memory_order_acquire);
  if (counter == nullptr) {
    Precreate(result);
    counter = slot.load(std::memory_order_acquire);
  }
  counter->Increment();
  duration_.Observe(seconds);
}

void RequestMetrics::Precreate(RequestResult result) {
  // Family::Add is idempotent, so two threads racing here get the same child.
  auto labels = labels_;
  labels.emplace("result", std::string(RequestResultLabel(result)));
  results_[Index(result)].store(&requests_.Add(labels), std::memory_order_release);
}

Metrics::Metrics() : registry_(std::make_shared<Registry>()) {
  RegisterBuildInfo(*registry_);
  RegisterRequestFamilies();
  RegisterEventSeries();
  RegisterSnapshotGauges();
  PrecreateRequests();
}

void Metrics::RegisterRequestFamilies() {
  auto& registry = *registry_;
  nsm_requests_ = &BuildCounter()
                       .Name("nsm_requests_total")
                       .Help("NSM requests handled, by procedure and result.")
                       .Register(registry);
  nsm_request_duration_ = &BuildHistogram()
                               .Name("nsm_request_duration_seconds")
                               .Help("Time to handle an NSM request, store writes included.")
                               .Register(registry);
  nlm_requests_ = &BuildCounter()
                       .Name("nlm_requests_total")
                       .Help("NLM requests handled, by procedure, version and result.")
                       .Register(registry);
  nlm_request_duration_ = &BuildHistogram()
                               .Name("nlm_request_duration_seconds")
                               .Help("Time to handle an NLM request, store writes included.")
                               .Register(registry);
}

void Metrics::RegisterEventSeries() {
  auto& registry = *registry_;
  auto& notifications = BuildCounter()
                            .Name("nsm_notifications_total")
                            .Help("SM_NOTIFY attempts to peers' status monitors, by result.")
                            .Register(registry);
  for (size_t i = 0; i < kNotificationResults; ++i) {
    notifications_[i] = &notifications.Add({{"result", std::string(kNotificationResultLabels[i])}});
  }
  notification_duration_ = &BuildHistogram()
                                .Name("nsm_notification_duration_seconds")
                                .Help("Time of one SM_NOTIFY attempt (resolve, connect, call).")
                                .Register(registry)
                                .Add({}, NotificationBuckets());
  auto& malformed = BuildCounter()
                        .Name("rpc_malformed_requests_total")
                        .Help("RPC requests refused before reaching a service, by reason.")
                        .Register(registry);
  for (size_t i = 0; i < kMalformedReasons; ++i) {
    if (i == Index(MalformedReason::kRecordTooLarge)) continue;
    malformed_[i] = &malformed.Add({{"reason", std::string(kMalformedReasonLabels[i])}});
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
  store_write_errors_ = &BuildCounter()
                             .Name("store_write_errors_total")
                             .Help(
                                 "Store writes that failed: their lock, registration or state "
                                 "change was refused or not made durable.")
                             .Register(registry)
                             .Add({});
}

void Metrics::RegisterSnapshotGauges() {
  struct SnapshotGauge {
    prometheus::Gauge* Metrics::*series;
    const char* name;
    const char* help;
  };
  const SnapshotGauge gauges[] = {
      {&Metrics::clients_registered_, "nsm_clients_registered",
       "NSM monitor registrations (SM_MON) held."},
      {&Metrics::monitored_hosts_, "nsm_monitored_hosts",
       "Distinct hosts watched by the NSM registrations."},
      {&Metrics::state_number_, "nsm_state_number",
       "This server's NSM state number (odd while up)."},
      {&Metrics::locks_held_, "nlm_locks_held",
       "Byte-range lock entries held (restored ones awaiting reclaim included)."},
      {&Metrics::shares_held_, "nlm_shares_held", "Share reservations held."},
      {&Metrics::waiters_, "nlm_waiters", "Blocked lock requests queued."},
      {&Metrics::pending_grants_, "nlm_pending_grants",
       "Granted blocked requests whose client has not acknowledged."},
      {&Metrics::hosts_, "nlm_hosts", "Client hosts known to the lock manager."},
      {&Metrics::grace_active_, "nlm_grace_active", "1 while the grace period runs."},
      {&Metrics::grace_seconds_left_, "nlm_grace_seconds_left",
       "Seconds until the grace period ends by its timer."},
      {&Metrics::grace_reclaims_expected_, "nlm_grace_reclaims_expected",
       "Restored locks and shares awaiting a reclaim when the last grace period began."},
      {&Metrics::grace_reclaims_counted_, "nlm_grace_reclaims_counted",
       "Of those, how many are back with their owners."},
      {&Metrics::uptime_, "nlockd_uptime_seconds", "Seconds since nlockd started."},
  };
  for (const SnapshotGauge& gauge : gauges) {
    this->*gauge.series =
        &BuildGauge().Name(gauge.name).Help(gauge.help).Register(*registry_).Add({});
  }
  auto& last_end = BuildGauge()
                       .Name("nlm_grace_last_end")
                       .Help(
                           "1 for the reason the last grace period ended (timer, "
                           "all-reclaimed, admin), 0 for the others.")
                       .Register(*registry_);
  for (size_t i = 0; i < kGraceEndReasons.size(); ++i) {
    grace_last_end_[i] = &last_end.Add({{"reason", std::string(kGraceEndReasons[i])}});
  }
}

void Metrics::PrecreateRequests() {
  for (const PrecreatedRequests& entry : kPrecreatedRequests) {
    for (uint32_t version : entry.versions) {
      RequestMetrics& request = entry.program == RpcProgram::kNlm
                                    ? NlmRequest(version, entry.procedure)
                                    : NsmRequest(entry.procedure);
      for (RequestResult result : entry.results) request.Precreate(result);
    }
  }
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
             .emplace(std::move(key),
                      std::make_unique<RequestMetrics>(*nlm_requests_, duration, std::move(labels)))
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
             .emplace(std::move(key),
                      std::make_unique<RequestMetrics>(*nsm_requests_, duration, std::move(labels)))
             .first;
  }
  return *it->second;
}

void Metrics::ObserveRpcCall(RpcProgram program, uint32_t version, std::string_view procedure,
                             RequestResult result, double seconds) {
  RequestMetrics& request =
      program == RpcProgram::kNlm ? NlmRequest(version, procedure) : NsmRequest(procedure);
  request.Observe(result, seconds);
}

void Metrics::ObserveNotification(NotificationResult result, double seconds) {
  notifications_[Index(result)]->Increment();
  notification_duration_->Observe(seconds);
}

void Metrics::MalformedRequest(MalformedReason reason) {
  NLOCKD_REQUIRE(reason != MalformedReason::kRecordTooLarge,
                 "oversized records are the RPC server's count");
  malformed_[Index(reason)]->Increment();
}

void Metrics::ObserveStoreCommit(double seconds, size_t batch_size) {
  store_commit_duration_->Observe(seconds);
  store_commit_batch_size_->Observe(static_cast<double>(batch_size));
}

void Metrics::StoreWritesFailed(size_t writes) {
  store_write_errors_->Increment(static_cast<double>(writes));
}

void Metrics::SetServiceCountsSource(ServiceCountsSource source) {
  std::lock_guard lock(source_mutex_);
  source_ = std::move(source);
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
  if (status.ha) SetHa(*status.ha);

  std::lock_guard lock(source_mutex_);
  if (source_) registry_->Store(source_());
}

// --- HA (docs/decisions/0017) ------------------------------------------------------------
void Metrics::SetHa(const HaView& ha) {
  std::lock_guard lock(ha_mutex_);
  if (ha_active_ == nullptr) {
    auto& role = BuildGauge()
                     .Name("nlockd_ha_role")
                     .Help("HA role of this node: 1 for the role it has, 0 for the other.")
                     .Register(*registry_);
    ha_active_ = &role.Add({{"role", "active"}});
    ha_standby_ = &role.Add({{"role", "standby"}});
    ha_epoch_ = &BuildGauge()
                     .Name("nlockd_ha_epoch")
                     .Help(
                         "Epoch of the service's lease as this node last saw it (its own "
                         "while active).")
                     .Register(*registry_)
                     .Add({});
    ha_lease_info_ = &BuildGauge()
                          .Name("nlockd_ha_lease_info")
                          .Help(
                              "Always 1; the holder label names the lease's holder as last "
                              "seen (empty when free).")
                          .Register(*registry_);
  }
  ha_active_->Set(ha.active ? 1 : 0);
  ha_standby_->Set(ha.active ? 0 : 1);
  ha_epoch_->Set(static_cast<double>(ha.epoch));
  auto& holder = ha_lease_info_->Add({{"holder", ha.holder}});
  if (ha_lease_holder_ != nullptr && ha_lease_holder_ != &holder) {
    ha_lease_info_->Remove(ha_lease_holder_);
  }
  holder.Set(1);
  ha_lease_holder_ = &holder;
}

std::string Metrics::Serialize() const {
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, registry_->Collect());
  return out.str();
}

prometheus::Registry& Metrics::registry() { return *registry_; }

std::shared_ptr<prometheus::Registry> Metrics::shared_registry() { return registry_; }

}  // namespace nlockd::admin
