// SPDX-License-Identifier: Apache-2.0
#include "server/call_metrics.hpp"

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include <asio/io_context.hpp>
#include <asio/ip/udp.hpp>
#include <gtest/gtest.h>

#include "admin/metrics.hpp"
#include "base/clock.hpp"
#include "nsm/notifier.hpp"
#include "rpc/client.hpp"
#include "store/store.hpp"
#include "store/testing/write_only_store.hpp"
#include "testutil/run_coroutine.hpp"

namespace nlockd::server {
namespace {

rpc::CallContext Call(uint32_t program, uint32_t version, uint32_t procedure) {
  rpc::CallContext context;
  context.program = program;
  context.version = version;
  context.procedure = procedure;
  return context;
}

void Observe(CallMetrics& observer, const rpc::CallContext& context, std::string_view name,
             std::string_view outcome, std::string_view result = {}) {
  observer.Observe(rpc::CallRecord{context, name, outcome, std::chrono::microseconds(200), result});
}

bool Has(const std::string& text, const std::string& line) {
  return text.find(line + "\n") != std::string::npos;
}

TEST(CallMetrics, CountsHandledCallsPerProgramVersionAndProcedure) {
  admin::Metrics metrics;
  CallMetrics observer(metrics);
  rpc::CallContext lock_v4 = Call(100021, 4, 2);
  Observe(observer, lock_v4, "LOCK", "success");
  Observe(observer, lock_v4, "LOCK", "success");
  Observe(observer, Call(100021, 1, 2), "LOCK", "garbage_args");
  Observe(observer, Call(100024, 1, 2), "SM_MON", "success");
  const std::string text = metrics.Serialize();
  EXPECT_TRUE(Has(text, R"(nlm_requests_total{procedure="LOCK",result="ok",version="4"} 2)"))
      << text;
  EXPECT_TRUE(
      Has(text, R"(nlm_requests_total{procedure="LOCK",result="garbage_args",version="1"} 1)"));
  EXPECT_TRUE(Has(text, R"(nsm_requests_total{procedure="SM_MON",result="ok"} 1)"));
  EXPECT_TRUE(Has(text, R"(nlm_request_duration_seconds_count{procedure="LOCK"} 3)"));
  EXPECT_TRUE(Has(text, R"(rpc_malformed_requests_total{reason="garbage_args"} 1)"));
}

TEST(CallMetrics, TheResultIsTheProtocolStatusTheServiceRecorded) {
  admin::Metrics metrics;
  CallMetrics observer(metrics);
  rpc::CallContext lock_v4 = Call(100021, 4, 2);
  Observe(observer, lock_v4, "LOCK", "success", "granted");
  Observe(observer, lock_v4, "LOCK", "success", "blocked");
  Observe(observer, lock_v4, "LOCK", "success", "denied_grace_period");
  Observe(observer, lock_v4, "LOCK", "duplicate_replayed");
  Observe(observer, Call(100024, 1, 2), "SM_MON", "success", "stat_fail");
  Observe(observer, Call(100024, 1, 3), "SM_UNMON", "success");  // A void result.
  const std::string text = metrics.Serialize();
  EXPECT_TRUE(Has(text, R"(nlm_requests_total{procedure="LOCK",result="granted",version="4"} 1)"))
      << text;
  EXPECT_TRUE(Has(text, R"(nlm_requests_total{procedure="LOCK",result="blocked",version="4"} 1)"));
  EXPECT_TRUE(Has(
      text, R"(nlm_requests_total{procedure="LOCK",result="denied_grace_period",version="4"} 1)"));
  EXPECT_TRUE(Has(
      text, R"(nlm_requests_total{procedure="LOCK",result="duplicate_replayed",version="4"} 1)"));
  EXPECT_TRUE(Has(text, R"(nsm_requests_total{procedure="SM_MON",result="stat_fail"} 1)"));
  EXPECT_TRUE(Has(text, R"(nsm_requests_total{procedure="SM_UNMON",result="ok"} 1)"));
}

TEST(CallMetrics, CallsThatReachNoProcedureCountAsMalformed) {
  admin::Metrics metrics;
  CallMetrics observer(metrics);
  Observe(observer, Call(100003, 3, 1), "", "prog_unavail");
  Observe(observer, Call(100021, 9, 1), "", "prog_mismatch");
  Observe(observer, Call(100021, 4, 99), "", "proc_unavail");
  Observe(observer, Call(0, 0, 0), "", "malformed");
  Observe(observer, Call(100021, 4, 2), "", "auth_error");
  // A procedure of another program (an embedding server's) is not NLM or NSM: not counted.
  Observe(observer, Call(100003, 3, 1), "GETATTR", "success");
  const std::string text = metrics.Serialize();
  EXPECT_TRUE(Has(text, R"(rpc_malformed_requests_total{reason="prog_unavail"} 1)")) << text;
  EXPECT_TRUE(Has(text, R"(rpc_malformed_requests_total{reason="prog_mismatch"} 1)"));
  EXPECT_TRUE(Has(text, R"(rpc_malformed_requests_total{reason="proc_unavail"} 1)"));
  EXPECT_TRUE(Has(text, R"(rpc_malformed_requests_total{reason="bad_message"} 1)"));
  EXPECT_TRUE(Has(text, R"(rpc_malformed_requests_total{reason="auth_error"} 1)"));
  // The RPC server's own count: not the dispatcher's to report.
  EXPECT_TRUE(Has(text, R"(rpc_malformed_requests_total{reason="record_too_large"} 0)"));
  EXPECT_EQ(text.find("GETATTR"), std::string::npos);
}

// A store that acknowledges every write at once and whose commits the test makes.
class ObservedStore final : public store::testutil::WriteOnlyStore {
 public:
  void SetCommitObserver(store::CommitObserver observer) override {
    observer_ = std::move(observer);
  }
  void Commit(size_t writes) {
    if (observer_) observer_(store::CommitRecord{std::chrono::milliseconds(2), writes});
  }

