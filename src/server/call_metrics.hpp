#pragma once

#include <cstdint>
#include <map>
#include <tuple>

#include "rpc/dispatcher.hpp"

namespace nlockd::admin {
class Metrics;
class RequestMetrics;
}  // namespace nlockd::admin

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

}  // namespace nlockd::server
