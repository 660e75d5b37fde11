// SPDX-License-Identifier: Apache-2.0
#include "admin/metrics.hpp"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>
#include <unistd.h>

#include "testutil/subprocess.hpp"

namespace nlockd::admin {
namespace {

bool Contains(const std::string& text, const std::string& line) {
  return text.find(line) != std::string::npos;
}

ServiceCounts SomeServiceCounts() {
  ServiceCounts counts;
  counts.crashes_detected = 1;
  counts.crash_cleanups = 1;
  counts.locks_cleaned_on_crash = 17;
  counts.callback(CallbackKind::kGranted, CallbackResult::kOk) = 1;
  counts.callback(CallbackKind::kLockRes, CallbackResult::kTimedOut) = 1;
  counts.callback(CallbackKind::kStatus, CallbackResult::kFailed) = 1;
  counts.reclaims = 3;
  counts.deadlocks_refused = 2;
  counts.open_connections = 1;
  counts.bytes_received = 1000;
  counts.bytes_sent = 400;
  counts.records_too_large = 1;
  return counts;
}

// Touches every family and every typed method once or more.
void UpdateEverything(Metrics& metrics) {
  metrics.NlmRequest(4, "LOCK").Observe(RequestResult::kGranted, 0.0002);
  metrics.NlmRequest(4, "LOCK").Observe(RequestResult::kDeniedGracePeriod, 0.0001);
  metrics.NlmRequest(1, "TEST").Observe(RequestResult::kDenied, 0.003);
  metrics.ObserveRpcCall(RpcProgram::kNlm, 3, "FREE_ALL", RequestResult::kOk, 0.001);
  metrics.ObserveRpcCall(RpcProgram::kNlm, 4, "LOCK", RequestResult::kUnknown, 0.001);
  metrics.NsmRequest("SM_MON").Observe(RequestResult::kStatSucc, 0.004);
  metrics.ObserveRpcCall(RpcProgram::kNsm, 1, "SM_MON", RequestResult::kDenied, 0.0001);
  metrics.ObserveRpcCall(RpcProgram::kNsm, 1, "SM_NOTIFY", RequestResult::kOk, 0.0001);
  metrics.ObserveNotification(NotificationResult::kDelivered, 0.02);
  metrics.ObserveNotification(NotificationResult::kFailed, 5);
  metrics.ObserveNotification(NotificationResult::kGaveUp, 5);
  metrics.MalformedRequest(MalformedReason::kGarbageArgs);
  metrics.ObserveStoreCommit(0.002, 12);
  metrics.StoreWritesFailed(3);
  metrics.SetServiceCountsSource([] { return SomeServiceCounts(); });
  StatusView status;
  status.state_number = 9;
  status.uptime_seconds = 60;
  status.registrations = 4;
  status.monitored_hosts = 2;
  status.hosts = 3;
  status.locks = 5;
  status.shares = 1;
  status.waiters = 2;
  status.pending_grants = 1;
  status.grace.active = true;
  status.grace.seconds_left = 42.5;
  status.grace.reclaims_expected = 20;
  status.grace.reclaims_counted = 7;
  status.grace.last_end_reason = "all-reclaimed";  // of an earlier window
  metrics.Refresh(status);
}

TEST(Metrics, RequestSeriesExistAtZeroBeforeTheFirstCall) {
  Metrics metrics;
  const std::string text = metrics.Serialize();
  for (const char* line : {
           "nlm_requests_total{procedure=\"LOCK\",result=\"granted\",version=\"4\"} 0",
           "nlm_requests_total{procedure=\"LOCK\",result=\"denied_grace_period\",version=\"3\"} 0",
           "nlm_requests_total{procedure=\"TEST\",result=\"denied\",version=\"1\"} 0",
           "nlm_requests_total{procedure=\"SHARE\",result=\"granted\",version=\"4\"} 0",
           "nlm_request_duration_seconds_count{procedure=\"UNLOCK\"} 0",
           "nsm_requests_total{procedure=\"SM_MON\",result=\"stat_succ\"} 0",
           "nsm_requests_total{procedure=\"SM_NOTIFY\",result=\"ok\"} 0",
           "nsm_request_duration_seconds_count{procedure=\"SM_MON\"} 0",
           "nsm_notifications_total{result=\"gave_up\"} 0",
           "store_write_errors_total 0",
       }) {
    EXPECT_TRUE(Contains(text, std::string("\n") + line + "\n")) << line << "\n" << text;
  }
  // SHARE is NLM 3 and 4 only.
  EXPECT_FALSE(Contains(text, "procedure=\"SHARE\",result=\"granted\",version=\"1\""));
  // A pre-created series counts on from 0.
  metrics.NlmRequest(4, "LOCK").Observe(RequestResult::kGranted, 0.001);
  EXPECT_TRUE(
      Contains(metrics.Serialize(),
               "\nnlm_requests_total{procedure=\"LOCK\",result=\"granted\",version=\"4\"} 1\n"));
}

TEST(Metrics, ExposesEveryFamilyWithItsValues) {
  Metrics metrics;
  UpdateEverything(metrics);
  const std::string text = metrics.Serialize();
  for (const char* line : {
           "# TYPE nsm_requests_total counter",
           "nsm_requests_total{procedure=\"SM_MON\",result=\"stat_succ\"} 1",
           "nsm_requests_total{procedure=\"SM_MON\",result=\"denied\"} 1",
           "# TYPE nsm_request_duration_seconds histogram",
           "nsm_request_duration_seconds_count{procedure=\"SM_MON\"} 2",
           "nsm_clients_registered 4",
           "nsm_notifications_total{result=\"delivered\"} 1",
           "nsm_notifications_total{result=\"gave_up\"} 1",
           "nsm_notification_duration_seconds_count 3",
           "nsm_crashes_detected_total 1",
           "nsm_crash_cleanups_total 1",
           "nsm_locks_cleaned_on_crash_total 17",
           "nlm_requests_total{procedure=\"LOCK\",result=\"granted\",version=\"4\"} 1",
           "nlm_requests_total{procedure=\"LOCK\",result=\"denied_grace_period\",version=\"4\"} 1",
           "nlm_requests_total{procedure=\"LOCK\",result=\"unknown\",version=\"4\"} 1",
           "nlm_requests_total{procedure=\"TEST\",result=\"denied\",version=\"1\"} 1",
           "nlm_requests_total{procedure=\"FREE_ALL\",result=\"ok\",version=\"3\"} 1",
           "nlm_request_duration_seconds_count{procedure=\"LOCK\"} 3",
           "nlm_locks_held 5",
           "nlm_shares_held 1",
           "nlm_waiters 2",
           "nlm_pending_grants 1",
           "nlm_hosts 3",
           "nlm_callbacks_total{kind=\"granted\",result=\"ok\"} 1",
           "nlm_callbacks_total{kind=\"lock_res\",result=\"timed_out\"} 1",
           "nlm_callbacks_total{kind=\"status\",result=\"failed\"} 1",
           "nlm_grace_active 1",
           "nlm_grace_seconds_left 42.5",
           "nlm_grace_reclaims_expected 20",
           "nlm_grace_reclaims_counted 7",
           "nlm_grace_last_end{reason=\"all-reclaimed\"} 1",
           "nlm_grace_last_end{reason=\"timer\"} 0",
           "nlm_reclaims_total 3",
           "nlm_deadlocks_refused_total 2",
           "rpc_connections 1",
           "rpc_bytes_received_total 1000",
           "rpc_bytes_sent_total 400",
           "rpc_malformed_requests_total{reason=\"garbage_args\"} 1",
           "rpc_malformed_requests_total{reason=\"record_too_large\"} 1",
           "store_commit_duration_seconds_count 1",
           "store_commit_batch_size_bucket{le=\"16\"} 1",
           "store_commit_batch_size_bucket{le=\"8\"} 0",
           "store_write_errors_total 3",
           "nsm_state_number 9",
           "nsm_monitored_hosts 2",
           "nlockd_uptime_seconds 60",
       }) {
    EXPECT_TRUE(Contains(text, std::string("\n") + line + "\n")) << line << "\n" << text;
  }
}

TEST(Metrics, GraceGaugesReadZeroWhenGraceIsOver) {
  Metrics metrics;
  StatusView status;
  status.grace.active = false;
  status.grace.seconds_left = 12;  // Ignored while inactive.
  metrics.Refresh(status);
  const std::string text = metrics.Serialize();
  EXPECT_TRUE(Contains(text, "\nnlm_grace_active 0\n"));
  EXPECT_TRUE(Contains(text, "\nnlm_grace_seconds_left 0\n"));
}

TEST(Metrics, ProcedureHandlesAreResolvedOnce) {
  Metrics metrics;
  RequestMetrics& lock = metrics.NlmRequest(4, "LOCK");
  EXPECT_EQ(&lock, &metrics.NlmRequest(4, "LOCK"));
  EXPECT_NE(&lock, &metrics.NlmRequest(3, "LOCK"));
  EXPECT_NE(static_cast<void*>(&lock), static_cast<void*>(&metrics.NsmRequest("LOCK")));
}

TEST(Metrics, ConcurrentObservationsAllCount) {
  Metrics metrics;
  RequestMetrics& lock = metrics.NlmRequest(4, "LOCK");
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 5000; ++i) {
        lock.Observe(i % 2 == 0 ? RequestResult::kGranted : RequestResult::kBlocked, 0.0001);
        metrics.MalformedRequest(MalformedReason::kBadMessage);
      }
    });
  }
  for (auto& thread : threads) thread.join();
  const std::string text = metrics.Serialize();
  EXPECT_TRUE(Contains(
      text, "\nnlm_requests_total{procedure=\"LOCK\",result=\"granted\",version=\"4\"} 10000\n"));
  EXPECT_TRUE(Contains(
      text, "\nnlm_requests_total{procedure=\"LOCK\",result=\"blocked\",version=\"4\"} 10000\n"));
  EXPECT_TRUE(Contains(text, "\nrpc_malformed_requests_total{reason=\"bad_message\"} 20000\n"));
}

