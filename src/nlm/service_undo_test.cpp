// SPDX-License-Identifier: Apache-2.0
// Undoing what NLM granted: a granted block taken back (CANCEL, an unreachable client) gives the
// owner back what it held before; a LOCK or SHARE undone after its journal write failed never
// overwrites a later call of the same owner.
#include <optional>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <gtest/gtest.h>

#include "nlm/service.hpp"
#include "nlm/testing/service_test_fixture.hpp"
#include "rpc/dispatcher.hpp"
#include "rpc/message.hpp"

namespace nlockd::nlm {
namespace {

using test_support::NlmServiceTest;
using test_support::OwnerLocks;
using test_support::RecordingJournal;
using test_support::RunCoroutine;

class NlmUndoTest : public NlmServiceTest {
 protected:
  NlmUndoTest() {
    service_->set_journal(&journal_);
    // What the store would persist: the owner's locks as they are when the entry is recorded.
    journal_.on_record = [this](const std::vector<JournalEntry>& entries) {
      for (const JournalEntry& e : entries) {
        if (e.kind == JournalEntry::Kind::kLocks && e.owner.host.value() == "192.0.2.1") {
          recorded_a_.push_back(OwnerLocks(locks_, "192.0.2.1"));
        }
      }
    };
  }

  // 192.0.2.1 holds S [0,99] and asks to upgrade it (blocking) while 192.0.2.2 shares it; the
  // release by .2 will grant the upgrade.
  void BlockAnUpgrade() {
    auto shared_a = LockArgs("client-a", 1, 0, 100);
    shared_a.exclusive = false;
    ASSERT_EQ(Lock(a_, shared_a).stat, NLM4_GRANTED);
    ASSERT_EQ(Lock(b_, shared_b_).stat, NLM4_GRANTED);
    ASSERT_EQ(Lock(a_, upgrade_).stat, NLM4_BLOCKED);
    recorded_a_.clear();
  }

  RecordingJournal journal_;
  std::vector<std::string> recorded_a_;
  const rpc::CallContext a_ = From("192.0.2.1");
  const rpc::CallContext b_ = From("192.0.2.2");
  const nlm4_lockargs upgrade_ = LockArgs("client-a", 1, 0, 100, /*block=*/true);
  nlm4_lockargs shared_b_ = SharedArgs("client-b", 2);

 private:
  static nlm4_lockargs SharedArgs(const char* caller, int32_t svid) {
    nlm4_lockargs args = LockArgs(caller, svid, 0, 100);
    args.exclusive = false;
    return args;
  }
};

TEST_F(NlmUndoTest, ACancelOfAGrantedUpgradeOverTheWireGivesBackTheSharedLock) {
  BlockAnUpgrade();
  Unlock(b_, shared_b_);
  RunFor(std::chrono::milliseconds(10));  // The GRANTED_MSG is out; its GRANTED_RES never comes.
  ASSERT_EQ(caller_.sent.size(), 1u);
  ASSERT_EQ(OwnerLocks(locks_, "192.0.2.1"), "X [0,99]");
  recorded_a_.clear();
  rpc::Dispatcher dispatcher;
  service_->Register(dispatcher);
  std::vector<uint8_t> call;
  xdr::Encoder enc(call);
  rpc::EncodeCallHeader(enc, 7, NLM_PROG, NLM4_VERS, NLM_CANCEL);
  Encode(enc, NLM4_VERS, nlm4_cancargs{"cancel", true, true, upgrade_.alock});
  std::vector<uint8_t> reply;
  rpc::CallContext context = a_;
  context.procedure = NLM_CANCEL;
  ASSERT_TRUE(RunCoroutine(io_, dispatcher.Dispatch(context, call, reply)));
  nlm4_res res;
  xdr::Decoder dec(rpc::DecodeReply(reply).body);
  ASSERT_TRUE(Decode(dec, NLM4_VERS, res));
  EXPECT_EQ(res.stat, NLM4_GRANTED);
  EXPECT_EQ(OwnerLocks(locks_, "192.0.2.1"), "S [0,99]");
  EXPECT_EQ(recorded_a_, std::vector<std::string>{"S [0,99]"}) << "the restored lock is persisted";
  RunFor(std::chrono::milliseconds(300));
  EXPECT_EQ(caller_.sent.size(), 1u) << "the undone grant is not announced again";
  EXPECT_EQ(OwnerLocks(locks_, "192.0.2.1"), "S [0,99]");
}

TEST_F(NlmUndoTest, AGrantTheClientNeverAcknowledgesGivesBackTheSharedLock) {
  caller_.reachable = false;
  BlockAnUpgrade();
  Unlock(b_, shared_b_);
  RunFor(std::chrono::milliseconds(300));
  EXPECT_EQ(service_->stats().callbacks_failed, 1u);
  EXPECT_EQ(OwnerLocks(locks_, "192.0.2.1"), "S [0,99]");
  // The grant's write, then the revocation's, which persists the lock given back.
  EXPECT_EQ(recorded_a_, (std::vector<std::string>{"X [0,99]", "S [0,99]"}));
}

// Two calls of one owner on one file while the first one's journal write is in flight.
class NlmOverlappingCallsTest : public NlmServiceTest {
 protected:
  NlmOverlappingCallsTest() { service_->set_journal(&journal_); }

