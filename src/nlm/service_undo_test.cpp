// Undoing what NLM granted: a granted block taken back (CANCEL, an unreachable client) gives the
// owner back what it held before; a LOCK or SHARE undone after its journal write failed never
// overwrites a later call of the same owner.
#include <gtest/gtest.h>

#include "nlm/service.hpp"
#include "nlm/service_test_fixture.hpp"
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

}  // namespace
}  // namespace nlockd::nlm
