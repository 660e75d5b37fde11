// SPDX-License-Identifier: Apache-2.0
// NLM between hosts: nlockd in a server network namespace, clients in namespaces of their own,
// each with its own rpcbind. Blocked locks come back as GRANTED or GRANTED_MSG callbacks to the
// client host's NLM service, which nlockd finds through that host's rpcbind (as Linux and
// Ganesha servers do); FREE_ALL is taken only from the host it names.
#include "integration/nlm_hosts.hpp"

#include <algorithm>
#include <chrono>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "integration/tools/tool_format.hpp"
#include "testutil/netns.hpp"

namespace nlockd::integration {
namespace {

constexpr auto kCallbackTimeout = std::chrono::seconds(20);

// One nlm_client operation on file "f" for owner `svid` of client host `client`.
std::string Op(const std::string& verb, int client, int svid, const std::string& extra = "") {
  std::string caller = "client" + std::to_string(client);
  std::string op = verb + " fh=f caller=" + caller + " svid=" + std::to_string(svid) +
                   " oh=" + std::to_string(svid) + "@" + caller;
  return extra.empty() ? op : op + " " + extra;
}

class NlmBetweenHosts : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testutil::NetNamespace::Available()) GTEST_SKIP() << "needs root and ip netns";
  }

  // The hosts, made on first use (so that a test that skips itself costs nothing).
  NlmHosts& hosts() {
    if (!hosts_) hosts_ = std::make_unique<NlmHosts>(2);
    return *hosts_;
  }

  // Runs operations on a client host; each answer line, or the tool's failure.
  std::vector<std::string> Run(int client, const std::vector<std::string>& operations,
                               uint32_t version = 4, bool tcp = false) {
    NlmHosts::ClientRun run = hosts().RunClient(client, operations, version, tcp);
    EXPECT_EQ(run.status, 0) << ::testing::PrintToString(run.lines);
    return run.lines;
  }
  // Runs one operation; its answer line.
  std::string RunOne(int client, const std::string& operation, uint32_t version = 4) {
    auto lines = Run(client, {operation}, version);
    return lines.empty() ? "(no output)" : lines.back();
  }

  std::unique_ptr<NlmHosts> hosts_;
};

struct CallbackCase {
  std::string mode;  // --granted-callback
  uint32_t version;
};

class NlmGrantedCallback : public NlmBetweenHosts,
                           public ::testing::WithParamInterface<CallbackCase> {};

std::string CaseName(const ::testing::TestParamInfo<CallbackCase>& param) {
  return param.param.mode + "V" + std::to_string(param.param.version);
}

INSTANTIATE_TEST_SUITE_P(ModesAndVersions, NlmGrantedCallback,
                         ::testing::Values(CallbackCase{"sync", 4}, CallbackCase{"msg", 4},
                                           CallbackCase{"msg", 1}, CallbackCase{"sync", 3}),
                         CaseName);

TEST_P(NlmGrantedCallback, BlockedLockIsGrantedThroughTheClientHostsNlm) {
  const auto [mode, version] = GetParam();
  std::vector<std::string> args;
  if (mode == "sync") args = {"--granted-callback", "sync"};
  ASSERT_TRUE(hosts().StartNlockd(args));
  testutil::Subprocess* callbacks = hosts().StartCallbackServer(2);
  ASSERT_NE(callbacks, nullptr);

  const std::string range = "offset=0 length=100";
  EXPECT_EQ(RunOne(1, Op("lock", 1, 1, range), version), "lock stat=granted");
  EXPECT_EQ(RunOne(2, Op("lock", 2, 2, range + " block=1"), version), "lock stat=blocked");
  EXPECT_EQ(RunOne(1, Op("unlock", 1, 1, range), version), "unlock stat=granted");

  // nlockd finds client 2's NLM through client 2's rpcbind and calls it.
  const std::string expected_lock = "version=" + std::to_string(version) +
                                    " caller=client2 svid=2 oh=2@client2 offset=0 length=100 "
                                    "exclusive=1 fh=f";
  if (mode == "sync") {
    auto granted = callbacks->WaitForLine(std::regex("^GRANTED (.*) cookie="), kCallbackTimeout);
    ASSERT_TRUE(granted) << callbacks->output() << hosts().nlockd().process().output();
    EXPECT_EQ((*granted)[1].str(), expected_lock);
  } else {
    auto granted =
        callbacks->WaitForLine(std::regex("^GRANTED_MSG (.*) cookie="), kCallbackTimeout);
    ASSERT_TRUE(granted) << callbacks->output() << hosts().nlockd().process().output();
    EXPECT_EQ((*granted)[1].str(), expected_lock);
    // The callback server answers with GRANTED_RES to nlockd, found through the server's
    // rpcbind.
    auto res = callbacks->WaitForLine(std::regex("^GRANTED_RES (.*)"), kCallbackTimeout);
    ASSERT_TRUE(res) << callbacks->output();
    EXPECT_EQ((*res)[1].str(),
              "sent address=" + NlmHosts::ServerAddress(2) + " port=4045 stat=granted");
  }
  // The waiter holds the lock now.
  EXPECT_EQ(RunOne(1, Op("test", 1, 9, "offset=50 length=1"), version),
            "test stat=denied holder_svid=2 holder_oh=2@client2 holder_offset=0 "
            "holder_length=100 holder_exclusive=1");
  EXPECT_EQ(hosts().nlockd().Stop(), 0);
}

