// SPDX-License-Identifier: Apache-2.0
// What NlmService tells the metrics through the dispatcher: the protocol status of each reply
// (CallContext::result), granted reclaims, and the _RES calls by procedure and outcome.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "lock/grace_period.hpp"
#include "nlm/service.hpp"
#include "nlm/testing/service_test_fixture.hpp"
#include "rpc/dispatcher.hpp"
#include "rpc/message.hpp"
#include "testutil/run_coroutine.hpp"

namespace nlockd::nlm {
namespace {

using test_support::NlmServiceTest;
using testutil::RunCoroutine;

class NlmServiceMetricsTest : public NlmServiceTest {
 protected:
  NlmServiceMetricsTest() {
    service_->Register(dispatcher_);
    dispatcher_.SetObserver([this](const rpc::CallRecord& record) {
      results_.push_back(std::string(record.procedure_name) + ":" +
                         std::string(record.result.empty() ? record.outcome : record.result));
    });
  }

  // Dispatches one call of `procedure` with `args` (or truncated arguments when `garbage`).
  template <typename Args>
  void Dispatch(uint32_t version, uint32_t procedure, const Args& args, bool garbage = false) {
    std::vector<uint8_t> message;
    xdr::Encoder enc(message);
    rpc::EncodeCallHeader(enc, ++xid_, NLM_PROG, version, procedure);
    if (!garbage) Encode(enc, version, args);
    std::vector<uint8_t> reply;
    RunCoroutine(io_, dispatcher_.Dispatch(From("192.0.2.1", version), message, reply));
    RunFor(std::chrono::milliseconds(5));  // The _RES call runs in the background.
  }

