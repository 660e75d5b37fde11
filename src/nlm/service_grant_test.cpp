// SPDX-License-Identifier: Apache-2.0
// GRANTED callbacks of blocked locks: the per-waiter record (version, caller, address), the
// cookie and who may answer it, callbacks that stop once their grant is gone, and how each grant
// is counted (acknowledged, refused, failed).
#include <asio/co_spawn.hpp>
#include <gtest/gtest.h>

#include "nlm/service.hpp"
#include "nlm/testing/service_test_fixture.hpp"

namespace nlockd::nlm {
namespace {

using test_support::FakeCaller;
using test_support::GrantedArgs;
using test_support::NlmServiceTest;
using test_support::RunCoroutine;

TEST_F(NlmServiceTest, AGrantIsAnnouncedWithTheVersionAndCallerOfTheBlockedRequest) {
  auto a = From("192.0.2.1"), b4 = From("192.0.2.2", NLM4_VERS), b1 = From("192.0.2.2", NLM_VERS);
  const uint64_t far = (uint64_t{1} << 32) + 5;
  auto held = LockArgs("client-a", 1, far, 10);
  ASSERT_EQ(Lock(a, held).stat, NLM4_GRANTED);
  ASSERT_EQ(Lock(b4, LockArgs("client-b", 2, far, 10, true)).stat, NLM4_BLOCKED);
  // The same host then locks another file over version 1, under another name.
  ASSERT_EQ(Lock(b1, LockArgs("other-name", 7, 0, 1, false, "v1-file")).stat, NLM4_GRANTED);
  caller_.reachable = false;
  Unlock(a, held);
  RunFor(std::chrono::milliseconds(20));
  ASSERT_GE(caller_.sent.size(), 1u);
  EXPECT_EQ(caller_.sent[0].procedure, NLM_GRANTED_MSG);
  EXPECT_EQ(caller_.sent[0].version, NLM4_VERS);
  EXPECT_EQ(caller_.sent[0].client.address.to_string(), "192.0.2.2");
  EXPECT_FALSE(caller_.sent[0].client.port) << "a sync LOCK: the port comes from rpcbind";
  nlm4_testargs args = GrantedArgs(caller_.sent[0]);
  EXPECT_EQ(args.alock.l_offset, far);
  EXPECT_EQ(args.alock.caller_name, "client-b");
  EXPECT_EQ(args.alock.svid, 2);
}

TEST_F(NlmServiceTest, ALockMsgOverUdpIsGrantedToItsSourcePort) {
  auto a = From("192.0.2.1");
  rpc::CallContext b = From("192.0.2.2", NLM_VERSX, 1023);
  b.transport = rpc::Transport::kUdp;
  b.procedure = NLM_LOCK_MSG;
  auto held = LockArgs("client-a", 1, 0, 10);
  ASSERT_EQ(Lock(a, held).stat, NLM4_GRANTED);
  ASSERT_EQ(Lock(b, LockArgs("client-b", 2, 0, 10, true)).stat, NLM4_BLOCKED);
  caller_.reachable = false;
  Unlock(a, held);
  RunFor(std::chrono::milliseconds(20));
  ASSERT_GE(caller_.sent.size(), 1u);
  EXPECT_EQ(caller_.sent[0].version, NLM_VERSX);
  EXPECT_EQ(caller_.sent[0].client.port, 1023);
}

// Linux lockd matches a GRANTED to its blocked request by the callback's source address: it
// must be the address the client sent its LOCK to (an HA service address, say).
TEST_F(NlmServiceTest, AGrantGoesFromTheAddressTheBlockedLockWasSentTo) {
  auto a = From("192.0.2.1");
  rpc::CallContext b = From("192.0.2.2");
  b.local_address = asio::ip::make_address("198.51.100.7");
  auto held = LockArgs("client-a", 1, 0, 10);
  ASSERT_EQ(Lock(a, held).stat, NLM4_GRANTED);
  ASSERT_EQ(Lock(b, LockArgs("client-b", 2, 0, 10, true)).stat, NLM4_BLOCKED);
  caller_.reachable = false;
  Unlock(a, held);
  RunFor(std::chrono::milliseconds(20));
  ASSERT_GE(caller_.sent.size(), 1u);
  ASSERT_TRUE(caller_.sent[0].client.source.has_value());
  EXPECT_EQ(caller_.sent[0].client.source->to_string(), "198.51.100.7");
}

TEST_F(NlmServiceTest, AHostsRebootForgetsWhatWasLearntAboutItsLockd) {
  auto b = From("192.0.2.2");
  ASSERT_EQ(Lock(b, LockArgs("client-b", 2, 0, 10)).stat, NLM4_GRANTED);
  EXPECT_EQ(service_->HostRebooted("client-b"), 1u);
  EXPECT_EQ(caller_.forgotten, std::vector<std::string>{"192.0.2.2"});
}

TEST_F(NlmServiceTest, CookiesAreUnguessableAndOnlyTheCalledHostSettlesTheGrant) {
  auto a = From("192.0.2.1"), b = From("192.0.2.2");
  auto held = LockArgs("client-a", 1, 0, 10);
  ASSERT_EQ(Lock(a, held).stat, NLM4_GRANTED);
  ASSERT_EQ(Lock(b, LockArgs("client-b", 2, 0, 10, true)).stat, NLM4_BLOCKED);
  std::string cookie;
  caller_.on_call = [&](const FakeCaller::Sent& sent) {
    cookie = GrantedArgs(sent).cookie;
    // Host a answers in b's name, refusing the lock: ignored.
    service_->GrantedRes(a, nlm4_res{cookie, NLM4_DENIED});
  };
  Unlock(a, held);
  RunFor(std::chrono::milliseconds(10));
  EXPECT_EQ(service_->stats().spoof_rejections, 1u);
  EXPECT_EQ(service_->stats().callbacks_refused, 0u) << "not the called host's refusal";
  EXPECT_EQ(service_->stats().callbacks_failed, 0u);
  // Not the waiter id (1) in any byte order: the fixture's key makes it the same every run.
  EXPECT_EQ(cookie.size(), 8u);
  EXPECT_EQ(cookie, GrantCookies(GrantCookies::Key{1, 2}).Next());
  // The called host accepts it: the grant is settled.
  service_->GrantedRes(b, nlm4_res{cookie, NLM4_GRANTED});
  RunFor(std::chrono::milliseconds(20));
  EXPECT_EQ(service_->stats().callbacks_acknowledged, 1u);
  EXPECT_EQ(locks_.ListWaiters().size(), 0u);
  ASSERT_EQ(locks_.ListLocks().size(), 1u);
  EXPECT_EQ(locks_.ListLocks()[0].owner.host.value(), "192.0.2.2");
}

// A (192.0.2.1) holds [0, 10) of file1 and B (192.0.2.2) blocks on it; A's unlock grants it to
// B, whose GRANTED_MSG is sent and awaits its GRANTED_RES.
class NlmPendingGrantTest : public NlmServiceTest {
 protected:
  void GrantToB() {
    ASSERT_EQ(Lock(a_, held_).stat, NLM4_GRANTED);
    ASSERT_EQ(Lock(b_, wanted_).stat, NLM4_BLOCKED);
    Unlock(a_, held_);
    RunFor(std::chrono::milliseconds(10));
    ASSERT_EQ(caller_.sent.size(), 1u);
  }