TEST(Metrics, OwnersCountersAreTheirLastReadingNotASum) {
  Metrics metrics;
  ServiceCounts counts;
  metrics.SetServiceCountsSource([&counts] { return counts; });
  // Before any reading, the families exist with zeros.
  EXPECT_TRUE(Contains(metrics.Serialize(), "\nnlm_reclaims_total 0\n"));
  EXPECT_TRUE(Contains(metrics.Serialize(), "\nnlm_deadlocks_refused_total 0\n"));
  counts.reclaims = 4;
  counts.bytes_sent = 10;
  metrics.Refresh(StatusView{});
  metrics.Refresh(StatusView{});  // A second scrape reads the same values; it adds nothing.
  std::string text = metrics.Serialize();
  EXPECT_TRUE(Contains(text, "\nnlm_reclaims_total 4\n")) << text;
  EXPECT_TRUE(Contains(text, "\nrpc_bytes_sent_total 10\n"));
  // Collecting does not read the owners: only Refresh does.
  counts.reclaims = 9;
  EXPECT_TRUE(Contains(metrics.Serialize(), "\nnlm_reclaims_total 4\n"));
  metrics.Refresh(StatusView{});
  EXPECT_TRUE(Contains(metrics.Serialize(), "\nnlm_reclaims_total 9\n"));
  // Without a source, the last reading stays.
  metrics.SetServiceCountsSource({});
  counts.reclaims = 11;
  metrics.Refresh(StatusView{});
  EXPECT_TRUE(Contains(metrics.Serialize(), "\nnlm_reclaims_total 9\n"));
}

