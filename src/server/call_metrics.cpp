// SPDX-License-Identifier: Apache-2.0
#include "server/call_metrics.hpp"

#include <chrono>
#include <optional>
#include <string_view>

#include "admin/metrics.hpp"
#include "nsm/notifier.hpp"
#include "store/store.hpp"

namespace nlockd::server {

namespace {

constexpr uint32_t kNlmProgram = 100021;
constexpr uint32_t kNsmProgram = 100024;

// Dispatcher outcomes of calls that never reached a procedure handler.
std::optional<admin::MalformedReason> MalformedReasonOf(std::string_view outcome) {
  using admin::MalformedReason;
  if (outcome == "malformed") return MalformedReason::kBadMessage;
  if (outcome == "rpc_mismatch") return MalformedReason::kRpcMismatch;
  if (outcome == "auth_error") return MalformedReason::kAuthError;
  if (outcome == "prog_unavail") return MalformedReason::kProgUnavail;
  if (outcome == "prog_mismatch") return MalformedReason::kProgMismatch;
  if (outcome == "proc_unavail") return MalformedReason::kProcUnavail;
  return std::nullopt;
}

// The protocol status the handler recorded ("granted", "stat_fail", ...); kOk for a handled
// call that records none (void results); else the RPC outcome ("garbage_args", "system_err",
// "duplicate_replayed", ...). The dispatcher hands both over as names: this is the one place
// they become a RequestResult.
admin::RequestResult ResultOf(const rpc::CallRecord& record) {
  if (!record.result.empty()) return admin::RequestResultFromLabel(record.result);
  if (record.outcome == "success") return admin::RequestResult::kOk;
  return admin::RequestResultFromLabel(record.outcome);
}

admin::NotificationResult ToMetric(nsm::NotifyAttemptReport::Outcome outcome) {
  switch (outcome) {
    case nsm::NotifyAttemptReport::Outcome::kAnswered:
      return admin::NotificationResult::kDelivered;
    case nsm::NotifyAttemptReport::Outcome::kFailed:
      return admin::NotificationResult::kFailed;
    case nsm::NotifyAttemptReport::Outcome::kGaveUp:
      return admin::NotificationResult::kGaveUp;
  }
  return admin::NotificationResult::kFailed;
}

}  // namespace

void CallMetrics::Observe(const rpc::CallRecord& record) {
  if (record.procedure_name.empty()) {
    if (auto reason = MalformedReasonOf(record.outcome)) metrics_.MalformedRequest(*reason);
    return;
  }
  if (record.outcome == "garbage_args") {
    metrics_.MalformedRequest(admin::MalformedReason::kGarbageArgs);
  }
  admin::RequestMetrics* request = Resolve(record);
  if (request == nullptr) return;
  request->Observe(ResultOf(record), std::chrono::duration<double>(record.duration).count());
}

admin::RequestMetrics* CallMetrics::Resolve(const rpc::CallRecord& record) {
  const rpc::CallContext& call = record.context;
  auto key = std::make_tuple(call.program, call.version, call.procedure);
  auto it = procedures_.find(key);
  if (it != procedures_.end()) return it->second;
  admin::RequestMetrics* request = nullptr;
  if (call.program == kNlmProgram) {
    request = &metrics_.NlmRequest(call.version, record.procedure_name);
  } else if (call.program == kNsmProgram) {
    request = &metrics_.NsmRequest(record.procedure_name);
  }
  procedures_.emplace(key, request);
  return request;
}

EventMetrics::EventMetrics(store::Store& store, nsm::Notifier& notifier, admin::Metrics& metrics)
    : store_(store), notifier_(notifier) {
  store_.SetCommitObserver([&metrics](const store::CommitRecord& commit) {
    if (commit.failed) {
      metrics.StoreWritesFailed(commit.writes);
      return;
    }
    metrics.ObserveStoreCommit(std::chrono::duration<double>(commit.duration).count(),
                               commit.writes);
  });
  notifier_.set_on_attempt([&metrics](const nsm::NotifyAttemptReport& attempt) {
    metrics.ObserveNotification(ToMetric(attempt.outcome),
                                std::chrono::duration<double>(attempt.duration).count());
  });
}

EventMetrics::~EventMetrics() {
  // The store's writer may be committing now: once this returns it no longer calls us.
  store_.SetCommitObserver({});
  notifier_.set_on_attempt({});
}

}  // namespace nlockd::server