  const rpc::CallContext a_ = From("192.0.2.1"), b_ = From("192.0.2.2");
  const nlm4_lockargs held_ = LockArgs("client-a", 1, 0, 10);
  const nlm4_lockargs wanted_ = LockArgs("client-b", 2, 0, 10, true);
};

TEST_F(NlmPendingGrantTest, ACancelledGrantIsNotAnnouncedAgain) {
  GrantToB();  // Its GRANTED_RES never comes.
  nlm4_cancargs cancel{"c", true, true, wanted_.alock};
  EXPECT_EQ(RunCoroutine(io_, service_->Cancel(b_, cancel)).stat, NLM4_GRANTED);
  EXPECT_EQ(locks_.Counts().locks, 0u);
  // The same owner queues again behind a new holder: nothing more is sent for the old grant.
  ASSERT_EQ(Lock(a_, held_).stat, NLM4_GRANTED);
  ASSERT_EQ(Lock(b_, wanted_).stat, NLM4_BLOCKED);
  RunFor(std::chrono::milliseconds(300));
  EXPECT_EQ(caller_.sent.size(), 1u);
  EXPECT_EQ(service_->stats().callbacks_failed, 0u) << "nothing to revoke: the grant was gone";
  EXPECT_EQ(locks_.ListWaiters().size(), 1u);
}

TEST_F(NlmPendingGrantTest, ACancelRightAfterAnAcceptedGrantKeepsTheLock) {
  GrantToB();
  service_->GrantedRes(b_, nlm4_res{GrantedArgs(caller_.sent[0]).cookie, NLM4_GRANTED});
  // The client's CANCEL is handled before the delivering callback resumes (it runs on another
  // context here, so the service's own context has not run since the GRANTED_RES): the client
  // accepted the grant already, so it holds the lock and the CANCEL finds nothing to undo.
  asio::io_context elsewhere;
  nlm4_cancargs cancel{"c", true, true, wanted_.alock};
  EXPECT_EQ(RunCoroutine(elsewhere, service_->Cancel(b_, cancel)).stat, NLM4_GRANTED);
  RunFor(std::chrono::milliseconds(100));
  EXPECT_EQ(service_->stats().callbacks_acknowledged, 1u);
  EXPECT_EQ(service_->stats().callbacks_failed, 0u);
  EXPECT_EQ(caller_.sent.size(), 1u);
  ASSERT_EQ(locks_.ListLocks().size(), 1u);
  EXPECT_EQ(locks_.ListLocks()[0].owner.host.value(), "192.0.2.2");
  EXPECT_EQ(locks_.ListWaiters().size(), 0u);
}

TEST_F(NlmPendingGrantTest, UnlockAndFreeAllStopTheCallbackOfAGrantTheyTookBack) {
  GrantToB();
  auto a = a_, b = b_;
  auto held = held_, wanted = wanted_;
  Unlock(b, wanted);
  RunFor(std::chrono::milliseconds(300));
  EXPECT_EQ(caller_.sent.size(), 1u);

  ASSERT_EQ(Lock(a, held).stat, NLM4_GRANTED);
  ASSERT_EQ(Lock(b, wanted).stat, NLM4_BLOCKED);
  Unlock(a, held);
  RunFor(std::chrono::milliseconds(10));
  ASSERT_EQ(caller_.sent.size(), 2u);
  RunCoroutine(io_, service_->FreeAll(b, nlm4_notify{"client-b", 4}));
  RunFor(std::chrono::milliseconds(300));
  EXPECT_EQ(caller_.sent.size(), 2u);
  EXPECT_EQ(service_->stats().callbacks_failed, 0u);
  EXPECT_EQ(locks_.Counts().locks, 0u);
}

TEST_F(NlmPendingGrantTest, TheOwnersOwnLockSettlesItsPendingGrantAndStopsTheCallback) {
  GrantToB();  // Its GRANTED_RES never comes.
  // The client polls with the same LOCK (the lock manager reports the pending grant it settled).
  auto again = wanted_;
  again.block = false;
  EXPECT_EQ(Lock(b_, again).stat, NLM4_GRANTED);
  RunFor(std::chrono::milliseconds(300));
  EXPECT_EQ(caller_.sent.size(), 1u) << "no retry for a grant the client holds already";
  EXPECT_EQ(service_->stats().callbacks_failed, 0u);
  ASSERT_EQ(locks_.ListLocks().size(), 1u);
  EXPECT_EQ(locks_.ListLocks()[0].owner.host.value(), "192.0.2.2");
  EXPECT_EQ(locks_.Counts().pending_grants, 0u);
}

TEST_F(NlmPendingGrantTest, AnotherOwnersCancelLeavesTheCallbackRunning) {
  GrantToB();
  // The same range from a third host, cancelled: B's grant is not that host's to stop.
  auto c = From("192.0.2.3");
  auto third = LockArgs("client-c", 3, 0, 10, true);
  ASSERT_EQ(Lock(c, third).stat, NLM4_BLOCKED);
  nlm4_cancargs cancel{"c", true, true, third.alock};
  EXPECT_EQ(RunCoroutine(io_, service_->Cancel(c, cancel)).stat, NLM4_GRANTED);
  service_->GrantedRes(b_, nlm4_res{GrantedArgs(caller_.sent[0]).cookie, NLM4_GRANTED});
  RunFor(std::chrono::milliseconds(20));
  EXPECT_EQ(service_->stats().callbacks_acknowledged, 1u);
}

TEST_F(NlmServiceTest, ShutdownDuringAGrantedMsgCallDoesNotWaitForItsGrantedRes) {
  NlmOptions options = TestOptions();
  options.callback_deadline = std::chrono::seconds(30);
  MakeService(options);
  auto a = From("192.0.2.1"), b = From("192.0.2.2");
  auto held = LockArgs("client-a", 1, 0, 10);
  ASSERT_EQ(Lock(a, held).stat, NLM4_GRANTED);
  ASSERT_EQ(Lock(b, LockArgs("client-b", 2, 0, 10, true)).stat, NLM4_BLOCKED);
  // Shutdown runs up to its wait while the GRANTED_MSG call is out (on another context, so
  // that it runs inside the call); the call then comes back answered.
  asio::io_context elsewhere;
  bool shut_down = false;
  caller_.on_call = [&](const FakeCaller::Sent&) {
    asio::co_spawn(elsewhere, service_->Shutdown(), [&](std::exception_ptr) { shut_down = true; });
    elsewhere.poll();
  };
  Unlock(a, held);
  const auto started = std::chrono::steady_clock::now();
  for (int i = 0; i < 1400 && !shut_down; ++i) {
    RunFor(std::chrono::milliseconds(5));
    elsewhere.restart();
    elsewhere.poll();
  }
  EXPECT_TRUE(shut_down);
  // Not the 30 s a GRANTED_RES would have been awaited.
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(2));
  EXPECT_EQ(caller_.sent.size(), 1u);
}

TEST_F(NlmServiceTest, ReleasingAHostByNameReportsItsStateAndTheWaitersItGranted) {
  auto a = From("192.0.2.1"), b = From("192.0.2.2"), c = From("192.0.2.3");
  ASSERT_EQ(Lock(a, LockArgs("client-a", 1, 0, 10)).stat, NLM4_GRANTED);
  ASSERT_EQ(Lock(a, LockArgs("client-a", 1, 20, 10)).stat, NLM4_GRANTED);
  ASSERT_EQ(Lock(b, LockArgs("client-b", 2, 0, 10, true)).stat, NLM4_BLOCKED);
  // A waits on another file behind C (behind B, which waits for A, it would be a deadlock).
  ASSERT_EQ(Lock(c, LockArgs("client-c", 3, 0, 1, false, "other")).stat, NLM4_GRANTED);
  ASSERT_EQ(Lock(a, LockArgs("client-a", 1, 0, 1, true, "other")).stat, NLM4_BLOCKED);
  // By its caller_name label: the host keyed by its address goes.
  const HostsReleased released = service_->ReleaseHosts("client-a");
  EXPECT_EQ(released.hosts, 1u);
  EXPECT_EQ(released.locks, 2u);
  EXPECT_EQ(released.shares, 0u);
  EXPECT_EQ(released.waiters, 1u);
  EXPECT_EQ(released.waiters_granted, 1u);
  EXPECT_EQ(service_->ReleaseHosts("no-such-host").hosts, 0u);
  RunFor(std::chrono::milliseconds(10));
  ASSERT_EQ(caller_.sent.size(), 1u);  // B's GRANTED.
  EXPECT_EQ(caller_.sent[0].client.address.to_string(), "192.0.2.2");
}

TEST_F(NlmServiceTest, AGrantRefusedByGrantedResIsTakenBackAndCountedRefused) {
  auto held = HoldWithWaiters(2);
  caller_.on_call = [this](const FakeCaller::Sent& sent) {
    const bool to_b = sent.client.address.to_string() == "192.0.2.2";
    service_->GrantedRes(From(to_b ? "192.0.2.2" : "192.0.2.3"),
                         nlm4_res{GrantedArgs(sent).cookie, to_b ? NLM4_DENIED : NLM4_GRANTED});
  };
  Unlock(From("192.0.2.1"), held);
  RunFor(std::chrono::milliseconds(100));
  // One call each: a refusal is final, not retried.
  ASSERT_EQ(caller_.sent.size(), 2u);
  EXPECT_EQ(service_->stats().callbacks_refused, 1u);
  EXPECT_EQ(service_->stats().callbacks_failed, 0u);
  EXPECT_EQ(service_->stats().callbacks_acknowledged, 1u);
  ASSERT_EQ(locks_.ListLocks().size(), 1u);
  EXPECT_EQ(locks_.ListLocks()[0].owner.host.value(), "192.0.2.3");
}

// GRANTED rather than GRANTED_MSG: the client's answer comes in the reply.
class NlmGrantedReplyTest : public NlmServiceTest {
 protected:
  NlmGrantedReplyTest() {
    NlmOptions options = TestOptions();
    options.granted_msg = false;
    MakeService(options);
  }