TEST_F(NlmBetweenHosts, CancelledWaiterIsNeverGrantedAndTheNextWaiterIs) {
  ASSERT_TRUE(hosts().StartNlockd({}));
  testutil::Subprocess* callbacks = hosts().StartCallbackServer(2);
  ASSERT_NE(callbacks, nullptr);
  const std::string range = "offset=0 length=100";
  EXPECT_EQ(RunOne(1, Op("lock", 1, 1, range)), "lock stat=granted");
  // Two owners of client 2 queue behind it; the first gives up.
  EXPECT_EQ(
      Run(2, {Op("lock", 2, 2, range + " block=1"), Op("lock", 2, 3, range + " block=1"),
              Op("cancel", 2, 2, range + " block=1")}),
      (std::vector<std::string>{"lock stat=blocked", "lock stat=blocked", "cancel stat=granted"}));
  EXPECT_EQ(RunOne(1, Op("unlock", 1, 1, range)), "unlock stat=granted");

  // The first grant the client host hears of is the second waiter's.
  auto granted =
      callbacks->WaitForLine(std::regex("^GRANTED_MSG .* svid=(\\d+) "), kCallbackTimeout);
  ASSERT_TRUE(granted) << callbacks->output() << hosts().nlockd().process().output();
  EXPECT_EQ((*granted)[1].str(), "3");
  EXPECT_EQ(RunOne(1, Op("test", 1, 9, "offset=0 length=1")),
            "test stat=denied holder_svid=3 holder_oh=3@client2 holder_offset=0 "
            "holder_length=100 holder_exclusive=1");
  // Once that owner lets go nobody holds the range: the cancelled waiter is gone for good.
  EXPECT_EQ(RunOne(2, Op("unlock", 2, 3, range)), "unlock stat=granted");
  EXPECT_EQ(RunOne(1, Op("test", 1, 9, "offset=0 length=1")), "test stat=granted");
  EXPECT_EQ(callbacks->output().find("svid=2 "), std::string::npos) << callbacks->output();
  EXPECT_EQ(hosts().nlockd().Stop(), 0);
}

TEST_F(NlmBetweenHosts, AWaiterIsGrantedOnlyOnceItsWholeRangeIsFree) {
  ASSERT_TRUE(hosts().StartNlockd({}));
  testutil::Subprocess* callbacks = hosts().StartCallbackServer(2);
  ASSERT_NE(callbacks, nullptr);
  EXPECT_EQ(RunOne(1, Op("lock", 1, 1, "offset=0 length=100")), "lock stat=granted");
  EXPECT_EQ(RunOne(2, Op("lock", 2, 2, "offset=0 length=100 block=1")), "lock stat=blocked");
  // Half of the range comes free: the waiter still waits and nobody holds that half.
  EXPECT_EQ(
      Run(1, {Op("unlock", 1, 1, "offset=0 length=50"), Op("test", 1, 9, "offset=10 length=1")}),
      (std::vector<std::string>{"unlock stat=granted", "test stat=granted"}));
  EXPECT_EQ(RunOne(1, Op("unlock", 1, 1, "offset=50 length=50")), "unlock stat=granted");
  auto granted = callbacks->WaitForLine(std::regex("^GRANTED_MSG (.*) fh=f"), kCallbackTimeout);
  ASSERT_TRUE(granted) << callbacks->output() << hosts().nlockd().process().output();
  EXPECT_EQ((*granted)[1].str(),
            "version=4 caller=client2 svid=2 oh=2@client2 offset=0 length=100 exclusive=1");
  EXPECT_EQ(hosts().nlockd().Stop(), 0);
}

