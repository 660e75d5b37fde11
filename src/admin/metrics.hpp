// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <tuple>

#include "admin/backend.hpp"

namespace prometheus {
class Counter;
class Gauge;
class Histogram;
class Registry;
template <typename T>
class Family;
}  // namespace prometheus

namespace nlockd::admin {

enum class RpcProgram : uint8_t { kNlm, kNsm };

// The result label of nlm_requests_total and nsm_requests_total: the protocol status of the
// reply, or what the dispatcher did instead of answering. Label strings: RequestResultLabel().
enum class RequestResult : uint8_t {
  // nlm4_stats (RFC 1813 appendix II), lowercase.
  kGranted,
  kDenied,  // Also NSM's refusal of a privileged procedure to a caller outside the allowlist.
  kDeniedNolocks,
  kBlocked,
  kDeniedGracePeriod,
  kDeadlck,
  kRofs,
  kStaleFh,
  kFbig,
  kFailed,
  // sm_inter.x res.
  kStatSucc,
  kStatFail,
  kOk,  // Handled; the result carries no status (void procedures).
  // The dispatcher's outcomes of calls that reached a procedure but were not handled.
  kGarbageArgs,
  kSystemErr,
  kNoReply,
  kDuplicateInProgress,
  kDuplicateReplayed,
  kUnknown,  // A name outside this list (a bug: counted rather than dropped).
};
inline constexpr size_t kRequestResults = 19;
std::string_view RequestResultLabel(RequestResult result);
// The result whose label is `label`; kUnknown for any other name.
RequestResult RequestResultFromLabel(std::string_view label);

// nsm_notifications_total{result}: one SM_NOTIFY attempt to a peer's status monitor.
enum class NotificationResult : uint8_t {
  kDelivered,  // The peer answered.
  kFailed,     // This attempt failed; it will be retried.
  kGaveUp,     // Retries ran out; the peer is treated as crashed.
};
inline constexpr size_t kNotificationResults = 3;

// nlm_callbacks_total{kind,result}: calls nlockd makes to an NLM client.
enum class CallbackKind : uint8_t {
  kGranted,     // NLM_GRANTED
  kGrantedMsg,  // NLM_GRANTED_MSG
  kTestRes,     // NLM_TEST_RES
  kLockRes,
  kCancelRes,
  kUnlockRes,
  kGrantedRes,
  kStatus,  // The NSM status callback to an external lock manager (my_id).
};
inline constexpr size_t kCallbackKinds = 8;
enum class CallbackResult : uint8_t {
  kOk,        // Delivered (and for GRANTED, accepted).
  kRefused,   // The client answered with a refusal (e.g. GRANTED answered denied).
  kFailed,    // Transport or RPC error.
  kTimedOut,  // The deadline passed.
};
inline constexpr size_t kCallbackResults = 4;

// rpc_malformed_requests_total{reason}.
enum class MalformedReason : uint8_t {
  kBadMessage,   // Not a decodable RPC call.
  kRpcMismatch,  // RPC version other than 2.
  kAuthError,    // Bad or unsupported credentials.
  kProgUnavail,
  kProgMismatch,
  kProcUnavail,
  kGarbageArgs,  // Arguments that do not decode (or break a limit).
  // A TCP record past the cap: connection dropped. Counted by the RPC server itself and read
  // through ServiceCounts::records_too_large, never passed to MalformedRequest().
  kRecordTooLarge,
};
inline constexpr size_t kMalformedReasons = 8;

// Counters that their owners keep as the events happen (NLM's callbacks and reclaims, NSM's
// reboot detections and status callbacks, the NSM bridge's crash clean-ups, the RPC server's
// bytes, connections and oversized records). Metrics exports them as the owners' own values,
// read together on the owners' executor at each Refresh(): nothing is counted twice, no delta
// is taken.
struct ServiceCounts {
  uint64_t crashes_detected = 0;        // nsm_crashes_detected_total
  uint64_t crash_cleanups = 0;          // nsm_crash_cleanups_total
  uint64_t locks_cleaned_on_crash = 0;  // nsm_locks_cleaned_on_crash_total
  uint64_t reclaims = 0;                // nlm_reclaims_total
  uint64_t deadlocks_refused = 0;       // nlm_deadlocks_refused_total
  // nlm_callbacks_total, by [CallbackKind][CallbackResult].
  std::array<std::array<uint64_t, kCallbackResults>, kCallbackKinds> callbacks{};
  uint64_t bytes_received = 0;     // rpc_bytes_received_total
  uint64_t bytes_sent = 0;         // rpc_bytes_sent_total
  uint64_t records_too_large = 0;  // rpc_malformed_requests_total{reason="record_too_large"}
  uint64_t open_connections = 0;   // rpc_connections (a gauge)

