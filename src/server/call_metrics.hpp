// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <map>
#include <tuple>

#include "rpc/dispatcher.hpp"

namespace nlockd::admin {
class Metrics;
class RequestMetrics;
}  // namespace nlockd::admin
namespace nlockd::nsm {
class Notifier;
}
namespace nlockd::store {
class Store;
}

namespace nlockd::server {

// The dispatcher's observer for /metrics: counts every NLM and NSM call by procedure and result
// (nlm_requests_total, nsm_requests_total and their durations) and every call that never
// reached a procedure (rpc_malformed_requests_total). Resolves each procedure's RequestMetrics
// once. Runs on the dispatcher's executor only; `metrics` must outlive it.
//
// The result label is the protocol status the service recorded for a handled call
// (rpc::CallRecord::result: "granted", "denied", "stat_succ", ...), "ok" for a handled call
// with a void result, and the dispatcher's outcome for a call that failed at the RPC level
// ("garbage_args", "system_err", "duplicate_replayed", ...).
class CallMetrics {
 public:
  explicit CallMetrics(admin::Metrics& metrics) : metrics_(metrics) {}
  CallMetrics(const CallMetrics&) = delete;
  CallMetrics& operator=(const CallMetrics&) = delete;

  void Observe(const rpc::CallRecord& record);

 private:
  admin::RequestMetrics* Resolve(const rpc::CallRecord& record);

  admin::Metrics& metrics_;
  std::map<std::tuple<uint32_t, uint32_t, uint32_t>, admin::RequestMetrics*> procedures_;
};

// Feeds the metrics that their sources report as they happen: each committed store transaction
// (store_commit_duration_seconds and store_commit_batch_size, reported on the store's writer
// thread) and each SM_NOTIFY attempt (nsm_notifications_total by result and
// nsm_notification_duration_seconds, on the notifier's executor). Hooks itself to both when
// made and unhooks when destroyed: `metrics`, the store and the notifier must outlive it (in
// Server, declare it after metrics_). Metrics is thread-safe.
class EventMetrics {
 public:
  EventMetrics(store::Store& store, nsm::Notifier& notifier, admin::Metrics& metrics);
  ~EventMetrics();
  EventMetrics(const EventMetrics&) = delete;
  EventMetrics& operator=(const EventMetrics&) = delete;

 private:
  store::Store& store_;
  nsm::Notifier& notifier_;
};

}  // namespace nlockd::server