TEST_F(NlmBetweenHosts, SharedWaitersAreGrantedTogetherAndAnExclusiveOneAfterThem) {
  ASSERT_TRUE(hosts().StartNlockd({}));
  testutil::Subprocess* callbacks = hosts().StartCallbackServer(2);
  ASSERT_NE(callbacks, nullptr);
  const std::string range = "offset=0 length=10";
  EXPECT_EQ(RunOne(1, Op("lock", 1, 1, range)), "lock stat=granted");
  EXPECT_EQ(
      Run(2,
          {Op("lock", 2, 2, range + " block=1 exclusive=0"),
           Op("lock", 2, 3, range + " block=1 exclusive=0"), Op("lock", 2, 4, range + " block=1")}),
      (std::vector<std::string>{"lock stat=blocked", "lock stat=blocked", "lock stat=blocked"}));
  EXPECT_EQ(RunOne(1, Op("unlock", 1, 1, range)), "unlock stat=granted");
  std::vector<std::string> svids;
  for (int i = 0; i < 2; ++i) {
    auto granted = callbacks->WaitForLine(std::regex("^GRANTED_MSG .* svid=(\\d+) .*exclusive=0"),
                                          kCallbackTimeout);
    ASSERT_TRUE(granted) << callbacks->output() << hosts().nlockd().process().output();
    svids.push_back((*granted)[1]);
  }
  std::sort(svids.begin(), svids.end());
  EXPECT_EQ(svids, (std::vector<std::string>{"2", "3"}));
  // The exclusive waiter gets its turn when both readers are done.
  EXPECT_EQ(Run(2, {Op("unlock", 2, 2, range), Op("unlock", 2, 3, range)}),
            (std::vector<std::string>{"unlock stat=granted", "unlock stat=granted"}));
  auto exclusive =
      callbacks->WaitForLine(std::regex("^GRANTED_MSG .* svid=(\\d+) "), kCallbackTimeout);
  ASSERT_TRUE(exclusive) << callbacks->output();
  EXPECT_EQ((*exclusive)[1].str(), "4");
  EXPECT_EQ(hosts().nlockd().Stop(), 0);
}

TEST_F(NlmBetweenHosts, UnlockByAWaiterWithdrawsItsBlock) {
  ASSERT_TRUE(hosts().StartNlockd({}));
  testutil::Subprocess* callbacks = hosts().StartCallbackServer(2);
  ASSERT_NE(callbacks, nullptr);
  const std::string range = "offset=0 length=100";
  EXPECT_EQ(RunOne(1, Op("lock", 1, 1, range)), "lock stat=granted");
  EXPECT_EQ(
      Run(2, {Op("lock", 2, 2, range + " block=1"), Op("unlock", 2, 2, range),
              Op("lock", 2, 3, range + " block=1")}),
      (std::vector<std::string>{"lock stat=blocked", "unlock stat=granted", "lock stat=blocked"}));
  EXPECT_EQ(RunOne(1, Op("unlock", 1, 1, range)), "unlock stat=granted");
  auto granted =
      callbacks->WaitForLine(std::regex("^GRANTED_MSG .* svid=(\\d+) "), kCallbackTimeout);
  ASSERT_TRUE(granted) << callbacks->output() << hosts().nlockd().process().output();
  EXPECT_EQ((*granted)[1].str(), "3");
  EXPECT_EQ(hosts().nlockd().Stop(), 0);
}

TEST_F(NlmBetweenHosts, CancelOfAGrantNotYetAcknowledgedTakesTheLockBack) {
  ASSERT_TRUE(hosts().StartNlockd({}));
  // Client 2's NLM takes GRANTED_MSG but never answers with GRANTED_RES.
  testutil::Subprocess* callbacks = hosts().StartCallbackServer(2, {"--answer", "none"});
  ASSERT_NE(callbacks, nullptr);
  const std::string range = "offset=0 length=100";
  EXPECT_EQ(RunOne(1, Op("lock", 1, 1, range)), "lock stat=granted");
  EXPECT_EQ(RunOne(2, Op("lock", 2, 2, range + " block=1")), "lock stat=blocked");
  EXPECT_EQ(RunOne(1, Op("unlock", 1, 1, range)), "unlock stat=granted");
  ASSERT_TRUE(callbacks->WaitForLine(std::regex("^GRANTED_MSG .* svid=2 "), kCallbackTimeout))
      << callbacks->output() << hosts().nlockd().process().output();
  EXPECT_EQ(RunOne(2, Op("cancel", 2, 2, range + " block=1")), "cancel stat=granted");
  EXPECT_EQ(RunOne(1, Op("test", 1, 9, "offset=0 length=1")), "test stat=granted");
  // Client 1 takes the range again and client 2 queues once more: the cancelled grant must not
  // be announced again (its retry would tell client 2 it holds what it only waits for).
  EXPECT_EQ(RunOne(1, Op("lock", 1, 1, range)), "lock stat=granted");
  EXPECT_EQ(RunOne(2, Op("lock", 2, 2, range + " block=1")), "lock stat=blocked");
  // No event marks "nlockd will not retry": wait past its retry interval (5 s deadline + 1 s).
  auto stale = callbacks->WaitForLine(std::regex("^GRANTED_MSG .*"), std::chrono::seconds(8));
  EXPECT_FALSE(stale) << "a GRANTED_MSG for a cancelled grant was sent again: " << (*stale)[0];
  EXPECT_EQ(hosts().nlockd().Stop(), 0);
}