  uint64_t& callback(CallbackKind kind, CallbackResult result) {
    return callbacks[static_cast<size_t>(kind)][static_cast<size_t>(result)];
  }
};

// The request counter and duration of one procedure, resolved once (when the procedure table is
// built) so that Observe() does no label lookup. Thread-safe; owned by Metrics and valid as long
// as it.
class RequestMetrics {
 public:
  RequestMetrics(prometheus::Family<prometheus::Counter>& requests, prometheus::Histogram& duration,
                 std::map<std::string, std::string> labels);
  ~RequestMetrics();
  RequestMetrics(const RequestMetrics&) = delete;
  RequestMetrics& operator=(const RequestMetrics&) = delete;

  // Counts one request with `result` and its handling time.
  void Observe(RequestResult result, double seconds);
  // Creates the series of `result` at 0, so that it is exported before the first such request.
  void Precreate(RequestResult result);

 private:
  prometheus::Family<prometheus::Counter>& requests_;
  prometheus::Histogram& duration_;
  const std::map<std::string, std::string> labels_;  // procedure (and version)
  // One child per result: those a procedure answers most are created at start (Metrics), the
  // rest on first use (creating them all would add hundreds of series that stay empty).
  std::array<std::atomic<prometheus::Counter*>, kRequestResults> results_{};
};

// Owns the prometheus registry with every metric family of nlockd (docs/api.md lists them).
// Each metric has one source (docs/decisions/0016-metrics-one-source.md):
// - events counted as they happen, through the typed methods below (requests, refused calls,
//   SM_NOTIFY attempts, store commits): thread-safe atomic adds;
// - counters their owners keep (ServiceCounts), read through the source set with
//   SetServiceCountsSource() at each Refresh() and exported as they are;
// - snapshot gauges (locks held, grace, ...) set from a StatusView by Refresh().
// Refresh() is the one scrape-time step; the registry itself never blocks.
class Metrics {
 public:
  Metrics();
  ~Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // Get-or-create (under a mutex): call once per procedure when building the procedure table
  // and keep the reference.
  RequestMetrics& NlmRequest(uint32_t version, std::string_view procedure);
  RequestMetrics& NsmRequest(std::string_view procedure);
  // Convenience for cold paths: looks the procedure up by name on every call.
  void ObserveRpcCall(RpcProgram program, uint32_t version, std::string_view procedure,
                      RequestResult result, double seconds);

  // One SM_NOTIFY attempt ended.
  void ObserveNotification(NotificationResult result, double seconds);
  // REQUIRES: reason != kRecordTooLarge (the RPC server counts those: ServiceCounts).
  void MalformedRequest(MalformedReason reason);
  // One group commit of the store: its latency and how many writes it carried.
  void ObserveStoreCommit(double seconds, size_t batch_size);
  // Store writes that failed (each one's caller got the error).
  void StoreWritesFailed(size_t writes);

  // Reads the owners' counters (on whatever thread and executor they need; may throw, and
  // Refresh() then throws the same). An empty function removes the source: the counters keep
  // their last reading. Thread-safe: once this returns, the previous source is not running and
  // will not be called again.
  using ServiceCountsSource = std::function<ServiceCounts()>;
  void SetServiceCountsSource(ServiceCountsSource source);