 protected:
  void Submit(store::WriteOp /*op*/, store::Done done) override { done(nullptr); }

 private:
  store::CommitObserver observer_;
};

// A UDP port on loopback where nothing listens.
uint16_t ClosedUdpPort(asio::io_context& io) {
  asio::ip::udp::socket socket(io, asio::ip::udp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  return socket.local_endpoint().port();
}

TEST(EventMetrics, FeedsStoreCommitsAndNotificationAttemptsWhileItLives) {
  admin::Metrics metrics;
  asio::io_context io;
  SteadyClock clock;
  rpc::Client client(io.get_executor());
  ObservedStore store;
  nsm::NotifierOptions options;
  options.statd_port = ClosedUdpPort(io);
  options.attempt_deadline = std::chrono::milliseconds(200);
  options.udp_retry = std::chrono::milliseconds(50);
  options.total_budget = std::chrono::milliseconds(1);  // Give up after the first attempt.
  nsm::Notifier notifier(io.get_executor(), client, store, clock, options);
  {
    EventMetrics events(store, notifier, metrics);
    store.Commit(3);
    store.Commit(1);
    notifier.StartRound("server", 3, {nsm::NotifyTarget{"peer", "127.0.0.1"}});
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (notifier.RoundActive() && std::chrono::steady_clock::now() < deadline) {
      io.run_for(std::chrono::milliseconds(5));
      if (io.stopped()) io.restart();
    }
    ASSERT_FALSE(notifier.RoundActive());
  }
  store.Commit(7);  // Unhooked: not counted.
  testutil::RunCoroutine(io, notifier.Shutdown());

  const std::string text = metrics.Serialize();
  EXPECT_TRUE(Has(text, "store_commit_batch_size_count 2")) << text;
  EXPECT_TRUE(Has(text, "store_commit_batch_size_sum 4"));
  EXPECT_TRUE(Has(text, "store_commit_duration_seconds_count 2"));
  EXPECT_TRUE(Has(text, "store_commit_duration_seconds_sum 0.004"));
  EXPECT_TRUE(Has(text, "nsm_notification_duration_seconds_count 1"));
  // The one attempt failed and used up the budget: counted once, as given up.
  EXPECT_TRUE(Has(text, R"(nsm_notifications_total{result="gave_up"} 1)"));
  EXPECT_TRUE(Has(text, R"(nsm_notifications_total{result="failed"} 0)"));
}

}  // namespace
}  // namespace nlockd::server