TEST_F(NlmBetweenHosts, AGrantIsSentWithTheVersionOfTheBlockedRequest) {
  ASSERT_TRUE(hosts().StartNlockd({}));
  testutil::Subprocess* callbacks = hosts().StartCallbackServer(2);
  ASSERT_NE(callbacks, nullptr);
  const std::string range = "offset=4294967301 length=10";  // Past 4 GiB: version 4 only.
  EXPECT_EQ(RunOne(1, Op("lock", 1, 1, range)), "lock stat=granted");
  EXPECT_EQ(RunOne(2, Op("lock", 2, 2, range + " block=1")), "lock stat=blocked");
  // Meanwhile the same host locks another file over version 1 (an NFSv2 mount, say).
  EXPECT_EQ(RunOne(2, "lock fh=v1-file caller=client2 svid=7 oh=7@client2 offset=0 length=1", 1),
            "lock stat=granted");
  EXPECT_EQ(RunOne(1, Op("unlock", 1, 1, range)), "unlock stat=granted");
  auto granted = callbacks->WaitForLine(std::regex("^GRANTED_MSG (.*) fh=f"), kCallbackTimeout);
  ASSERT_TRUE(granted) << callbacks->output() << hosts().nlockd().process().output();
  EXPECT_EQ((*granted)[1].str(),
            "version=4 caller=client2 svid=2 oh=2@client2 offset=4294967301 "
            "length=10 exclusive=1");
  EXPECT_EQ(hosts().nlockd().Stop(), 0);
}

// A client in its own grace period answers a GRANTED callback with DENIED_GRACE_PERIOD; the
// server tries again later instead of taking the lock back.
TEST_F(NlmBetweenHosts, AGrantAnsweredWithTheClientsGracePeriodIsSentAgain) {
  ASSERT_TRUE(hosts().StartNlockd({}));
  testutil::Subprocess* callbacks = hosts().StartCallbackServer(2, {"--answer", "grace-once"});
  ASSERT_NE(callbacks, nullptr);
  const std::string range = "offset=0 length=10";
  EXPECT_EQ(RunOne(1, Op("lock", 1, 1, range)), "lock stat=granted");
  EXPECT_EQ(RunOne(2, Op("lock", 2, 2, range + " block=1")), "lock stat=blocked");
  EXPECT_EQ(RunOne(1, Op("unlock", 1, 1, range)), "unlock stat=granted");
  // (A match points into the tool's last line: copy what is needed before reading on.)
  auto first = callbacks->WaitForLine(std::regex("^GRANTED_MSG .*cookie=(\\w+)"), kCallbackTimeout);
  ASSERT_TRUE(first) << callbacks->output() << hosts().nlockd().process().output();
  const std::string cookie = (*first)[1].str();
  ASSERT_TRUE(callbacks->WaitForLine(std::regex("^GRANTED_RES sent .*stat=denied_grace_period"),
                                     kCallbackTimeout));
  auto again = callbacks->WaitForLine(std::regex("^GRANTED_MSG .*cookie=(\\w+)"), kCallbackTimeout);
  ASSERT_TRUE(again) << callbacks->output() << hosts().nlockd().process().output();
  EXPECT_EQ((*again)[1].str(), cookie);
  ASSERT_TRUE(
      callbacks->WaitForLine(std::regex("^GRANTED_RES sent .*stat=granted"), kCallbackTimeout));
  EXPECT_EQ(RunOne(1, Op("test", 1, 9, "offset=0 length=1")),
            "test stat=denied holder_svid=2 holder_oh=2@client2 holder_offset=0 "
            "holder_length=10 holder_exclusive=1");
  EXPECT_EQ(hosts().nlockd().Stop(), 0);
}