  rpc::Dispatcher dispatcher_;
  std::vector<std::string> results_;
  uint32_t xid_ = 0;
};

TEST_F(NlmServiceMetricsTest, ResultsAreTheStatusesOnTheWire) {
  Dispatch(NLM4_VERS, NLM_LOCK, LockArgs("a", 1, 0, 10));
  Dispatch(NLM4_VERS, NLM_LOCK, LockArgs("a", 2, 5, 10));  // Conflicts, does not block.
  Dispatch(NLM4_VERS, NLM_LOCK, LockArgs("a", 3, 5, 10, /*block=*/true));
  Dispatch(NLM4_VERS, NLM_TEST, nlm4_testargs{"t", true, LockArgs("a", 4, 100, 1).alock});
  Dispatch(NLM4_VERS, NLM_UNLOCK, nlm4_unlockargs{"u", LockArgs("a", 1, 0, 10).alock});
  Dispatch(NLM4_VERS, NLM_LOCK, nlm4_lockargs{}, /*garbage=*/true);
  Dispatch(NLM4_VERS, NLM_NULL, nlm4_lockargs{}, /*garbage=*/true);  // NULL takes nothing.
  EXPECT_EQ(results_,
            (std::vector<std::string>{"LOCK:granted", "LOCK:denied", "LOCK:blocked", "TEST:granted",
                                      "UNLOCK:granted", "LOCK:garbage_args", "NULL:success"}));
}

TEST_F(NlmServiceMetricsTest, MsgCallsCountTheStatusOfTheirResAndEachResByOutcome) {
  Dispatch(NLM4_VERS, NLM_LOCK_MSG, LockArgs("a", 1, 0, 10));
  Dispatch(NLM4_VERS, NLM_TEST_MSG, nlm4_testargs{"t", true, LockArgs("a", 2, 0, 1).alock});
  caller_.reachable = false;
  Dispatch(NLM4_VERS, NLM_UNLOCK_MSG, nlm4_unlockargs{"u", LockArgs("a", 1, 0, 10).alock});
  // Arguments that do not decode: GARBAGE_ARGS, and no _RES at all.
  Dispatch(NLM4_VERS, NLM_CANCEL_MSG, nlm4_cancargs{}, /*garbage=*/true);
  EXPECT_EQ(results_, (std::vector<std::string>{"LOCK_MSG:granted", "TEST_MSG:denied",
                                                "UNLOCK_MSG:granted", "CANCEL_MSG:garbage_args"}));

  const NlmStats& stats = service_->stats();
  const auto& res = stats.res_by_procedure;
  EXPECT_EQ(res[NLM_LOCK_RES - NLM_TEST_RES].delivered, 1u);
  EXPECT_EQ(res[NLM_TEST_RES - NLM_TEST_RES].delivered, 1u);
  EXPECT_EQ(res[NLM_UNLOCK_RES - NLM_TEST_RES].timed_out, 1u);
  EXPECT_EQ(res[NLM_CANCEL_RES - NLM_TEST_RES].timed_out, 0u);
  EXPECT_EQ(res[NLM_GRANTED_RES - NLM_TEST_RES].delivered, 0u);
  EXPECT_EQ(stats.res_sent, 2u);
  EXPECT_EQ(stats.res_failed, 1u);
}

TEST_F(NlmServiceMetricsTest, ADeadlockIsDeadlckInVersionFourDeniedInOneAndThreeAndCounted) {
  // Owner 1 (caller a) holds file1 and waits for file2, held by owner 2 (caller b).
  Dispatch(NLM4_VERS, NLM_LOCK, LockArgs("a", 1, 0, 10));
  Dispatch(NLM4_VERS, NLM_LOCK, LockArgs("b", 2, 0, 10, false, "file2"));
  Dispatch(NLM4_VERS, NLM_LOCK, LockArgs("a", 1, 0, 10, true, "file2"));
  ASSERT_EQ(results_, (std::vector<std::string>{"LOCK:granted", "LOCK:granted", "LOCK:blocked"}));
  results_.clear();
  // Owner 2 blocking on file1 would close the cycle: refused in every version and form, and
  // every time it is sent.
  const nlm4_lockargs closing = LockArgs("b", 2, 0, 10, true);
  Dispatch(NLM4_VERS, NLM_LOCK, closing);
  Dispatch(NLM_VERSX, NLM_LOCK, closing);
  Dispatch(NLM_VERS, NLM_LOCK, closing);
  Dispatch(NLM4_VERS, NLM_NM_LOCK, closing);
  Dispatch(NLM4_VERS, NLM_LOCK_MSG, closing);
  Dispatch(NLM_VERS, NLM_LOCK_MSG, closing);
  EXPECT_EQ(results_,
            (std::vector<std::string>{"LOCK:deadlck", "LOCK:denied", "LOCK:denied",
                                      "NM_LOCK:deadlck", "LOCK_MSG:deadlck", "LOCK_MSG:denied"}));
  EXPECT_EQ(service_->stats().deadlocks_refused, 6u);
  // The _RES of each _MSG carries the refusal in its version's code.
  std::vector<std::string> res;
  for (const test_support::FakeCaller::Sent& sent : caller_.sent) {
    if (sent.procedure != NLM_LOCK_RES) continue;
    nlm4_res decoded;
    xdr::Decoder in(sent.args);
    ASSERT_TRUE(Decode(in, sent.version, decoded));
    res.push_back(std::to_string(sent.version) + ":" + std::string(ToString(decoded.stat)));
  }
  EXPECT_EQ(res, (std::vector<std::string>{"4:deadlck", "1:denied"}));
  // Owner 1's waiter is still there: when owner 2 unlocks file2, owner 1 is granted it.
  Dispatch(NLM4_VERS, NLM_UNLOCK,
           nlm4_unlockargs{"u", LockArgs("b", 2, 0, 10, false, "file2").alock});
  EXPECT_EQ(locks_.Counts().pending_grants, 1u);
}

TEST_F(NlmServiceMetricsTest, OnlyGrantedReclaimsAreCounted) {
  locks_.StartGrace(lock::GraceMode::kClassic);
  nlm4_lockargs reclaim = LockArgs("a", 1, 0, 10);
  reclaim.reclaim = true;
  Dispatch(NLM4_VERS, NLM_LOCK, reclaim);
  nlm4_lockargs conflicting = LockArgs("a", 2, 5, 10);
  conflicting.reclaim = true;
  Dispatch(NLM4_VERS, NLM_LOCK, conflicting);  // Denied: not counted.
  nlm4_lockargs reclaim_msg = LockArgs("a", 3, 20, 10);
  reclaim_msg.reclaim = true;
  Dispatch(NLM4_VERS, NLM_LOCK_MSG, reclaim_msg);
  Dispatch(NLM4_VERS, NLM_LOCK, LockArgs("a", 4, 40, 10));  // Not a reclaim, in grace.
  EXPECT_EQ(results_, (std::vector<std::string>{"LOCK:granted", "LOCK:denied", "LOCK_MSG:granted",
                                                "LOCK:denied_grace_period"}));
  EXPECT_EQ(service_->stats().reclaims_granted, 2u);
}

}  // namespace
}  // namespace nlockd::nlm