TEST(Metrics, TheRpcServersOversizedRecordsJoinTheDispatchersReasons) {
  Metrics metrics;
  ServiceCounts counts;
  counts.records_too_large = 2;
  metrics.SetServiceCountsSource([&counts] { return counts; });
  metrics.MalformedRequest(MalformedReason::kAuthError);
  metrics.Refresh(StatusView{});
  const std::string text = metrics.Serialize();
  // One family (one TYPE line) with every reason.
  const std::string type = "# TYPE rpc_malformed_requests_total counter";
  ASSERT_NE(text.find(type), std::string::npos) << text;
  EXPECT_EQ(text.find(type, text.find(type) + 1), std::string::npos) << text;
  EXPECT_TRUE(Contains(text, "\nrpc_malformed_requests_total{reason=\"auth_error\"} 1\n"));
  EXPECT_TRUE(Contains(text, "\nrpc_malformed_requests_total{reason=\"record_too_large\"} 2\n"));
}

TEST(Metrics, RegistryOutlivesMetricsForAHostsExposer) {
  std::shared_ptr<prometheus::Registry> registry;
  {
    Metrics metrics;
    ServiceCounts counts;
    counts.crashes_detected = 5;
    metrics.SetServiceCountsSource([counts] { return counts; });
    metrics.Refresh(StatusView{});
    registry = metrics.shared_registry();
  }
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, registry->Collect());
  EXPECT_TRUE(Contains(out.str(), "\nnsm_crashes_detected_total 5\n")) << out.str();
}

TEST(RequestResult, EveryLabelMapsBackToItsResult) {
  for (size_t i = 0; i < kRequestResults; ++i) {
    const auto result = static_cast<RequestResult>(i);
    EXPECT_EQ(RequestResultFromLabel(RequestResultLabel(result)), result) << i;
  }
  EXPECT_EQ(RequestResultFromLabel("no_such_status"), RequestResult::kUnknown);
}

TEST(Metrics, PromtoolAcceptsTheExposition) {
  const std::string promtool = PROMTOOL_BINARY;
  if (promtool.empty() || !std::filesystem::exists(promtool)) {
    GTEST_SKIP() << "promtool is not installed (Debian package prometheus)";
  }
  Metrics metrics;
  UpdateEverything(metrics);
  const std::filesystem::path file = std::filesystem::temp_directory_path() /
                                     ("nlockd_metrics_" + std::to_string(getpid()) + ".txt");
  {
    std::ofstream out(file);
    out << metrics.Serialize();
  }
  // promtool reads the exposition from stdin; lint problems make it exit non-zero.
  const auto [status, output] = testutil::RunCommand(
      {"/bin/sh", "-c", "\"$0\" check metrics < \"$1\"", promtool, file.string()});
  std::filesystem::remove(file);
  EXPECT_EQ(status, 0) << output;
  EXPECT_EQ(output, "") << "promtool reported lint problems";
}

}  // namespace
}  // namespace nlockd::admin