TEST_F(NlmBetweenHosts, AnotherHostCannotUnlockOrCancelByNamingTheOwner) {
  ASSERT_TRUE(hosts().StartNlockd({}));
  testutil::Subprocess* callbacks = hosts().StartCallbackServer(1);
  ASSERT_NE(callbacks, nullptr);
  const std::string range = "offset=0 length=10";
  EXPECT_EQ(Run(1, {Op("lock", 1, 1, range), Op("lock", 1, 2, range + " block=1")}),
            (std::vector<std::string>{"lock stat=granted", "lock stat=blocked"}));
  // Client 2 sends client 1's own lock description: it is a different owner (another host).
  EXPECT_EQ(Run(2, {Op("unlock", 1, 1, range), Op("cancel", 1, 2, range + " block=1")}),
            (std::vector<std::string>{"unlock stat=granted", "cancel stat=granted"}));
  EXPECT_EQ(RunOne(2, Op("test", 2, 9, "offset=0 length=1")),
            "test stat=denied holder_svid=1 holder_oh=1@client1 holder_offset=0 "
            "holder_length=10 holder_exclusive=1");
  // Client 1's waiter is still queued: releasing the lock grants it.
  EXPECT_EQ(RunOne(1, Op("unlock", 1, 1, range)), "unlock stat=granted");
  auto granted =
      callbacks->WaitForLine(std::regex("^GRANTED_MSG .* svid=(\\d+) "), kCallbackTimeout);
  ASSERT_TRUE(granted) << callbacks->output() << hosts().nlockd().process().output();
  EXPECT_EQ((*granted)[1].str(), "2");
  EXPECT_EQ(RunOne(2, Op("test", 2, 9, "offset=0 length=1")),
            "test stat=denied holder_svid=2 holder_oh=2@client1 holder_offset=0 "
            "holder_length=10 holder_exclusive=1");
  EXPECT_EQ(hosts().nlockd().Stop(), 0);
}

TEST_F(NlmBetweenHosts, AGrantedResFromAnotherHostDoesNotSettleTheGrant) {
  ASSERT_TRUE(hosts().StartNlockd({}));
  // Client 2 takes its time to answer the GRANTED_MSG (it never does here).
  testutil::Subprocess* callbacks = hosts().StartCallbackServer(2, {"--answer", "none"});
  ASSERT_NE(callbacks, nullptr);
  const std::string range = "offset=0 length=10";
  EXPECT_EQ(RunOne(1, Op("lock", 1, 1, range)), "lock stat=granted");
  EXPECT_EQ(RunOne(2, Op("lock", 2, 2, range + " block=1")), "lock stat=blocked");
  EXPECT_EQ(RunOne(1, Op("unlock", 1, 1, range)), "unlock stat=granted");
  auto granted =
      callbacks->WaitForLine(std::regex("^GRANTED_MSG .*cookie=(\\w+)"), kCallbackTimeout);
  ASSERT_TRUE(granted) << callbacks->output() << hosts().nlockd().process().output();
  // Client 1 answers in client 2's name, refusing the lock (stat 1 = denied).
  EXPECT_EQ(RunOne(1, "granted_res cookie_hex=" + (*granted)[1].str() + " stat=1"),
            "granted_res sent");
  // Client 2 was told it holds the lock: it must still hold it.
  EXPECT_EQ(RunOne(1, Op("test", 1, 9, "offset=0 length=1")),
            "test stat=denied holder_svid=2 holder_oh=2@client2 holder_offset=0 "
            "holder_length=10 holder_exclusive=1");
  EXPECT_EQ(hosts().nlockd().Stop(), 0);
}

class NlmRefusedGrant : public NlmBetweenHosts,
                        public ::testing::WithParamInterface<std::string> {};

std::string ModeName(const ::testing::TestParamInfo<std::string>& param) { return param.param; }

INSTANTIATE_TEST_SUITE_P(Modes, NlmRefusedGrant, ::testing::Values("sync", "msg"), ModeName);

// A client that answers a GRANTED (or GRANTED_MSG with its GRANTED_RES) with "denied" does not
// want the lock any more: nlockd takes it back.
TEST_P(NlmRefusedGrant, AGrantTheClientRefusesIsTakenBack) {
  ASSERT_TRUE(hosts().StartNlockd({"--granted-callback", GetParam()}));
  testutil::Subprocess* callbacks = hosts().StartCallbackServer(2, {"--answer", "denied"});
  ASSERT_NE(callbacks, nullptr);
  const std::string range = "offset=0 length=100";
  EXPECT_EQ(RunOne(1, Op("lock", 1, 1, range)), "lock stat=granted");
  EXPECT_EQ(RunOne(2, Op("lock", 2, 2, range + " block=1")), "lock stat=blocked");
  EXPECT_EQ(RunOne(1, Op("unlock", 1, 1, range)), "unlock stat=granted");
  ASSERT_TRUE(callbacks->WaitForLine(
      std::regex(GetParam() == "sync" ? "^GRANTED .* svid=2 " : "^GRANTED_RES sent .*denied"),
      kCallbackTimeout))
      << callbacks->output() << hosts().nlockd().process().output();
  // No event tells when nlockd has taken the lock back: ask until it has (bounded).
  std::string answer;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  do {
    answer = RunOne(1, Op("test", 1, 9, "offset=0 length=1"));
  } while (answer != "test stat=granted" && std::chrono::steady_clock::now() < deadline);
  EXPECT_EQ(answer, "test stat=granted") << hosts().nlockd().process().output();
  EXPECT_EQ(hosts().nlockd().Stop(), 0);
}