  // Sets the snapshot gauges from `status`, then reads the owners' counters from the source
  // (called per scrape: by the admin server before serving /metrics, by the library's
  // RefreshMetrics()).
  void Refresh(const StatusView& status);
  // The HA gauges (nlockd_ha_role{role}, nlockd_ha_epoch, nlockd_ha_lease_info{holder}),
  // registered at the first call; Refresh() calls it when status.ha is set. Thread-safe.
  void SetHa(const HaView& ha);

  // The Prometheus text exposition format (version 0.0.4).
  std::string Serialize() const;
  prometheus::Registry& registry();
  // The same registry, for an exposer that keeps it (prometheus::Exposer holds a weak_ptr).
  std::shared_ptr<prometheus::Registry> shared_registry();

 private:
  class Registry;  // A prometheus::Registry that also exports the last ServiceCounts.

  // The constructor's steps, by where each metric's value comes from (see above).
  void RegisterRequestFamilies();
  void RegisterEventSeries();     // SM_NOTIFY attempts, refused calls, store commits.
  void RegisterSnapshotGauges();  // Set by Refresh().
  void PrecreateRequests();       // kPrecreatedRequests in metrics.cpp.

  std::shared_ptr<Registry> registry_;

  // HA gauges (SetHa), null until the first call.
  std::mutex ha_mutex_;
  prometheus::Gauge* ha_active_ = nullptr;                          // guarded by ha_mutex_
  prometheus::Gauge* ha_standby_ = nullptr;                         // guarded by ha_mutex_
  prometheus::Gauge* ha_epoch_ = nullptr;                           // guarded by ha_mutex_
  prometheus::Family<prometheus::Gauge>* ha_lease_info_ = nullptr;  // guarded by ha_mutex_
  prometheus::Gauge* ha_lease_holder_ = nullptr;  // the current holder's child; ha_mutex_

  prometheus::Family<prometheus::Counter>* nsm_requests_ = nullptr;
  prometheus::Family<prometheus::Histogram>* nsm_request_duration_ = nullptr;
  prometheus::Family<prometheus::Counter>* nlm_requests_ = nullptr;
  prometheus::Family<prometheus::Histogram>* nlm_request_duration_ = nullptr;

  std::array<prometheus::Counter*, kNotificationResults> notifications_{};
  prometheus::Histogram* notification_duration_ = nullptr;
  // Every reason but kRecordTooLarge (read from the RPC server).
  std::array<prometheus::Counter*, kMalformedReasons> malformed_{};

  prometheus::Histogram* store_commit_duration_ = nullptr;
  prometheus::Histogram* store_commit_batch_size_ = nullptr;
  prometheus::Counter* store_write_errors_ = nullptr;

  // Snapshot gauges.
  prometheus::Gauge* state_number_ = nullptr;
  prometheus::Gauge* clients_registered_ = nullptr;
  prometheus::Gauge* monitored_hosts_ = nullptr;
  prometheus::Gauge* hosts_ = nullptr;
  prometheus::Gauge* locks_held_ = nullptr;
  prometheus::Gauge* shares_held_ = nullptr;
  prometheus::Gauge* waiters_ = nullptr;
  prometheus::Gauge* pending_grants_ = nullptr;
  prometheus::Gauge* grace_active_ = nullptr;
  prometheus::Gauge* grace_seconds_left_ = nullptr;
  prometheus::Gauge* grace_reclaims_expected_ = nullptr;
  prometheus::Gauge* grace_reclaims_counted_ = nullptr;
  // nlm_grace_last_end{reason}: 1 for why the last grace period ended, 0 for the others.
  std::array<prometheus::Gauge*, 3> grace_last_end_{};
  prometheus::Gauge* uptime_ = nullptr;

  std::mutex source_mutex_;     // Held while the source runs, so that replacing it waits.
  ServiceCountsSource source_;  // Guarded by source_mutex_.

  std::mutex procedures_mutex_;
  // Keyed by (program, version, procedure); nodes are stable, so references stay valid.
  std::map<std::tuple<RpcProgram, uint32_t, std::string>, std::unique_ptr<RequestMetrics>,
           std::less<>>
      procedures_;
};

}  // namespace nlockd::admin
