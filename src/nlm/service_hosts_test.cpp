// SPDX-License-Identifier: Apache-2.0
// The status monitor's reboot callback (procedure 16) as NLM-only mode takes it from the
// system's statd: only hosts whose known NSM state differs from the notified one are released.

#include <gtest/gtest.h>

#include "nlm/service.hpp"
#include "nlm/testing/service_test_fixture.hpp"
#include "testutil/captured_log.hpp"

namespace nlockd::nlm {
namespace {

using test_support::GrantedArgs;
using test_support::NlmServiceTest;
using test_support::OwnerLocks;
using testutil::RunCoroutine;

class StatusCallbackTest : public NlmServiceTest {
 protected:
  // From the co-resident statd: loopback, a reserved port.
  void Notify(const char* mon_name, int32_t state) {
    service_->SmNotify(From("127.0.0.1", 4, 700), nlm_sm_status{mon_name, state, {}});
  }

  nlm4_lockargs LockUnder(int32_t state, const char* caller, int32_t svid, uint64_t offset) {
    nlm4_lockargs args = LockArgs(caller, svid, offset, 10);
    args.state = state;
    return args;
  }
};

TEST_F(StatusCallbackTest, ANewStateReleasesTheHost) {
  ASSERT_EQ(Lock(From("192.0.2.1"), LockUnder(3, "client-a", 1, 0)).stat, NLM4_GRANTED);
  ASSERT_EQ(Lock(From("192.0.2.2"), LockUnder(3, "client-b", 2, 20)).stat, NLM4_GRANTED);
  Notify("client-a", 5);
  EXPECT_EQ(OwnerLocks(locks_, "192.0.2.1"), "");
  EXPECT_EQ(OwnerLocks(locks_, "192.0.2.2"), "X [20,29]");
  EXPECT_EQ(service_->stats().hosts_released, 1u);
  EXPECT_EQ(caller_.forgotten, std::vector<std::string>{"192.0.2.1"});
}

TEST_F(StatusCallbackTest, AHostThatNeverSaidItsStateIsReleased) {
  // lockargs.state 0 is "not said": any notified state is news.
  ASSERT_EQ(Lock(From("192.0.2.1"), LockUnder(0, "client-a", 1, 0)).stat, NLM4_GRANTED);
  Notify("client-a", 5);
  EXPECT_EQ(locks_.Counts().locks, 0u);
}

TEST_F(StatusCallbackTest, AReplayedCallbackReleasesNothing) {
  auto a = From("192.0.2.1");
  ASSERT_EQ(Lock(a, LockUnder(3, "client-a", 1, 0)).stat, NLM4_GRANTED);
  Notify("client-a", 5);
  ASSERT_EQ(service_->stats().hosts_released, 1u);
  // Replayed before the client locks again: the host holds nothing.
  Notify("client-a", 5);
  EXPECT_EQ(service_->stats().hosts_released, 1u);
  // The rebooted client locks under its new state; the same callback again leaves that alone.
  ASSERT_EQ(Lock(a, LockUnder(5, "client-a", 1, 0)).stat, NLM4_GRANTED);
  Notify("client-a", 5);
  Notify("CLIENT-A", 5);
  EXPECT_EQ(OwnerLocks(locks_, "192.0.2.1"), "X [0,9]");
  EXPECT_EQ(service_->stats().hosts_released, 1u);
}

TEST_F(StatusCallbackTest, LocksTakenUnderTheNewStateBeforeTheCallbackSurvive) {
  // The client held a lock under state 3 from one address, rebooted, came back on another
  // address and locked under state 5 before its statd's notification reached us.
  ASSERT_EQ(Lock(From("192.0.2.1"), LockUnder(3, "client-a", 1, 0)).stat, NLM4_GRANTED);
  ASSERT_EQ(Lock(From("192.0.2.9"), LockUnder(5, "client-a", 1, 20)).stat, NLM4_GRANTED);
  Notify("client-a", 5);
  EXPECT_EQ(OwnerLocks(locks_, "192.0.2.1"), "");
  EXPECT_EQ(OwnerLocks(locks_, "192.0.2.9"), "X [20,29]");
  EXPECT_EQ(service_->stats().hosts_released, 1u);
}

TEST_F(StatusCallbackTest, ALateCallbackLeavesWhatTheClientLockedUnderItsNewState) {
  // Same address: the host entry now says state 5, so the callback for 5 releases nothing.
  // (The lock of state 3 is not told apart from it: the table keeps one state per host.)
  auto a = From("192.0.2.1");
  ASSERT_EQ(Lock(a, LockUnder(3, "client-a", 1, 0)).stat, NLM4_GRANTED);
  ASSERT_EQ(Lock(a, LockUnder(5, "client-a", 2, 20)).stat, NLM4_GRANTED);
  Notify("client-a", 5);
  EXPECT_NE(OwnerLocks(locks_, "192.0.2.1").find("X [20,29]"), std::string::npos);
  EXPECT_EQ(service_->stats().hosts_released, 0u);
}

TEST_F(StatusCallbackTest, ALaterRebootReleasesAgain) {
  auto a = From("192.0.2.1");
  ASSERT_EQ(Lock(a, LockUnder(3, "client-a", 1, 0)).stat, NLM4_GRANTED);
  Notify("client-a", 5);
  ASSERT_EQ(Lock(a, LockUnder(5, "client-a", 1, 0)).stat, NLM4_GRANTED);
  Notify("client-a", 7);
  EXPECT_EQ(locks_.Counts().locks, 0u);
  EXPECT_EQ(service_->stats().hosts_released, 2u);
}

TEST_F(StatusCallbackTest, ACallbackByCallerNameKeyComparesTheSameState) {
  NlmOptions options = TestOptions();
  options.host_key = NlmOptions::HostKey::kCallerName;
  MakeService(options);
  ASSERT_EQ(Lock(From("192.0.2.1"), LockUnder(5, "client-a", 1, 0)).stat, NLM4_GRANTED);
  Notify("client-a", 5);
  EXPECT_EQ(OwnerLocks(locks_, "client-a@192.0.2.1"), "X [0,9]");
  Notify("client-a", 6);
  EXPECT_EQ(OwnerLocks(locks_, "client-a@192.0.2.1"), "");
}

class CallerNameKeyTest : public StatusCallbackTest {
 protected:
  CallerNameKeyTest() {
    NlmOptions options = TestOptions();
    options.host_key = NlmOptions::HostKey::kCallerName;
    MakeService(options);
  }
};

TEST_F(CallerNameKeyTest, AnotherAddressSendingTheNameCannotActForTheHost) {
  const auto a = From("192.0.2.1"), b = From("192.0.2.2");
  const nlm4_lockargs held = LockArgs("client-a", 1, 0, 10);
  const nlm4_lockargs waiting = LockArgs("client-a", 2, 0, 10, true);
  nlm4_shareargs share{"s", nlm4_share{"client-a", "file2", "share-owner", fsm_DW, fsa_R}, false};
  ASSERT_EQ(Lock(a, held).stat, NLM4_GRANTED);
  ASSERT_EQ(Lock(a, waiting).stat, NLM4_BLOCKED);
  ASSERT_EQ(RunCoroutine(io_, service_->Share(a, share)).stat, NLM4_GRANTED);
  // B sends A's own descriptions: each names another host, (client-a, 192.0.2.2).
  Unlock(b, held);
  RunCoroutine(io_, service_->Cancel(b, nlm4_cancargs{"c", true, true, waiting.alock}));
  RunCoroutine(io_, service_->Unshare(b, share));
  EXPECT_EQ(Lock(b, held).stat, NLM4_DENIED) << "not granted as A on A's own range";
  EXPECT_EQ(OwnerLocks(locks_, "client-a@192.0.2.1"), "X [0,9]");
  EXPECT_EQ(OwnerLocks(locks_, "client-a@192.0.2.2"), "");
  const lock::LockCounts counts = locks_.Counts();
  EXPECT_EQ(counts.waiters, 1u);
  EXPECT_EQ(counts.shares, 1u);
  // A itself still can.
  EXPECT_EQ(Unlock(a, held).stat, NLM4_GRANTED);
  RunFor(std::chrono::milliseconds(20));
  ASSERT_GE(caller_.sent.size(), 1u) << "A's waiter is granted";
  EXPECT_EQ(GrantedArgs(caller_.sent[0]).alock.svid, 2);
}

TEST_F(CallerNameKeyTest, TheHostIsMonitoredByItsName) {
  ASSERT_EQ(Lock(From("192.0.2.1"), LockArgs("client-a", 1, 0, 10)).stat, NLM4_GRANTED);
  ASSERT_EQ(Lock(From("192.0.2.9"), LockArgs("client-a", 2, 20, 10)).stat, NLM4_GRANTED);
  ASSERT_EQ(monitor_.requests.size(), 2u);
  EXPECT_EQ(monitor_.requests[0].host, "client-a");
  EXPECT_EQ(monitor_.requests[1].host, "client-a");
  EXPECT_EQ(monitor_.requests[1].address.to_string(), "192.0.2.9");
}

TEST_F(CallerNameKeyTest, ARebootOfTheNameReleasesItFromEveryAddress) {
  ASSERT_EQ(Lock(From("192.0.2.1"), LockUnder(3, "client-a", 1, 0)).stat, NLM4_GRANTED);
  ASSERT_EQ(Lock(From("192.0.2.9"), LockUnder(3, "client-a", 2, 20)).stat, NLM4_GRANTED);
  ASSERT_EQ(Lock(From("192.0.2.2"), LockUnder(3, "client-b", 3, 40)).stat, NLM4_GRANTED);
  Notify("client-a", 5);
  EXPECT_EQ(OwnerLocks(locks_, "client-a@192.0.2.1"), "");
  EXPECT_EQ(OwnerLocks(locks_, "client-a@192.0.2.9"), "");
  EXPECT_EQ(OwnerLocks(locks_, "client-b@192.0.2.2"), "X [40,49]");
  EXPECT_EQ(service_->stats().hosts_released, 2u);
}

TEST_F(CallerNameKeyTest, FreeAllReleasesTheNameFromTheCallersAddressOnly) {
  ASSERT_EQ(Lock(From("192.0.2.1"), LockUnder(3, "client-a", 1, 0)).stat, NLM4_GRANTED);
  ASSERT_EQ(Lock(From("192.0.2.9"), LockUnder(3, "client-a", 2, 20)).stat, NLM4_GRANTED);
  RunCoroutine(io_, service_->FreeAll(From("192.0.2.1"), nlm4_notify{"client-a", 5}));
  EXPECT_EQ(OwnerLocks(locks_, "client-a@192.0.2.1"), "");
  EXPECT_EQ(OwnerLocks(locks_, "client-a@192.0.2.9"), "X [20,29]");
}

TEST_F(CallerNameKeyTest, ANameInAnotherCaseIsTheSameHost) {
  // The lock table keys the host by its name folded as SameHostName matches names: the same
  // client sending "Client-A" and then "client-a" is one host, its own locks do not conflict.
  const auto a = From("192.0.2.1");
  nlm4_lockargs first = LockUnder(3, "Client-A", 1, 0), second = LockUnder(3, "client-a", 1, 5);
  first.alock.oh = second.alock.oh = "1@client-a";  // One process of the client: one handle.
  ASSERT_EQ(Lock(a, first).stat, NLM4_GRANTED);
  ASSERT_EQ(Lock(a, second).stat, NLM4_GRANTED);
  EXPECT_EQ(OwnerLocks(locks_, "client-a@192.0.2.1"), "X [0,14]");
  EXPECT_EQ(locks_.hosts().size(), 1u);
  EXPECT_EQ(monitor_.requests.size(), 1u) << "monitored once";
}

TEST_F(CallerNameKeyTest, FreeAllAndReleaseFindTheHostWhateverTheCaseOfTheName) {
  const auto a = From("192.0.2.1");
  ASSERT_EQ(Lock(a, LockUnder(3, "Client-A", 1, 0)).stat, NLM4_GRANTED);
  RunCoroutine(io_, service_->FreeAll(a, nlm4_notify{"CLIENT-a", 5}));
  EXPECT_EQ(locks_.Counts().locks, 0u);
  ASSERT_EQ(Lock(a, LockUnder(5, "client-a", 1, 0)).stat, NLM4_GRANTED);
  EXPECT_EQ(service_->ReleaseHosts("CLIENT-A").locks, 1u);
  EXPECT_EQ(locks_.Counts().locks, 0u);
  EXPECT_EQ(service_->stats().hosts_released, 2u);
}

TEST_F(NlmServiceTest, RefusedCallsFromTheNetworkLogTenLinesThenOneASecond) {
  // Each FREE_ALL naming another host used to write a warning: a flood of them filled the log.
  testutil::CapturedLog log;
  ASSERT_EQ(Lock(From("192.0.2.1"), LockArgs("client-a", 1, 0, 10)).stat, NLM4_GRANTED);
  for (int i = 0; i < 50; ++i) {
    RunCoroutine(io_, service_->FreeAll(From("192.0.2.66"), nlm4_notify{"client-a", 5}));
    service_->SmNotify(From("192.0.2.66", 4, 700), nlm_sm_status{"client-a", 5, {}});
  }
  EXPECT_EQ(service_->stats().spoof_rejections, 100u);
  EXPECT_EQ(locks_.Counts().locks, 1u);
  const size_t lines = log.Count(" refused: ");
  EXPECT_GE(lines, 10u);
  EXPECT_LE(lines, 12u) << "a burst of 10, then 1 a second: " << log.text();
}

}  // namespace
}  // namespace nlockd::nlm