TEST_F(NlmBetweenHosts, AWaiterWhoseHostServesNoNlmIsDroppedAndTheNextWaiterGranted) {
  ASSERT_TRUE(hosts().StartNlockd({}));
  // Client 1 runs an NLM service; client 2 has an rpcbind but no NLM registered with it.
  testutil::Subprocess* callbacks = hosts().StartCallbackServer(1);
  ASSERT_NE(callbacks, nullptr);
  const std::string range = "offset=0 length=100";
  EXPECT_EQ(RunOne(1, Op("lock", 1, 1, range)), "lock stat=granted");
  EXPECT_EQ(RunOne(2, Op("lock", 2, 2, range + " block=1")), "lock stat=blocked");
  EXPECT_EQ(RunOne(1, Op("lock", 1, 3, range + " block=1")), "lock stat=blocked");
  EXPECT_EQ(RunOne(1, Op("unlock", 1, 1, range)), "unlock stat=granted");
  // Client 2's grant cannot be delivered; after its attempts it is revoked and passed on.
  auto granted =
      callbacks->WaitForLine(std::regex("^GRANTED_MSG .* svid=(\\d+) "), kCallbackTimeout);
  ASSERT_TRUE(granted) << callbacks->output() << hosts().nlockd().process().output();
  EXPECT_EQ((*granted)[1].str(), "3");
  EXPECT_EQ(RunOne(2, Op("test", 2, 9, "offset=0 length=1")),
            "test stat=denied holder_svid=3 holder_oh=3@client1 holder_offset=0 "
            "holder_length=100 holder_exclusive=1");
  EXPECT_EQ(hosts().nlockd().Stop(), 0);
}

// A BSD-style client: _MSG calls over TCP, whose results nlockd delivers as _RES calls to the
// client host's NLM service, found through that host's rpcbind.
TEST_F(NlmBetweenHosts, MsgCallsOverTcpAreAnsweredWithResCallsToTheClientHostsNlm) {
  ASSERT_TRUE(hosts().StartNlockd({}));
  testutil::Subprocess* nlm = hosts().StartCallbackServer(2);
  ASSERT_NE(nlm, nullptr);
  EXPECT_EQ(RunOne(1, Op("lock", 1, 1, "offset=100 length=10")), "lock stat=granted");
  struct Step {
    std::string op;
    std::string res;
  };
  const std::vector<Step> steps{
      {Op("lock_msg", 2, 2, "offset=0 length=10 cookie=lm"), "LOCK_RES version=4 stat=granted"},
      {Op("test_msg", 2, 3, "offset=5 length=1 cookie=tm"),
       "TEST_RES version=4 stat=denied holder_svid=2 holder_oh=2@client2 holder_offset=0 "
       "holder_length=10 holder_exclusive=1"},
      {Op("lock_msg", 2, 3, "offset=100 length=1 block=1 cookie=bm"),
       "LOCK_RES version=4 stat=blocked"},
      {Op("cancel_msg", 2, 3, "offset=100 length=1 cookie=cm"),
       "CANCEL_RES version=4 stat=granted"},
      {Op("unlock_msg", 2, 2, "offset=0 length=10 cookie=um"), "UNLOCK_RES version=4 stat=granted"},
  };
  for (const auto& step : steps) {
    SCOPED_TRACE(step.op);
    std::string verb = step.op.substr(0, step.op.find(' '));
    EXPECT_EQ(Run(2, {step.op}, 4, true), std::vector<std::string>{verb + " sent"});
    auto res = nlm->WaitForLine(std::regex("^[A-Z]+_RES .*"), kCallbackTimeout);
    ASSERT_TRUE(res) << nlm->output() << hosts().nlockd().process().output();
    std::string cookie = step.op.substr(step.op.find("cookie=") + 7);
    EXPECT_EQ((*res)[0].str(), step.res + " cookie=" + tools::Hex(cookie));
  }
  EXPECT_EQ(hosts().nlockd().Stop(), 0);
}