  // Starts a call on the io_context; its answer lands in `*out` once it is answered.
  template <typename T>
  void Start(asio::awaitable<T> call, std::optional<T>* out) {
    asio::co_spawn(io_, Store(std::move(call), out), asio::detached);
    RunFor(std::chrono::milliseconds(5));
  }
  template <typename T>
  static asio::awaitable<void> Store(asio::awaitable<T> call, std::optional<T>* out) {
    *out = co_await std::move(call);
  }

  void Complete(bool ok) {
    journal_.CompleteNext(ok);
    RunFor(std::chrono::milliseconds(5));
  }

  nlm4_lockargs Args(bool exclusive) const {
    nlm4_lockargs args = LockArgs("client-a", 1, 0, 10);
    args.exclusive = exclusive;
    return args;
  }

  test_support::ManualJournal journal_{io_.get_executor()};
  const rpc::CallContext a_ = From("192.0.2.1");
};

TEST_F(NlmOverlappingCallsTest, AFailedLockIsUndoneBeforeTheOwnersNextLockIsApplied) {
  std::optional<nlm4_res> first, second;
  Start(service_->Lock(a_, Args(true), true), &first);
  ASSERT_EQ(journal_.writes.size(), 1u);
  Start(service_->Lock(a_, Args(false), true), &second);  // A downgrade of what the first took.
  EXPECT_EQ(OwnerLocks(locks_, "192.0.2.1"), "X [0,9]") << "the second waits for the first";
  Complete(false);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->stat, NLM4_DENIED_NOLOCKS);
  // The second runs now, on the state the undo left: nothing.
  Complete(true);  // The undo's own write.
  Complete(true);  // The second's.
  ASSERT_TRUE(second);
  EXPECT_EQ(second->stat, NLM4_GRANTED);
  EXPECT_EQ(OwnerLocks(locks_, "192.0.2.1"), "S [0,9]") << "the second LOCK stands";
}

TEST_F(NlmOverlappingCallsTest, AFailedUpgradeIsNotGivenBackAfterTheOwnerUnlocked) {
  std::optional<nlm4_res> shared, elsewhere, upgrade, unlock;
  Start(service_->Lock(a_, Args(false), true), &shared);
  Complete(true);
  ASSERT_EQ(shared->stat, NLM4_GRANTED);
  Start(service_->Lock(a_, LockArgs("client-a", 1, 100, 10), true), &elsewhere);
  Complete(true);
  ASSERT_EQ(OwnerLocks(locks_, "192.0.2.1"), "S [0,9], X [100,109]");
  Start(service_->Lock(a_, Args(true), true), &upgrade);
  nlm4_lockargs held = Args(true);
  Start(service_->Unlock(a_, nlm4_unlockargs{"u", held.alock}), &unlock);
  Complete(false);  // The upgrade's write fails: the owner gets its shared lock back...
  EXPECT_EQ(upgrade->stat, NLM4_DENIED_NOLOCKS);
  while (!journal_.writes.empty()) Complete(true);
  ASSERT_TRUE(unlock);
  EXPECT_EQ(unlock->stat, NLM4_GRANTED);
  EXPECT_EQ(OwnerLocks(locks_, "192.0.2.1"), "X [100,109]")
      << "...which the later UNLOCK then released";
}

TEST_F(NlmOverlappingCallsTest, AFailedShareIsUndoneBeforeTheOwnersNextShareIsApplied) {
  std::optional<nlm4_shareres> first, second;
  nlm4_shareargs read{"s1", {"client-a", "file1", "oh-a", fsm_DN, fsa_R}, false};
  nlm4_shareargs write{"s2", {"client-a", "file1", "oh-a", fsm_DW, fsa_RW}, false};
  Start(service_->Share(a_, read), &first);
  Start(service_->Share(a_, write), &second);
  Complete(false);
  EXPECT_EQ(first->stat, NLM4_DENIED_NOLOCKS);
  while (!journal_.writes.empty()) Complete(true);
  EXPECT_EQ(second->stat, NLM4_GRANTED);
  std::vector<lock::ShareInfo> shares = locks_.ListShares();
  ASSERT_EQ(shares.size(), 1u) << "the second SHARE stands";
  EXPECT_EQ(shares[0].access, lock::ShareAccess::kReadWrite);
}

TEST_F(NlmOverlappingCallsTest, OtherOwnersAndFilesDoNotWait) {
  std::optional<nlm4_res> first, other_owner, other_file;
  Start(service_->Lock(a_, Args(true), true), &first);
  Start(service_->Lock(From("192.0.2.2"), LockArgs("client-b", 2, 100, 10), true), &other_owner);
  Start(service_->Lock(a_, LockArgs("client-a", 1, 0, 10, false, "file2"), true), &other_file);
  EXPECT_EQ(journal_.writes.size(), 3u) << "all three applied and writing";
  while (!journal_.writes.empty()) Complete(true);
  EXPECT_EQ(first->stat, NLM4_GRANTED);
  EXPECT_EQ(other_owner->stat, NLM4_GRANTED);
  EXPECT_EQ(other_file->stat, NLM4_GRANTED);
}

// An owner whose earlier call still awaits its write: its next call waits its turn in the
// coroutine form; other owners are answered inline meanwhile.
TEST_F(NlmOverlappingCallsTest, AnOwnerWithACallInFlightIsNotAnsweredInline) {
  journal_.writes_inline = true;
  std::optional<nlm4_res> first;
  Start(service_->Lock(a_, Args(true), true), &first);
  ASSERT_EQ(journal_.writes.size(), 1u);
  nlm4_lockargs again = LockArgs("client-a", 1, 20, 10);
  EXPECT_FALSE(service_->TryLock(a_, again, true)) << "its turn is taken";
  nlm4_lockargs other = LockArgs("client-b", 2, 100, 10);
  // client-b is not monitored yet: NM_LOCK needs no monitoring.
  std::optional<nlm4_res> answered = service_->TryLock(From("192.0.2.2"), other, false);
  ASSERT_TRUE(answered);
  EXPECT_EQ(answered->stat, NLM4_GRANTED);
  EXPECT_EQ(journal_.inline_writes.size(), 1u);
  Complete(true);
  EXPECT_EQ(first->stat, NLM4_GRANTED);
  again = LockArgs("client-a", 1, 20, 10);
  EXPECT_TRUE(service_->TryLock(a_, again, true)) << "the turn is free again";
}

}  // namespace
}  // namespace nlockd::nlm
