// SPDX-License-Identifier: Apache-2.0
// The lock journal: every change of the lock and share table is recorded, in order, before
// the call is answered and before a granted waiter is called back; a failed write fails closed.
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <gtest/gtest.h>

#include "nlm/service.hpp"
#include "nlm/testing/service_test_fixture.hpp"

namespace nlockd::nlm {
namespace {

using test_support::FakeCaller;
using test_support::GrantedArgs;
using test_support::NlmServiceTest;
using test_support::OwnerLocks;
using test_support::RecordingJournal;
using test_support::Render;
using test_support::RunCoroutine;

class NlmJournalTest : public NlmServiceTest {
 protected:
  NlmJournalTest() { service_->set_journal(&journal_); }

  // Runs `call` and checks that every journal write happened before it was answered.
  template <typename T>
  T Answered(asio::awaitable<T> call) {
    bool answered = false;
    journal_.on_record = [&](const std::vector<JournalEntry>&) {
      EXPECT_FALSE(answered) << "journaled after the answer";
    };
    T result = RunCoroutine(io_, Mark(std::move(call), &answered));
    journal_.on_record = nullptr;
    return result;
  }
  template <typename T>
  static asio::awaitable<T> Mark(asio::awaitable<T> call, bool* answered) {
    T result = co_await std::move(call);
    *answered = true;
    co_return result;
  }

  nlm4_res JLock(const rpc::CallContext& context, nlm4_lockargs args, bool monitor = true) {
    return Answered(service_->Lock(context, std::move(args), monitor));
  }
  nlm4_res JUnlock(const rpc::CallContext& context, const nlm4_lockargs& lock) {
    return Answered(service_->Unlock(context, nlm4_unlockargs{lock.cookie, lock.alock}));
  }

