#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
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

// nsm_notifications_total{result}: one SM_NOTIFY attempt to a peer's status monitor.
enum class NotificationResult : uint8_t {
  kDelivered,  // The peer answered.
  kFailed,     // This attempt failed; it will be retried.
  kGaveUp,     // Retries ran out; the peer is treated as crashed.
};

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
enum class CallbackResult : uint8_t {
  kOk,        // Delivered (and for GRANTED, accepted).
  kRefused,   // The client answered with a refusal (e.g. GRANTED answered denied).
  kFailed,    // Transport or RPC error.
  kTimedOut,  // The deadline passed.
};

// rpc_malformed_requests_total{reason}.
enum class MalformedReason : uint8_t {
  kRecordTooLarge,  // A TCP record past the cap: connection dropped.
  kBadMessage,      // Not a decodable RPC call.
  kRpcMismatch,     // RPC version other than 2.
  kAuthError,       // Bad or unsupported credentials.
  kProgUnavail,
  kProgMismatch,
  kProcUnavail,
  kGarbageArgs,  // Arguments that do not decode (or break a limit).
};

// The request counter and duration of one procedure, resolved once (when the procedure table is
// built) so that Observe() does no label lookup for the known result names. Thread-safe; owned
// by Metrics and valid as long as it.
class RequestMetrics {
 public:
  RequestMetrics(prometheus::Family<prometheus::Counter>& requests, prometheus::Histogram& duration,
                 std::map<std::string, std::string> labels,
                 std::span<const std::string_view> known_results);
  ~RequestMetrics();
  RequestMetrics(const RequestMetrics&) = delete;
  RequestMetrics& operator=(const RequestMetrics&) = delete;

  // Counts one request with `result` (the protocol's status name, e.g. "granted", "stat_succ",
  // "garbage_args") and its handling time. A result outside the known list still counts, via a
  // slower locked lookup. REQUIRES: `result` comes from a fixed set of names (each new name is
  // a new time series).
  void Observe(std::string_view result, double seconds);

 private:
  prometheus::Counter& CounterFor(std::string_view result);

  prometheus::Family<prometheus::Counter>& requests_;
  prometheus::Histogram& duration_;
  const std::map<std::string, std::string> labels_;  // procedure (and version)
  const std::span<const std::string_view> known_results_;
  // Children for known_results_, created on first use (creating them all would add hundreds of
  // empty series).
  std::unique_ptr<std::atomic<prometheus::Counter*>[]> known_;
};

// Owns the prometheus registry with every metric family of nlockd (docs/api.md lists them) and
// typed methods to update them. Every method is thread-safe and cheap (atomic adds);
// snapshot gauges (locks held, grace, ...) are set by Refresh() at scrape time.
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
                      std::string_view result, double seconds);

  void ObserveNotification(NotificationResult result, double seconds);
  // Counts `count` attempts whose duration was not measured (exported from the notifier's
  // counters at scrape time); the duration histogram is left alone.
  void CountNotifications(NotificationResult result, uint64_t count);
  // The duration of one attempt whose result is counted by CountNotifications.
  void ObserveNotificationDuration(double seconds);
  // An SM_NOTIFY arrived (or a peer gave up on) for a monitored host: it rebooted.
  void CrashDetected();
  // The lock state of a crashed host was released: `locks` lock entries (and its shares and
  // waiters) dropped.
  void CrashCleanedUp(uint64_t locks);

  void ObserveCallback(CallbackKind kind, CallbackResult result, uint64_t count = 1);
  void Reclaimed(uint64_t count = 1);

  void ConnectionOpened();
  void ConnectionClosed();
  void BytesReceived(uint64_t bytes);
  void BytesSent(uint64_t bytes);
  void MalformedRequest(MalformedReason reason);

  // One group commit of the store: its latency and how many writes it carried.
  void ObserveStoreCommit(double seconds, size_t batch_size);

  // Sets the snapshot gauges from the server's state (called by the admin server per scrape).
  void Refresh(const StatusView& status);

  // The Prometheus text exposition format (version 0.0.4).
  std::string Serialize() const;
  prometheus::Registry& registry() { return *registry_; }
  // The same registry, for an exposer that keeps it (prometheus::Exposer holds a weak_ptr).
  std::shared_ptr<prometheus::Registry> shared_registry() { return registry_; }

 private:
  static constexpr size_t kNotificationResults = 3;
  static constexpr size_t kCallbackKinds = 8;
  static constexpr size_t kCallbackResults = 4;
  static constexpr size_t kMalformedReasons = 8;

  std::shared_ptr<prometheus::Registry> registry_;

  prometheus::Family<prometheus::Counter>* nsm_requests_;
  prometheus::Family<prometheus::Histogram>* nsm_request_duration_;
  prometheus::Family<prometheus::Counter>* nlm_requests_;
  prometheus::Family<prometheus::Histogram>* nlm_request_duration_;

  std::array<prometheus::Counter*, kNotificationResults> notifications_{};
  prometheus::Histogram* notification_duration_;
  prometheus::Counter* crashes_detected_;
  prometheus::Counter* crash_cleanups_;
  prometheus::Counter* locks_cleaned_on_crash_;

  std::array<std::array<prometheus::Counter*, kCallbackResults>, kCallbackKinds> callbacks_{};
  prometheus::Counter* reclaims_;

  prometheus::Gauge* connections_;
  prometheus::Counter* bytes_received_;
  prometheus::Counter* bytes_sent_;
  std::array<prometheus::Counter*, kMalformedReasons> malformed_{};

  prometheus::Histogram* store_commit_duration_;
  prometheus::Histogram* store_commit_batch_size_;

  // Snapshot gauges.
  prometheus::Gauge* state_number_;
  prometheus::Gauge* clients_registered_;
  prometheus::Gauge* monitored_hosts_;
  prometheus::Gauge* hosts_;
  prometheus::Gauge* locks_held_;
  prometheus::Gauge* shares_held_;
  prometheus::Gauge* waiters_;
  prometheus::Gauge* pending_grants_;
  prometheus::Gauge* grace_active_;
  prometheus::Gauge* grace_seconds_left_;
  prometheus::Gauge* grace_reclaims_expected_;
  prometheus::Gauge* grace_reclaims_counted_;
  // nlm_grace_last_end{reason}: 1 for why the last grace period ended, 0 for the others.
  std::array<prometheus::Gauge*, 3> grace_last_end_{};
  prometheus::Gauge* uptime_;

  std::mutex procedures_mutex_;
  // Keyed by (program, version, procedure); nodes are stable, so references stay valid.
  std::map<std::tuple<RpcProgram, uint32_t, std::string>, std::unique_ptr<RequestMetrics>,
           std::less<>>
      procedures_;
};

}  // namespace nlockd::admin
