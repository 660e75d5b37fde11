// SPDX-License-Identifier: Apache-2.0
#include "nlm/service.hpp"

#include <gtest/gtest.h>

#include "nlm/testing/service_test_fixture.hpp"
#include "testutil/run_coroutine.hpp"

namespace nlockd::nlm {
namespace {

using test_support::FakeCaller;
using test_support::NlmServiceTest;

using testutil::RunCoroutine;

TEST_F(NlmServiceTest, FirstLockOfAHostMonitorsItOnceBeforeGranting) {
  auto a = From("192.0.2.1");
  EXPECT_EQ(Lock(a, LockArgs("client-a", 1, 0, 10)).stat, NLM4_GRANTED);
  EXPECT_EQ(Lock(a, LockArgs("client-a", 2, 20, 10)).stat, NLM4_GRANTED);
  ASSERT_EQ(monitor_.requests.size(), 1u);
  EXPECT_EQ(monitor_.requests[0].host, "192.0.2.1");
  EXPECT_EQ(monitor_.requests[0].caller_name, "client-a");
  EXPECT_EQ(monitor_.requests[0].nsm_state, 3);
  EXPECT_EQ(Lock(From("192.0.2.2"), LockArgs("client-b", 1, 100, 10)).stat, NLM4_GRANTED);
  EXPECT_EQ(monitor_.requests.size(), 2u);
  EXPECT_EQ(Lock(From("192.0.2.3"), LockArgs("client-c", 1, 200, 1), false).stat, NLM4_GRANTED);
  EXPECT_EQ(monitor_.requests.size(), 2u) << "NM_LOCK does not monitor";
}

TEST_F(NlmServiceTest, AStateOfZeroInALockDoesNotReplaceTheHostsKnownState) {
  auto a = From("192.0.2.1");
  ASSERT_EQ(Lock(a, LockArgs("client-a", 1, 0, 10)).stat, NLM4_GRANTED);
  // Linux clients send state 0 in some LOCKs (reclaims among them): "not said", not a reboot.
  nlm4_lockargs unsaid = LockArgs("client-a", 1, 20, 10);
  unsaid.state = 0;
  ASSERT_EQ(Lock(a, unsaid).stat, NLM4_GRANTED);
  const lock::HostInfo* host = locks_.hosts().Find(lock::HostId("192.0.2.1"));
  ASSERT_NE(host, nullptr);
  EXPECT_EQ(host->nsm_state, 3);
}

TEST_F(NlmServiceTest, FailedMonitoringAnswersDeniedNolocksAndHoldsNothing) {
  monitor_.succeed = false;
  auto res = Lock(From("192.0.2.1"), LockArgs("client-a", 1, 0, 10));
  EXPECT_EQ(res.stat, NLM4_DENIED_NOLOCKS);
  EXPECT_EQ(res.cookie, "cookie-1");
  EXPECT_EQ(locks_.Counts().locks, 0u);
  EXPECT_EQ(service_->stats().monitor_failures, 1u);
}

TEST_F(NlmServiceTest, ConflictIsDeniedAndTestReportsTheHolder) {
  auto a = From("192.0.2.1"), b = From("192.0.2.2");
  ASSERT_EQ(Lock(a, LockArgs("client-a", 7, 100, 50)).stat, NLM4_GRANTED);
  EXPECT_EQ(Lock(b, LockArgs("client-b", 1, 120, 10)).stat, NLM4_DENIED);
  nlm4_testargs test{"t", true, LockArgs("client-b", 1, 0, 0).alock};
  nlm4_testres res = RunCoroutine(io_, service_->Test(b, test));
  EXPECT_EQ(res.stat, NLM4_DENIED);
  EXPECT_EQ(res.cookie, "t");
  EXPECT_EQ(res.holder.svid, 7);
  EXPECT_EQ(res.holder.l_offset, 100u);
  EXPECT_EQ(res.holder.l_len, 50u);
  EXPECT_TRUE(res.holder.exclusive);
}

TEST_F(NlmServiceTest, TryLockAnswersAtOnceOnlyForAMonitoredHostAndWithoutAJournal) {
  auto a = From("192.0.2.1");
  auto first = LockArgs("client-a", 1, 0, 10);
  EXPECT_FALSE(service_->TryLock(a, first, true)) << "the first lock must monitor the host";
  EXPECT_EQ(first.alock.fh, "file1") << "nothing taken from the arguments";
  EXPECT_EQ(locks_.Counts().locks, 0u);
  EXPECT_EQ(Lock(a, first).stat, NLM4_GRANTED);
  auto second = LockArgs("client-a", 2, 20, 10);
  std::optional<nlm4_res> now = service_->TryLock(a, second, true);
  ASSERT_TRUE(now);
  EXPECT_EQ(now->stat, NLM4_GRANTED);
  EXPECT_EQ(now->cookie, "cookie-2");
  EXPECT_EQ(locks_.Counts().locks, 2u);
  nlm4_unlockargs unlock{"u", second.alock};
  unlock.alock = LockArgs("client-a", 2, 20, 10).alock;
  std::optional<nlm4_res> unlocked = service_->TryUnlock(a, unlock);
  ASSERT_TRUE(unlocked);
  EXPECT_EQ(unlocked->stat, NLM4_GRANTED);
  EXPECT_EQ(locks_.Counts().locks, 1u);
}

TEST_F(NlmServiceTest, OverflowingRangeIsFbig) {
  auto res = Lock(From("192.0.2.1"), LockArgs("a", 1, UINT64_MAX, 2));
  EXPECT_EQ(res.stat, NLM4_FBIG);
}

TEST_F(NlmServiceTest, BlockedLockIsGrantedByGrantedMsgAndAcknowledgedByGrantedRes) {
  auto a = From("192.0.2.1"), b = From("192.0.2.2");
  auto held = LockArgs("client-a", 1, 0, 10);
  ASSERT_EQ(Lock(a, held).stat, NLM4_GRANTED);
  ASSERT_EQ(Lock(b, LockArgs("client-b", 2, 0, 10, true)).stat, NLM4_BLOCKED);
  caller_.on_call = [this](const FakeCaller::Sent& sent) {
    if (sent.procedure != NLM_GRANTED_MSG) return;
    nlm4_testargs args;
    xdr::Decoder dec(sent.args);
    ASSERT_TRUE(Decode(dec, sent.version, args));
    EXPECT_EQ(args.alock.svid, 2);
    EXPECT_EQ(args.alock.caller_name, "client-b");
    EXPECT_EQ(args.cookie.size(), 8u);
    service_->GrantedRes(From("192.0.2.2"), nlm4_res{args.cookie, NLM4_GRANTED});
  };
  EXPECT_EQ(Unlock(a, held).stat, NLM4_GRANTED);
  RunFor(std::chrono::milliseconds(100));
  ASSERT_EQ(caller_.sent.size(), 1u);
  EXPECT_EQ(caller_.sent[0].client.address.to_string(), "192.0.2.2");
  EXPECT_EQ(service_->stats().callbacks_acknowledged, 1u);
  EXPECT_EQ(locks_.ListLocks().size(), 1u);
  EXPECT_EQ(locks_.ListLocks()[0].owner.host.value(), "192.0.2.2");
}

TEST_F(NlmServiceTest, UnreachableWaiterLosesTheGrantToTheNextWaiter) {
  auto held = HoldWithWaiters(2);
  caller_.on_call = [this](const FakeCaller::Sent& sent) {
    nlm4_testargs args;
    xdr::Decoder dec(sent.args);
    ASSERT_TRUE(Decode(dec, sent.version, args));
    if (sent.client.address.to_string() == "192.0.2.3") {
      service_->GrantedRes(From("192.0.2.3"), nlm4_res{args.cookie, NLM4_GRANTED});
    }  // 192.0.2.2 never answers.
  };
  Unlock(From("192.0.2.1"), held);
  RunFor(std::chrono::milliseconds(500));
  EXPECT_EQ(service_->stats().callbacks_failed, 1u);
  EXPECT_EQ(service_->stats().callbacks_refused, 0u);
  EXPECT_EQ(service_->stats().callbacks_acknowledged, 1u);
  auto locks = locks_.ListLocks();
  ASSERT_EQ(locks.size(), 1u);
  EXPECT_EQ(locks[0].owner.host.value(), "192.0.2.3");
}

TEST_F(NlmServiceTest, FreeAllReleasesOnlyAHostBoundToTheCallersAddress) {
  auto a = From("192.0.2.1");
  ASSERT_EQ(Lock(a, LockArgs("client-a", 1, 0, 10)).stat, NLM4_GRANTED);
  RunCoroutine(io_, service_->FreeAll(From("192.0.2.9"), nlm4_notify{"client-a", 5}));
  EXPECT_EQ(locks_.Counts().locks, 1u);
  EXPECT_EQ(service_->stats().spoof_rejections, 1u);
  RunCoroutine(io_, service_->FreeAll(a, nlm4_notify{"CLIENT-A", 5}));
  EXPECT_EQ(locks_.Counts().locks, 0u);
}

TEST_F(NlmServiceTest, FreeAllFromAnotherLoopbackAddressIsRefused) {
  // Two client hosts on one machine: loopback addresses are not all the same caller.
  auto a = From("127.0.0.2"), b = From("127.0.0.3");
  ASSERT_EQ(Lock(a, LockArgs("hosta", 1, 0, 10)).stat, NLM4_GRANTED);
  RunCoroutine(io_, service_->FreeAll(b, nlm4_notify{"hosta", 5}));
  RunCoroutine(io_, service_->FreeAll(b, nlm4_notify{"127.0.0.2", 5}));
  RunCoroutine(io_, service_->FreeAll(From("127.0.0.1"), nlm4_notify{"hosta", 5}));
  EXPECT_EQ(locks_.Counts().locks, 1u);
  EXPECT_EQ(service_->stats().spoof_rejections, 3u);
  EXPECT_EQ(service_->stats().hosts_released, 0u);
  RunCoroutine(io_, service_->FreeAll(a, nlm4_notify{"hosta", 5}));
  EXPECT_EQ(locks_.Counts().locks, 0u);
}

TEST_F(NlmServiceTest, FreeAllByCallerNameNeedsTheNameBoundToTheCallersAddress) {
  NlmOptions options = TestOptions();
  options.host_key = NlmOptions::HostKey::kCallerName;
  MakeService(options);
  auto a = From("127.0.0.2"), b = From("127.0.0.3");
  ASSERT_EQ(Lock(a, LockArgs("hosta", 1, 0, 10)).stat, NLM4_GRANTED);
  RunCoroutine(io_, service_->FreeAll(b, nlm4_notify{"hosta", 5}));
  EXPECT_EQ(locks_.Counts().locks, 1u);
  EXPECT_EQ(service_->stats().spoof_rejections, 1u);
  RunCoroutine(io_, service_->FreeAll(a, nlm4_notify{"HostA", 5}));
  EXPECT_EQ(locks_.Counts().locks, 0u);
}

TEST_F(NlmServiceTest, StatusCallbackNeedsLoopbackAndAReservedPort) {
  ASSERT_EQ(Lock(From("192.0.2.1"), LockArgs("client-a", 1, 0, 10)).stat, NLM4_GRANTED);
  service_->SmNotify(From("192.0.2.7", 4, 700), nlm_sm_status{"client-a", 5, {}});
  service_->SmNotify(From("127.0.0.1", 4, 40000), nlm_sm_status{"client-a", 5, {}});
  EXPECT_EQ(locks_.Counts().locks, 1u);
  EXPECT_EQ(service_->stats().spoof_rejections, 2u);
  service_->SmNotify(From("127.0.0.1", 4, 700), nlm_sm_status{"client-a", 5, {}});
  EXPECT_EQ(locks_.Counts().locks, 0u);
}

TEST_F(NlmServiceTest, GraceRefusesNewLocksAndGrantsReclaims) {
  locks_.StartGrace(lock::GraceMode::kClassic, std::chrono::seconds(60));
  auto a = From("192.0.2.1");
  EXPECT_EQ(Lock(a, LockArgs("client-a", 1, 0, 10)).stat, NLM4_DENIED_GRACE_PERIOD);
  auto reclaim = LockArgs("client-a", 1, 0, 10);
  reclaim.reclaim = true;
  EXPECT_EQ(Lock(a, reclaim).stat, NLM4_GRANTED);
  nlm4_testres test = RunCoroutine(io_, service_->Test(a, nlm4_testargs{"t", true, reclaim.alock}));
  EXPECT_EQ(test.stat, NLM4_DENIED_GRACE_PERIOD);
}

TEST_F(NlmServiceTest, SharesConflictByModeAndAccess) {
  auto a = From("192.0.2.1"), b = From("192.0.2.2");
  nlm4_shareargs deny_write{"s1", {"client-a", "file1", "oh-a", fsm_DW, fsa_R}, false};
  nlm4_shareargs wants_write{"s2", {"client-b", "file1", "oh-b", fsm_DN, fsa_W}, false};
  EXPECT_EQ(RunCoroutine(io_, service_->Share(a, deny_write)).stat, NLM4_GRANTED);
  EXPECT_EQ(RunCoroutine(io_, service_->Share(b, wants_write)).stat, NLM4_DENIED);
  EXPECT_EQ(RunCoroutine(io_, service_->Unshare(a, deny_write)).stat, NLM4_GRANTED);
  EXPECT_EQ(RunCoroutine(io_, service_->Share(b, wants_write)).stat, NLM4_GRANTED);
}

TEST_F(NlmServiceTest, MsgCallsAnswerEmptyAndSendTheirResultAsResButGarbageGetsNoRes) {
  rpc::Dispatcher dispatcher;
  service_->Register(dispatcher);
  std::vector<uint8_t> call;
  xdr::Encoder enc(call);
  rpc::EncodeCallHeader(enc, 5, NLM_PROG, NLM4_VERS, NLM_LOCK_MSG);
  Encode(enc, NLM4_VERS, LockArgs("client-a", 1, 0, 10));
  rpc::CallContext context = From("192.0.2.1");
  context.transport = rpc::Transport::kUdp;
  context.peer_port = 912;
  std::vector<uint8_t> reply;
  ASSERT_TRUE(RunCoroutine(io_, dispatcher.Dispatch(context, call, reply)));
  EXPECT_TRUE(rpc::DecodeReply(reply).body.empty());
  RunFor(std::chrono::milliseconds(20));
  ASSERT_EQ(caller_.sent.size(), 1u);
  EXPECT_EQ(caller_.sent[0].procedure, NLM_LOCK_RES);
  EXPECT_EQ(caller_.sent[0].client.port, 912) << "UDP _MSG: reply to the source port";
  nlm4_res res;
  xdr::Decoder dec(caller_.sent[0].args);
  ASSERT_TRUE(Decode(dec, NLM4_VERS, res));
  EXPECT_EQ(res.stat, NLM4_GRANTED);
  EXPECT_EQ(res.cookie, "cookie-1");

  // Arguments that do not decode: GARBAGE_ARGS, and no _RES (a forged datagram must not make us
  // call an address of the forger's choosing).
  std::vector<uint8_t> bad;
  xdr::Encoder bad_enc(bad);
  rpc::EncodeCallHeader(bad_enc, 6, NLM_PROG, NLM_VERS, NLM_TEST_MSG);
  bad_enc.U32(2000);  // A cookie longer than 1024 bytes.
  std::vector<uint8_t> bad_reply;
  context.version = NLM_VERS;
  ASSERT_TRUE(RunCoroutine(io_, dispatcher.Dispatch(context, bad, bad_reply)));
  EXPECT_EQ(rpc::DecodeReply(bad_reply).accept_stat, rpc::AcceptStat::kGarbageArgs);
  RunFor(std::chrono::milliseconds(20));
  EXPECT_EQ(caller_.sent.size(), 1u) << "no _RES for arguments that do not decode";
}

}  // namespace
}  // namespace nlockd::nlm