  RecordingJournal journal_;
};

TEST_F(NlmJournalTest, LockReclaimAndNmLockAreRecordedBeforeTheAnswerAndBlocksAreNot) {
  auto a = From("192.0.2.1"), b = From("192.0.2.2");
  EXPECT_EQ(JLock(a, LockArgs("client-a", 1, 0, 10)).stat, NLM4_GRANTED);
  EXPECT_EQ(JLock(b, LockArgs("client-b", 2, 100, 10), false).stat, NLM4_GRANTED);
  EXPECT_EQ(JLock(b, LockArgs("client-b", 3, 0, 10)).stat, NLM4_DENIED);
  EXPECT_EQ(JLock(b, LockArgs("client-b", 3, 0, 10, true)).stat, NLM4_BLOCKED);
  EXPECT_EQ(Render(journal_.batches),
            "locks f=file1 h=192.0.2.1 svid=1 | locks f=file1 h=192.0.2.2 svid=2");

  journal_.batches.clear();
  locks_.StartGrace(lock::GraceMode::kClassic, std::chrono::seconds(60));
  auto reclaim = LockArgs("client-a", 4, 200, 10);
  reclaim.reclaim = true;
  EXPECT_EQ(JLock(a, reclaim).stat, NLM4_GRANTED);
  EXPECT_EQ(JLock(a, LockArgs("client-a", 5, 300, 10)).stat, NLM4_DENIED_GRACE_PERIOD);
  EXPECT_EQ(Render(journal_.batches), "locks f=file1 h=192.0.2.1 svid=4");
}

TEST_F(NlmJournalTest, AFailedWriteUndoesTheLockAndAnswersDeniedNolocks) {
  auto a = From("192.0.2.1");
  journal_.succeed = false;
  EXPECT_EQ(JLock(a, LockArgs("client-a", 1, 0, 10)).stat, NLM4_DENIED_NOLOCKS);
  EXPECT_EQ(locks_.Counts().locks, 0u);
  RunFor(std::chrono::milliseconds(10));
  EXPECT_EQ(service_->stats().journal_failures, 2u) << "the lock's write and its undo's";
  // The undo is recorded too (best effort), so that a later good write sees no lock.
  EXPECT_EQ(Render(journal_.batches),
            "locks f=file1 h=192.0.2.1 svid=1 | locks f=file1 h=192.0.2.1 svid=1");
  journal_.succeed = true;
  EXPECT_EQ(JLock(a, LockArgs("client-a", 1, 0, 10)).stat, NLM4_GRANTED);
}

// Spawns a LOCK and notes its answer in *stat when it comes.
asio::awaitable<void> LockInto(NlmService& service, rpc::CallContext context, nlm4_lockargs args,
                               nlm4_stats* stat) {
  nlm4_res res = co_await service.Lock(context, std::move(args), true);
  *stat = res.stat;
}

TEST_F(NlmJournalTest, LocksOfOneTurnShareOneWriteAndAllFailClosedWhenItFails) {
  auto a = From("192.0.2.1"), b = From("192.0.2.2");
  nlm4_stats first = NLM4_FAILED, second = NLM4_FAILED;
  // Answered only after the write: the two calls are in flight together, as calls read from
  // the same socket are.
  asio::co_spawn(io_, LockInto(*service_, a, LockArgs("client-a", 1, 0, 10), &first),
                 asio::detached);
  asio::co_spawn(io_, LockInto(*service_, b, LockArgs("client-b", 2, 100, 10), &second),
                 asio::detached);
  RunFor(std::chrono::milliseconds(10));
  EXPECT_EQ(first, NLM4_GRANTED);
  EXPECT_EQ(second, NLM4_GRANTED);
  EXPECT_EQ(Render(journal_.batches),
            "locks f=file1 h=192.0.2.1 svid=1; locks f=file1 h=192.0.2.2 svid=2");

  journal_.batches.clear();
  journal_.succeed = false;
  first = second = NLM4_FAILED;
  asio::co_spawn(io_, LockInto(*service_, a, LockArgs("client-a", 1, 20, 10), &first),
                 asio::detached);
  asio::co_spawn(io_, LockInto(*service_, b, LockArgs("client-b", 2, 120, 10), &second),
                 asio::detached);
  RunFor(std::chrono::milliseconds(10));
  EXPECT_EQ(first, NLM4_DENIED_NOLOCKS);
  EXPECT_EQ(second, NLM4_DENIED_NOLOCKS);
  EXPECT_EQ(OwnerLocks(locks_, "192.0.2.1"), "X [0,9]") << "the failed lock is undone";
  EXPECT_EQ(OwnerLocks(locks_, "192.0.2.2"), "X [100,109]");
  EXPECT_EQ(service_->stats().journal_failures, 3u) << "the batch's write and the two undos'";
}

TEST_F(NlmJournalTest, AFailedUpgradeKeepsTheSharedLockItUpgraded) {
  auto a = From("192.0.2.1");
  auto shared = LockArgs("client-a", 1, 0, 101);
  shared.exclusive = false;
  ASSERT_EQ(JLock(a, shared).stat, NLM4_GRANTED);
  ASSERT_EQ(JLock(a, LockArgs("client-a", 1, 200, 10)).stat, NLM4_GRANTED);
  journal_.succeed = false;
  // The upgrade, and a lock overlapping both the shared lock and free bytes.
  EXPECT_EQ(JLock(a, LockArgs("client-a", 1, 0, 101)).stat, NLM4_DENIED_NOLOCKS);
  EXPECT_EQ(OwnerLocks(locks_, "192.0.2.1"), "S [0,100], X [200,209]");
  EXPECT_EQ(JLock(a, LockArgs("client-a", 1, 50, 100)).stat, NLM4_DENIED_NOLOCKS);
  EXPECT_EQ(OwnerLocks(locks_, "192.0.2.1"), "S [0,100], X [200,209]");
  RunFor(std::chrono::milliseconds(10));
  EXPECT_EQ(OwnerLocks(locks_, "192.0.2.1"), "S [0,100], X [200,209]");
}

TEST_F(NlmJournalTest, AFailedDowngradeThatAnotherOwnerUsedMeanwhileStandsAndIsGranted) {
  auto a = From("192.0.2.1");
  ASSERT_EQ(JLock(a, LockArgs("client-a", 1, 0, 10)).stat, NLM4_GRANTED);
  journal_.succeed = false;
  auto downgrade = LockArgs("client-a", 1, 0, 10);
  downgrade.exclusive = false;
  // While the write is in flight, another client takes a shared lock on what a gave up.
  lock::LockRequest other;
  other.file = lock::FileKey("file1");
  other.owner = lock::LockOwner{lock::HostId("192.0.2.2"), 2, lock::OwnerHandle("2@b")};
  other.length = 10;
  other.type = lock::LockType::kShared;
  journal_.on_record = [&](const std::vector<JournalEntry>&) {
    EXPECT_EQ(locks_.Lock(other).status, lock::LockStatus::kGranted);
    journal_.on_record = nullptr;
  };
  EXPECT_EQ(RunCoroutine(io_, service_->Lock(a, downgrade, true)).stat, NLM4_GRANTED)
      << "a's exclusive lock cannot come back; the downgrade everyone saw stands";
  EXPECT_EQ(OwnerLocks(locks_, "192.0.2.1"), "S [0,9]");
  EXPECT_EQ(OwnerLocks(locks_, "192.0.2.2"), "S [0,9]");
}

TEST_F(NlmJournalTest, AFailedShareChangeKeepsTheReservationItReplaced) {
  auto a = From("192.0.2.1");
  nlm4_shareargs share{"s1", {"client-a", "file1", "oh-a", fsm_DW, fsa_R}, false};
  ASSERT_EQ(Answered(service_->Share(a, share)).stat, NLM4_GRANTED);
  journal_.succeed = false;
  nlm4_shareargs wider{"s2", {"client-a", "file1", "oh-a", fsm_DRW, fsa_RW}, false};
  EXPECT_EQ(Answered(service_->Share(a, wider)).stat, NLM4_DENIED_NOLOCKS);
  std::vector<lock::ShareInfo> shares = locks_.ListShares();
  ASSERT_EQ(shares.size(), 1u);
  EXPECT_EQ(shares[0].access, lock::ShareAccess::kRead);
  EXPECT_EQ(shares[0].deny, lock::ShareDeny::kWrite);
}

TEST_F(NlmJournalTest, UnlockRecordsTheOwnerThenTheWaiterItGrantedBeforeTheCallback) {
  auto a = From("192.0.2.1"), b = From("192.0.2.2");
  auto held = LockArgs("client-a", 1, 0, 10);
  ASSERT_EQ(JLock(a, held).stat, NLM4_GRANTED);
  ASSERT_EQ(JLock(b, LockArgs("client-b", 2, 0, 10, true)).stat, NLM4_BLOCKED);
  journal_.batches.clear();
  EXPECT_EQ(JUnlock(a, held).stat, NLM4_GRANTED);
  EXPECT_EQ(Render(journal_.batches),
            "locks f=file1 h=192.0.2.1 svid=1; locks f=file1 h=192.0.2.2 svid=2");
  RunFor(std::chrono::milliseconds(10));
  ASSERT_GE(caller_.sent.size(), 1u) << "the GRANTED callback follows the write";
}

TEST_F(NlmJournalTest, AWaiterGrantThatCannotBeWrittenIsRevokedNotAnnounced) {
  auto a = From("192.0.2.1"), b = From("192.0.2.2");
  auto held = LockArgs("client-a", 1, 0, 10);
  ASSERT_EQ(JLock(a, held).stat, NLM4_GRANTED);
  ASSERT_EQ(JLock(b, LockArgs("client-b", 2, 0, 10, true)).stat, NLM4_BLOCKED);
  journal_.succeed = false;
  EXPECT_EQ(JUnlock(a, held).stat, NLM4_DENIED_GRACE_PERIOD) << "not written: try again";
  RunFor(std::chrono::milliseconds(50));
  EXPECT_TRUE(caller_.sent.empty());
  EXPECT_EQ(OwnerLocks(locks_, "192.0.2.1"), "X [0,9]");
  EXPECT_EQ(OwnerLocks(locks_, "192.0.2.2"), "");
  EXPECT_EQ(locks_.ListWaiters().size(), 0u);
}

TEST_F(NlmJournalTest, AnUnlockThatCannotBeWrittenIsRefusedAndUndone) {
  auto a = From("192.0.2.1");
  auto held = LockArgs("client-a", 1, 0, 100);
  ASSERT_EQ(JLock(a, held).stat, NLM4_GRANTED);
  journal_.succeed = false;
  // A whole unlock, and one that would split the lock: refused with the answer that makes a
  // client send its UNLOCK again later.
  EXPECT_EQ(JUnlock(a, held).stat, NLM4_DENIED_GRACE_PERIOD);
  EXPECT_EQ(OwnerLocks(locks_, "192.0.2.1"), "X [0,99]");
  EXPECT_EQ(JUnlock(a, LockArgs("client-a", 1, 10, 10)).stat, NLM4_DENIED_GRACE_PERIOD);
  EXPECT_EQ(OwnerLocks(locks_, "192.0.2.1"), "X [0,99]");
  RunFor(std::chrono::milliseconds(10));
  EXPECT_EQ(OwnerLocks(locks_, "192.0.2.1"), "X [0,99]");
  // Version 1 has the same code (nlm_denied_grace_period).
  EXPECT_EQ(JUnlock(From("192.0.2.1", NLM_VERS), held).stat, NLM4_DENIED_GRACE_PERIOD);
  journal_.succeed = true;
  EXPECT_EQ(JUnlock(a, held).stat, NLM4_GRANTED);
  EXPECT_EQ(locks_.Counts().locks, 0u);
}

TEST_F(NlmJournalTest, AnUnshareThatCannotBeWrittenIsRefusedAndUndone) {
  auto a = From("192.0.2.1");
  nlm4_shareargs share{"s1", {"client-a", "file1", "oh-a", fsm_DW, fsa_R}, false};
  ASSERT_EQ(Answered(service_->Share(a, share)).stat, NLM4_GRANTED);
  journal_.succeed = false;
  EXPECT_EQ(Answered(service_->Unshare(a, share)).stat, NLM4_DENIED_GRACE_PERIOD);
  ASSERT_EQ(locks_.ListShares().size(), 1u);
  journal_.succeed = true;
  EXPECT_EQ(Answered(service_->Unshare(a, share)).stat, NLM4_GRANTED);
  EXPECT_TRUE(locks_.ListShares().empty());
}

TEST_F(NlmJournalTest, CancelRecordsOnlyAGrantItUndid) {
  auto a = From("192.0.2.1"), b = From("192.0.2.2");
  auto held = LockArgs("client-a", 1, 0, 10);
  auto wanted = LockArgs("client-b", 2, 0, 10, true);
  ASSERT_EQ(JLock(a, held).stat, NLM4_GRANTED);
  ASSERT_EQ(JLock(b, wanted).stat, NLM4_BLOCKED);
  journal_.batches.clear();
  nlm4_cancargs cancel{"c", true, true, wanted.alock};
  EXPECT_EQ(Answered(service_->Cancel(b, cancel)).stat, NLM4_GRANTED);
  EXPECT_EQ(Render(journal_.batches), "") << "a queued waiter is not persisted";

  ASSERT_EQ(JLock(b, wanted).stat, NLM4_BLOCKED);
  JUnlock(a, held);
  RunFor(std::chrono::milliseconds(10));  // Granted; the callback awaits its GRANTED_RES.
  journal_.batches.clear();
  EXPECT_EQ(Answered(service_->Cancel(b, cancel)).stat, NLM4_GRANTED);
  EXPECT_EQ(Render(journal_.batches), "locks f=file1 h=192.0.2.2 svid=2");
}

TEST_F(NlmJournalTest, ARevokedGrantIsRecorded) {
  auto a = From("192.0.2.1"), b = From("192.0.2.2");
  auto held = LockArgs("client-a", 1, 0, 10);
  ASSERT_EQ(JLock(a, held).stat, NLM4_GRANTED);
  ASSERT_EQ(JLock(b, LockArgs("client-b", 2, 0, 10, true)).stat, NLM4_BLOCKED);
  caller_.reachable = false;
  journal_.batches.clear();
  Unlock(a, held);
  RunFor(std::chrono::milliseconds(300));
  EXPECT_EQ(service_->stats().callbacks_failed, 1u);
  EXPECT_EQ(Render(journal_.batches),
            "locks f=file1 h=192.0.2.1 svid=1; locks f=file1 h=192.0.2.2 svid=2 | "
            "locks f=file1 h=192.0.2.2 svid=2");
  EXPECT_EQ(locks_.Counts().locks, 0u);
}

TEST_F(NlmJournalTest, ShareAndUnshareAreRecordedAndAFailedShareIsUndone) {
  auto a = From("192.0.2.1");
  nlm4_shareargs share{"s1", {"client-a", "file1", "oh-a", fsm_DW, fsa_R}, false};
  EXPECT_EQ(Answered(service_->Share(a, share)).stat, NLM4_GRANTED);
  EXPECT_EQ(Answered(service_->Unshare(a, share)).stat, NLM4_GRANTED);
  EXPECT_EQ(Render(journal_.batches),
            "share f=file1 h=192.0.2.1 oh=oh-a | share f=file1 h=192.0.2.1 oh=oh-a");
  journal_.succeed = false;
  EXPECT_EQ(Answered(service_->Share(a, share)).stat, NLM4_DENIED_NOLOCKS);
  EXPECT_TRUE(locks_.ListShares().empty());
}

TEST_F(NlmJournalTest, FreeAllRecordsTheReleaseThenTheWaitersItGranted) {
  auto a = From("192.0.2.1"), b = From("192.0.2.2");
  ASSERT_EQ(JLock(a, LockArgs("client-a", 1, 0, 10)).stat, NLM4_GRANTED);
  ASSERT_EQ(JLock(b, LockArgs("client-b", 2, 0, 10, true)).stat, NLM4_BLOCKED);
  journal_.batches.clear();
  bool answered = false;
  journal_.on_record = [&](const std::vector<JournalEntry>&) { EXPECT_FALSE(answered); };
  RunCoroutine(io_, service_->FreeAll(a, nlm4_notify{"client-a", 5}));
  answered = true;
  EXPECT_EQ(Render(journal_.batches), "released h=192.0.2.1; locks f=file1 h=192.0.2.2 svid=2");
}

TEST_F(NlmJournalTest, AHostRebootAndGraceEndGrantsAreRecordedBeforeTheirCallbacks) {
  auto a = From("192.0.2.1"), b = From("192.0.2.2");
  ASSERT_EQ(JLock(a, LockArgs("client-a", 1, 0, 10)).stat, NLM4_GRANTED);
  ASSERT_EQ(JLock(b, LockArgs("client-b", 2, 0, 10, true)).stat, NLM4_BLOCKED);
  journal_.batches.clear();
  size_t sent_at_record = 99;
  journal_.on_record = [&](const std::vector<JournalEntry>&) {
    sent_at_record = caller_.sent.size();
  };
  EXPECT_EQ(service_->HostRebooted("client-a"), 1u);
  RunFor(std::chrono::milliseconds(10));
  EXPECT_EQ(Render(journal_.batches), "released h=192.0.2.1; locks f=file1 h=192.0.2.2 svid=2");
  EXPECT_EQ(sent_at_record, 0u);
  EXPECT_EQ(caller_.sent.size(), 1u);

  // Grants made outside a call (the server passes those of grace end to SendGrants).
  journal_.batches.clear();
  lock::WaiterGrant grant{lock::WaiterId(12345), lock::FileKey("g"),
                          lock::LockOwner{lock::HostId("h"), 3, lock::OwnerHandle("o")},
                          lock::ByteRange::FromOffsetLength(0, 1).value(), lock::LockType::kShared};
  service_->SendGrants(lock::Grants{grant});
  RunFor(std::chrono::milliseconds(10));
  EXPECT_EQ(Render(journal_.batches), "locks f=g h=h svid=3");
}

// Over a journal that records inline (the lock log), LOCK and UNLOCK of a monitored host are
// answered without a coroutine (the Try forms), their change written before the answer.
class NlmInlineJournalTest : public NlmJournalTest {
 protected:
  NlmInlineJournalTest() { journal_.writes_inline = true; }