TEST_F(NlmBetweenHosts, FreeAllReleasesTheCallersOwnLocksAndIsRefusedFromAnotherHost) {
  ASSERT_TRUE(hosts().StartNlockd({}));
  EXPECT_EQ(Run(1, {Op("lock", 1, 1, "offset=0 length=10"),
                    Op("lock", 1, 2, "offset=20 length=10 exclusive=0"),
                    "share fh=g caller=client1 oh=s1 mode=2 access=1"}),
            (std::vector<std::string>{"lock stat=granted", "lock stat=granted",
                                      "share stat=granted sequence=0"}));

  // Client 2 names client 1, by caller_name and by address: refused, everything stays.
  EXPECT_EQ(Run(2, {"free_all name=client1 state=3",
                    "free_all name=" + NlmHosts::ClientAddress(1) + " state=3"}),
            (std::vector<std::string>{"free_all ok", "free_all ok"}));
  EXPECT_EQ(Run(2, {Op("test", 2, 5, "offset=0 length=1"), Op("test", 2, 5, "offset=25 length=1"),
                    "share fh=g caller=client2 oh=s2 mode=0 access=2"}),
            (std::vector<std::string>{
                "test stat=denied holder_svid=1 holder_oh=1@client1 holder_offset=0 "
                "holder_length=10 holder_exclusive=1",
                "test stat=denied holder_svid=2 holder_oh=2@client1 holder_offset=20 "
                "holder_length=10 holder_exclusive=0",
                "share stat=denied sequence=0"}));

  // From client 1 itself: its locks and shares are gone.
  EXPECT_EQ(RunOne(1, "free_all name=client1 state=3"), "free_all ok");
  EXPECT_EQ(Run(2, {Op("test", 2, 5, "offset=0 length=100"),
                    "share fh=g caller=client2 oh=s2 mode=0 access=2"}),
            (std::vector<std::string>{"test stat=granted", "share stat=granted sequence=0"}));
  EXPECT_EQ(hosts().nlockd().Stop(), 0);
}

TEST_F(NlmBetweenHosts, FreeAllWakesTheWaitersItsLocksBlocked) {
  ASSERT_TRUE(hosts().StartNlockd({"--granted-callback", "sync"}));
  testutil::Subprocess* callbacks = hosts().StartCallbackServer(2);
  ASSERT_NE(callbacks, nullptr);
  EXPECT_EQ(RunOne(1, Op("lock", 1, 1, "offset=0 length=10")), "lock stat=granted");
  EXPECT_EQ(RunOne(2, Op("lock", 2, 2, "offset=5 length=10 block=1")), "lock stat=blocked");
  EXPECT_EQ(RunOne(1, "free_all name=client1 state=5"), "free_all ok");
  auto granted = callbacks->WaitForLine(std::regex("^GRANTED .* svid=(\\d+) "), kCallbackTimeout);
  ASSERT_TRUE(granted) << callbacks->output() << hosts().nlockd().process().output();
  EXPECT_EQ((*granted)[1].str(), "2");
  EXPECT_EQ(hosts().nlockd().Stop(), 0);
}

// Deadlock across hosts: client 1's owner holds f and waits for g, client 2's holds g; client
// 2's owner blocking on f would close the cycle, so that request is refused (version 4
// DEADLCK, versions 1 and 3 DENIED, as Linux lockd answers EDEADLK) in LOCK and LOCK_MSG,
// every time it is sent; client 1's waiter is untouched and is granted when client 2 lets go.
struct DeadlockCase {
  uint32_t version;
  bool tcp;
};

class NlmDeadlock : public NlmBetweenHosts, public ::testing::WithParamInterface<DeadlockCase> {};

std::string DeadlockCaseName(const ::testing::TestParamInfo<DeadlockCase>& param) {
  return "V" + std::to_string(param.param.version) + (param.param.tcp ? "Tcp" : "Udp");
}

INSTANTIATE_TEST_SUITE_P(VersionsAndTransports, NlmDeadlock,
                         ::testing::Values(DeadlockCase{4, true}, DeadlockCase{3, false},
                                           DeadlockCase{1, false}),
                         DeadlockCaseName);