  // A holds the range, B waits for it; A's unlock grants it to B and calls B back.
  void GrantToB() {
    Unlock(From("192.0.2.1"), HoldWithWaiters(1));
    RunFor(std::chrono::milliseconds(200));
  }
};

TEST_F(NlmGrantedReplyTest, AGrantRefusedInTheReplyIsTakenBackAndCountedRefused) {
  caller_.granted_answer = NLM4_DENIED;
  GrantToB();
  ASSERT_EQ(caller_.sent.size(), 1u);
  EXPECT_EQ(caller_.sent[0].procedure, NLM_GRANTED);
  EXPECT_EQ(service_->stats().callbacks_refused, 1u);
  EXPECT_EQ(service_->stats().callbacks_failed, 0u);
  EXPECT_EQ(locks_.Counts().locks, 0u);
  EXPECT_EQ(locks_.ListWaiters().size(), 0u);
}

TEST_F(NlmGrantedReplyTest, AGrantAcknowledgedInTheReplyIsKept) {
  caller_.granted_answer = NLM4_GRANTED;
  GrantToB();
  EXPECT_EQ(caller_.sent.size(), 1u);
  EXPECT_EQ(service_->stats().callbacks_acknowledged, 1u);
  EXPECT_EQ(service_->stats().callbacks_refused, 0u);
  ASSERT_EQ(locks_.ListLocks().size(), 1u);
  EXPECT_EQ(locks_.ListLocks()[0].owner.host.value(), "192.0.2.2");
}

TEST_F(NlmGrantedReplyTest, AClientInGraceUntilTheLastAttemptIsCountedFailedNotRefused) {
  caller_.granted_answer = NLM4_DENIED_GRACE_PERIOD;
  GrantToB();
  EXPECT_EQ(caller_.sent.size(), 2u) << "DENIED_GRACE_PERIOD is retried";
  EXPECT_EQ(service_->stats().callbacks_refused, 0u);
  EXPECT_EQ(service_->stats().callbacks_failed, 1u);
  EXPECT_EQ(locks_.Counts().locks, 0u);
}

}  // namespace
}  // namespace nlockd::nlm