  // LOCKs `args` through the coroutine form once, so that its host is monitored.
  void Monitor(const rpc::CallContext& context, const nlm4_lockargs& args) {
    nlm4_lockargs first = args;
    first.alock.l_offset = 1000;
    ASSERT_EQ(JLock(context, first).stat, NLM4_GRANTED);
    journal_.batches.clear();
  }
  // client-a's LOCK of [0,9] from a_, its host monitored already.
  nlm4_lockargs MonitoredLockOfA() {
    nlm4_lockargs args = LockArgs("client-a", 1, 0, 10);
    Monitor(a_, args);
    return args;
  }

  const rpc::CallContext a_ = From("192.0.2.1");
};

TEST_F(NlmInlineJournalTest, LockAndUnlockAreWrittenInlineBeforeTheirAnswer) {
  const rpc::CallContext& a = a_;
  nlm4_lockargs args = MonitoredLockOfA();
  nlm4_lockargs lock = args;
  std::optional<nlm4_res> res = service_->TryLock(a, lock, true);
  ASSERT_TRUE(res) << "answered inline";
  EXPECT_EQ(res->stat, NLM4_GRANTED);
  EXPECT_EQ(Render(journal_.batches), "locks f=file1 h=192.0.2.1 svid=1");

  nlm4_unlockargs unlock{args.cookie, args.alock};
  res = service_->TryUnlock(a, unlock);
  ASSERT_TRUE(res);
  EXPECT_EQ(res->stat, NLM4_GRANTED);
  EXPECT_EQ(Render(journal_.batches),
            "locks f=file1 h=192.0.2.1 svid=1 | locks f=file1 h=192.0.2.1 svid=1");
  EXPECT_EQ(OwnerLocks(locks_, "192.0.2.1"), "X [1000,1009]");
}

TEST_F(NlmInlineJournalTest, AFailedInlineWriteFailsClosedAsTheCoroutineFormDoes) {
  const rpc::CallContext& a = a_;
  nlm4_lockargs args = MonitoredLockOfA();
  journal_.succeed = false;
  nlm4_lockargs lock = args;
  std::optional<nlm4_res> res = service_->TryLock(a, lock, true);
  ASSERT_TRUE(res);
  EXPECT_EQ(res->stat, NLM4_DENIED_NOLOCKS);
  EXPECT_EQ(OwnerLocks(locks_, "192.0.2.1"), "X [1000,1009]") << "the lock is undone";

  journal_.succeed = true;
  lock = args;
  ASSERT_EQ(service_->TryLock(a, lock, true)->stat, NLM4_GRANTED);
  journal_.succeed = false;
  nlm4_unlockargs unlock{args.cookie, args.alock};
  res = service_->TryUnlock(a, unlock);
  ASSERT_TRUE(res);
  EXPECT_EQ(res->stat, NLM4_DENIED_GRACE_PERIOD) << "not written: the client tries again";
  EXPECT_EQ(OwnerLocks(locks_, "192.0.2.1"), "X [0,9], X [1000,1009]") << "the unlock is undone";
  RunFor(std::chrono::milliseconds(10));
  EXPECT_EQ(service_->stats().journal_failures, 4u) << "two calls' writes and their undos'";
}

TEST_F(NlmInlineJournalTest, AnInlineUnlockWritesTheWaiterItGrantedBeforeTheCallback) {
  const rpc::CallContext& a = a_;
  auto b = From("192.0.2.2");
  nlm4_lockargs held = MonitoredLockOfA();
  ASSERT_EQ(JLock(a, held).stat, NLM4_GRANTED);
  ASSERT_EQ(JLock(b, LockArgs("client-b", 2, 0, 10, true)).stat, NLM4_BLOCKED);
  journal_.batches.clear();
  caller_.sent.clear();
  nlm4_unlockargs unlock{held.cookie, held.alock};
  std::optional<nlm4_res> res = service_->TryUnlock(a, unlock);
  ASSERT_TRUE(res);
  EXPECT_EQ(res->stat, NLM4_GRANTED);
  EXPECT_EQ(Render(journal_.batches),
            "locks f=file1 h=192.0.2.1 svid=1; locks f=file1 h=192.0.2.2 svid=2");
  EXPECT_TRUE(caller_.sent.empty()) << "the callback runs on the executor, after the write";
  RunFor(std::chrono::milliseconds(10));
  ASSERT_GE(caller_.sent.size(), 1u);
}

TEST_F(NlmInlineJournalTest, AJournalThatCannotWriteInlineLeavesTheCallToTheCoroutineForm) {
  const rpc::CallContext& a = a_;
  nlm4_lockargs args = MonitoredLockOfA();
  journal_.writes_inline = false;
  nlm4_lockargs lock = args;
  EXPECT_FALSE(service_->TryLock(a, lock, true));
  EXPECT_EQ(lock.alock.fh, args.alock.fh) << "the arguments are left for the coroutine form";
  nlm4_unlockargs unlock{args.cookie, args.alock};
  EXPECT_FALSE(service_->TryUnlock(a, unlock));
  EXPECT_EQ(unlock.alock.oh, args.alock.oh);
  EXPECT_TRUE(journal_.batches.empty());
}

}  // namespace
}  // namespace nlockd::nlm