TEST_P(NlmDeadlock, TheRequestThatClosesACycleAcrossHostsIsRefused) {
  const auto [version, tcp] = GetParam();
  const std::string refused = version == 4 ? "deadlck" : "denied";
  ASSERT_TRUE(hosts().StartNlockd({}));
  testutil::Subprocess* nlm1 = hosts().StartCallbackServer(1);
  ASSERT_NE(nlm1, nullptr);
  testutil::Subprocess* nlm2 = hosts().StartCallbackServer(2);
  ASSERT_NE(nlm2, nullptr);
  const std::string on_f = "fh=f offset=0 length=10";
  const std::string on_g = "fh=g offset=0 length=10";

  EXPECT_EQ(Run(1, {Op("lock", 1, 1, on_f)}, version, tcp),
            std::vector<std::string>{"lock stat=granted"});
  EXPECT_EQ(Run(2, {Op("lock", 2, 2, on_g)}, version, tcp),
            std::vector<std::string>{"lock stat=granted"});
  EXPECT_EQ(Run(1, {Op("lock", 1, 1, on_g + " block=1")}, version, tcp),
            std::vector<std::string>{"lock stat=blocked"});
  // Client 2 closes the cycle, twice (a client retrying gets the same answer), and once more
  // as a LOCK_MSG whose LOCK_RES carries the refusal (over TCP: over UDP the LOCK_RES goes to
  // the sending port, which nlm_client does not keep open).
  EXPECT_EQ(Run(2, {Op("lock", 2, 2, on_f + " block=1"), Op("lock", 2, 2, on_f + " block=1")},
                version, tcp),
            (std::vector<std::string>{"lock stat=" + refused, "lock stat=" + refused}));
  EXPECT_EQ(Run(2, {Op("lock_msg", 2, 2, on_f + " block=1 cookie=dl")}, version, true),
            std::vector<std::string>{"lock_msg sent"});
  auto res = nlm2->WaitForLine(std::regex("^LOCK_RES .*"), kCallbackTimeout);
  ASSERT_TRUE(res) << nlm2->output() << hosts().nlockd().process().output();
  EXPECT_EQ((*res)[0].str(), "LOCK_RES version=" + std::to_string(version) + " stat=" + refused +
                                 " cookie=" + tools::Hex("dl"));
  // A non-blocking request is an ordinary conflict.
  EXPECT_EQ(Run(2, {Op("lock", 2, 2, on_f)}, version, tcp),
            std::vector<std::string>{"lock stat=denied"});
  // Client 1 still waits: when client 2 lets g go, client 1's owner gets it.
  EXPECT_EQ(Run(2, {Op("unlock", 2, 2, on_g)}, version, tcp),
            std::vector<std::string>{"unlock stat=granted"});
  auto granted =
      nlm1->WaitForLine(std::regex("^GRANTED_MSG .* svid=(\\d+) .*fh=g"), kCallbackTimeout);
  ASSERT_TRUE(granted) << nlm1->output() << hosts().nlockd().process().output();
  EXPECT_EQ((*granted)[1].str(), "1");
  EXPECT_EQ(hosts().nlockd().Stop(), 0);
}

// A chain that is no cycle waits: client 1 waits for client 2, which waits for client 1's
// other owner; nothing is refused.
TEST_F(NlmBetweenHosts, AChainAcrossHostsThatIsNotACycleWaits) {
  ASSERT_TRUE(hosts().StartNlockd({}));
  EXPECT_EQ(Run(1, {Op("lock", 1, 1, "fh=f offset=0 length=1"),
                    Op("lock", 1, 3, "fh=h offset=0 length=1")}),
            (std::vector<std::string>{"lock stat=granted", "lock stat=granted"}));
  EXPECT_EQ(RunOne(2, Op("lock", 2, 2, "fh=g offset=0 length=1")), "lock stat=granted");
  EXPECT_EQ(RunOne(1, Op("lock", 1, 1, "fh=g offset=0 length=1 block=1")), "lock stat=blocked");
  EXPECT_EQ(RunOne(2, Op("lock", 2, 2, "fh=h offset=0 length=1 block=1")), "lock stat=blocked");
  EXPECT_EQ(hosts().nlockd().Stop(), 0);
}

// nlm.deadlock_detection = false: the request that closes the cycle waits like any other.
TEST_F(NlmBetweenHosts, WithDetectionOffTheRequestThatClosesACycleWaits) {
  ASSERT_TRUE(hosts().StartNlockd({"--deadlock-detection", "false"}));
  EXPECT_EQ(RunOne(1, Op("lock", 1, 1, "fh=f offset=0 length=1")), "lock stat=granted");
  EXPECT_EQ(RunOne(2, Op("lock", 2, 2, "fh=g offset=0 length=1")), "lock stat=granted");
  EXPECT_EQ(RunOne(1, Op("lock", 1, 1, "fh=g offset=0 length=1 block=1")), "lock stat=blocked");
  EXPECT_EQ(RunOne(2, Op("lock", 2, 2, "fh=f offset=0 length=1 block=1")), "lock stat=blocked");
  EXPECT_EQ(hosts().nlockd().Stop(), 0);
}

}  // namespace
}  // namespace nlockd::integration
