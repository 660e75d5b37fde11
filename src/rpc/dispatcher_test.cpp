// SPDX-License-Identifier: Apache-2.0
#include "rpc/dispatcher.hpp"

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <asio/io_context.hpp>
#include <gtest/gtest.h>

#include "base/error.hpp"
#include "base/logging.hpp"
#include "testutil/run_coroutine.hpp"

namespace nlockd::rpc {
namespace {

using Bytes = std::vector<uint8_t>;
using testutil::RunCoroutine;

constexpr uint32_t kProg = 200000;

asio::awaitable<HandlerStatus> Echo(const CallContext&, xdr::Decoder& args, xdr::Encoder& out) {
  uint32_t value = 0;
  if (!args.U32(value, "value")) co_return HandlerStatus::kGarbageArgs;
  out.U32(value + 1);
  co_return HandlerStatus::kSuccess;
}

asio::awaitable<HandlerStatus> Throws(const CallContext&, xdr::Decoder&, xdr::Encoder& out) {
  out.U32(1234);  // Partial result that must not reach the wire.
  throw std::runtime_error("boom");
  co_return HandlerStatus::kSuccess;
}

// A caller's broken contract, found before anything changed: that call fails, the rest go on.
asio::awaitable<HandlerStatus> BreaksContract(const CallContext&, xdr::Decoder&, xdr::Encoder&) {
  NLOCKD_REQUIRE(false, "the caller broke it");
  co_return HandlerStatus::kSuccess;
}

// An invariant of our own broken halfway through a change.
asio::awaitable<HandlerStatus> BreaksInvariant(const CallContext&, xdr::Decoder&, xdr::Encoder&) {
  NLOCKD_ASSERT(false, "half-changed state");
  co_return HandlerStatus::kSuccess;
}

asio::awaitable<HandlerStatus> Silent(const CallContext&, xdr::Decoder&, xdr::Encoder&) {
  co_return HandlerStatus::kNoReply;
}

asio::awaitable<HandlerStatus> WhoAmI(const CallContext& context, xdr::Decoder&,
                                      xdr::Encoder& out) {
  out.U32(context.auth_sys ? context.auth_sys->uid : 0xffffffff);
  co_return HandlerStatus::kSuccess;
}

// Records a protocol status for the observer: "granted" for a non-zero argument, else
// "denied"; a missing argument is garbage (after the status was recorded).
asio::awaitable<HandlerStatus> Judge(const CallContext& context, xdr::Decoder& args,
                                     xdr::Encoder&) {
  uint32_t value = 0;
  const bool decoded = args.U32(value, "value");
  context.result = value != 0 ? "granted" : "denied";
  co_return decoded ? HandlerStatus::kSuccess : HandlerStatus::kGarbageArgs;
}

class DispatcherTest : public ::testing::Test {
 protected:
  DispatcherTest() {
    for (uint32_t vers : {1u, 3u, 4u}) {
      dispatcher_.Register(kProg, vers, 1, "ECHO", Echo);
    }
    dispatcher_.Register(kProg, 4, 2, "THROWS", Throws);
    dispatcher_.Register(kProg, 4, 3, "SILENT", Silent);
    dispatcher_.Register(kProg, 4, 5, "WHOAMI", WhoAmI);
    dispatcher_.Register(kProg, 4, 8, "JUDGE", Judge);
    dispatcher_.Register(kProg, 4, 9, "CONTRACT", BreaksContract);
    dispatcher_.Register(kProg, 4, 10, "INVARIANT", BreaksInvariant);
    dispatcher_.SetObserver([this](const CallRecord& record) {
      std::string line = std::string(record.procedure_name) + ":" + std::string(record.outcome);
      if (!record.result.empty()) line += ":" + std::string(record.result);
      outcomes_.push_back(std::move(line));
    });
  }

  // Returns the reply, or nullopt when the dispatcher sends none.
  std::optional<Bytes> Dispatch(const Bytes& message) {
    Bytes reply;
    bool has_reply = RunCoroutine(io_, dispatcher_.Dispatch(CallContext{}, message, reply));
    if (!has_reply) {
      EXPECT_TRUE(reply.empty());
      return std::nullopt;
    }
    return reply;
  }

  static Bytes Call(uint32_t vers, uint32_t proc, std::initializer_list<uint32_t> args,
                    std::optional<AuthSys> auth = std::nullopt) {
    Bytes msg;
    xdr::Encoder enc(msg);
    EncodeCallHeader(enc, 99, kProg, vers, proc, auth);
    for (uint32_t a : args) enc.U32(a);
    return msg;
  }

  asio::io_context io_;
  Dispatcher dispatcher_;
  std::vector<std::string> outcomes_;
};

TEST_F(DispatcherTest, SuccessCarriesTheHandlersResult) {
  auto reply = Dispatch(Call(3, 1, {41}));
  ASSERT_TRUE(reply);
  DecodedReply decoded = DecodeReply(*reply);
  ASSERT_TRUE(decoded.ok);
  EXPECT_EQ(decoded.xid, 99u);
  EXPECT_EQ(decoded.accept_stat, AcceptStat::kSuccess);
  xdr::Decoder body(decoded.body);
  uint32_t value = 0;
  ASSERT_TRUE(body.U32(value, "v"));
  EXPECT_EQ(value, 42u);
  EXPECT_EQ(outcomes_, (std::vector<std::string>{"ECHO:success"}));
}

TEST_F(DispatcherTest, TheObserverSeesTheProtocolStatusOfSuccessfulCallsOnly) {
  Dispatch(Call(4, 8, {1}));
  Dispatch(Call(4, 8, {0}));
  Dispatch(Call(4, 8, {}));  // Garbage: the RPC outcome is what counts, not the status.
  EXPECT_EQ(outcomes_, (std::vector<std::string>{"JUDGE:success:granted", "JUDGE:success:denied",
                                                 "JUDGE:garbage_args"}));
}

TEST_F(DispatcherTest, TruncatedArgumentsAreGarbageArgsWithNoBody) {
  auto reply = Dispatch(Call(4, 1, {}));
  ASSERT_TRUE(reply);
  DecodedReply decoded = DecodeReply(*reply);
  EXPECT_EQ(decoded.accept_stat, AcceptStat::kGarbageArgs);
  EXPECT_TRUE(decoded.body.empty());
}

TEST_F(DispatcherTest, ThrowingHandlerIsSystemErrAndDropsItsPartialResult) {
  auto reply = Dispatch(Call(4, 2, {}));
  ASSERT_TRUE(reply);
  DecodedReply decoded = DecodeReply(*reply);
  EXPECT_EQ(decoded.accept_stat, AcceptStat::kSystemErr);
  EXPECT_TRUE(decoded.body.empty());
}

TEST_F(DispatcherTest, ABrokenContractFailsThatCallAndTheNextIsServed) {
  auto reply = Dispatch(Call(4, 9, {}));
  ASSERT_TRUE(reply);
  EXPECT_EQ(DecodeReply(*reply).accept_stat, AcceptStat::kSystemErr);
  reply = Dispatch(Call(4, 1, {41}));
  ASSERT_TRUE(reply);
  EXPECT_EQ(DecodeReply(*reply).accept_stat, AcceptStat::kSuccess);
}

using DispatcherDeathTest = DispatcherTest;

TEST_F(DispatcherDeathTest, ABrokenInvariantInAHandlerEndsTheProcess) {
  // Not answered SYSTEM_ERR and served on: the state it left is not to be trusted.
  EXPECT_DEATH(
      {
        SetUpLogging(spdlog::level::info);  // As in nlockd: the log goes to stderr.
        Dispatch(Call(4, 10, {}));
      },
      "NLOCKD_ASSERT failed.*half-changed state");
}

TEST_F(DispatcherTest, UnknownProgramVersionAndProcedure) {
  Bytes unknown_prog;
  xdr::Encoder enc(unknown_prog);
  EncodeCallHeader(enc, 1, 123456, 1, 0);
  EXPECT_EQ(DecodeReply(*Dispatch(unknown_prog)).accept_stat, AcceptStat::kProgUnavail);

  DecodedReply mismatch = DecodeReply(*Dispatch(Call(2, 1, {0})));
  EXPECT_EQ(mismatch.accept_stat, AcceptStat::kProgMismatch);
  EXPECT_EQ(mismatch.mismatch_low, 1u);
  EXPECT_EQ(mismatch.mismatch_high, 4u);

  EXPECT_EQ(DecodeReply(*Dispatch(Call(1, 2, {}))).accept_stat, AcceptStat::kProcUnavail);
  EXPECT_EQ(DecodeReply(*Dispatch(Call(4, 4, {}))).accept_stat, AcceptStat::kProcUnavail);
  EXPECT_EQ(DecodeReply(*Dispatch(Call(4, 1000000, {}))).accept_stat, AcceptStat::kProcUnavail);
}

TEST_F(DispatcherTest, WrongRpcVersionIsRpcMismatch) {
  Bytes msg = Call(4, 1, {1});
  msg[11] = 3;  // rpcvers
  DecodedReply decoded = DecodeReply(*Dispatch(msg));
  ASSERT_TRUE(decoded.ok);
  EXPECT_EQ(decoded.reply_stat, ReplyStat::kMsgDenied);
  EXPECT_EQ(decoded.reject_stat, RejectStat::kRpcMismatch);
  EXPECT_EQ(decoded.mismatch_low, 2u);
  EXPECT_EQ(decoded.mismatch_high, 2u);
}

TEST_F(DispatcherTest, AuthSysIsHandedToTheHandler) {
  auto reply = Dispatch(Call(4, 5, {}, AuthSys{1, "m", 1000, 10, {}}));
  xdr::Decoder body(DecodeReply(*reply).body);
  uint32_t uid = 0;
  ASSERT_TRUE(body.U32(uid, "uid"));
  EXPECT_EQ(uid, 1000u);
}

TEST_F(DispatcherTest, UnknownFlavourAndBadAuthSysBodyAreAuthErrors) {
  Bytes unknown = Call(4, 1, {1});
  unknown[27] = 6;  // cred flavour RPCSEC_GSS
  DecodedReply r1 = DecodeReply(*Dispatch(unknown));
  EXPECT_EQ(r1.reply_stat, ReplyStat::kMsgDenied);
  EXPECT_EQ(r1.reject_stat, RejectStat::kAuthError);
  EXPECT_EQ(r1.auth_stat, AuthStat::kBadCred);

  Bytes bad_sys;
  xdr::Encoder enc(bad_sys);
  for (uint32_t w : {99u, 0u, 2u, kProg, 4u, 1u, 1u, 4u, 7u, 0u, 0u}) enc.U32(w);
  DecodedReply r2 = DecodeReply(*Dispatch(bad_sys));
  EXPECT_EQ(r2.reject_stat, RejectStat::kAuthError);
  EXPECT_EQ(r2.auth_stat, AuthStat::kBadCred);
}

TEST_F(DispatcherTest, RepliesAndGarbageHeadersGetNoReply) {
  EXPECT_FALSE(Dispatch(Bytes{0, 0, 0, 1, 0, 0, 0, 1}).has_value());
  EXPECT_FALSE(Dispatch(Bytes{0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2, 0}).has_value());
  EXPECT_FALSE(Dispatch(Bytes{}).has_value());
}

TEST_F(DispatcherTest, NoReplyHandlerSendsNothing) {
  EXPECT_FALSE(Dispatch(Call(4, 3, {})).has_value());
}

int executions = 0;

asio::awaitable<HandlerStatus> Counting(const CallContext&, xdr::Decoder&, xdr::Encoder& out) {
  out.U32(static_cast<uint32_t>(++executions));
  co_return HandlerStatus::kSuccess;
}

TEST_F(DispatcherTest, RetransmissionIsAnsweredFromTheReplyCacheNotExecutedAgain) {
  ReplyCache cache;
  dispatcher_.SetReplyCache(&cache);
  dispatcher_.Register(kProg, 4, 6, "COUNTING", Counting, {.cache_replies = true});
  dispatcher_.Register(kProg, 4, 7, "UNCACHED", Counting);
  executions = 0;
  auto first = Dispatch(Call(4, 6, {}));
  auto again = Dispatch(Call(4, 6, {}));
  ASSERT_TRUE(first && again);
  EXPECT_EQ(*first, *again);
  EXPECT_EQ(executions, 1);
  Dispatch(Call(4, 7, {}));
  Dispatch(Call(4, 7, {}));
  EXPECT_EQ(executions, 3);
  EXPECT_EQ(outcomes_.back(), "UNCACHED:success");
  EXPECT_EQ(outcomes_[1], "COUNTING:duplicate_replayed");
}

// What an embedding host's transport hands in: the header it read and the bytes after it.
TEST_F(DispatcherTest, ADecodedHeaderIsAnsweredAsTheWholeMessageIs) {
  Bytes wrong_rpc_version = Call(4, 1, {1});
  wrong_rpc_version[11] = 3;
  Bytes unknown_flavour = Call(4, 1, {1});
  unknown_flavour[27] = 6;
  const std::vector<Bytes> messages{
      Call(4, 1, {41}),                                   // success
      Call(4, 1, {}),                                     // garbage args
      Call(4, 5, {}, AuthSys{1, "m", 1000, 10, {7, 8}}),  // AUTH_SYS to the handler
      Call(4, 8, {1}),                                    // a protocol status recorded
      Call(2, 1, {1}),                                    // prog mismatch
      Call(4, 4, {}),                                     // proc unavail
      Call(4, 3, {}),                                     // no reply
      wrong_rpc_version,
      unknown_flavour,
  };
  for (const Bytes& message : messages) {
    std::optional<Bytes> whole = Dispatch(message);
    const std::vector<std::string> whole_outcomes = std::exchange(outcomes_, {});
    const DecodedCall call = DecodeCall(message);
    ASSERT_NE(call.status, CallDecodeStatus::kMalformed);
    Bytes reply;
    const bool has_reply =
        RunCoroutine(io_, dispatcher_.Dispatch(CallContext{}, call.header, call.args, reply));
    EXPECT_EQ(has_reply, whole.has_value());
    EXPECT_EQ(reply, whole.value_or(Bytes{}));
    EXPECT_EQ(std::exchange(outcomes_, {}), whole_outcomes);
  }
}

TEST_F(DispatcherTest, ListsProgramVersionsForRpcbind) {
  auto pairs = dispatcher_.ProgramVersions();
  EXPECT_EQ(pairs.size(), 3u);
  EXPECT_TRUE(dispatcher_.Serves(kProg, 3));
  EXPECT_FALSE(dispatcher_.Serves(kProg, 2));
}

}  // namespace
}  // namespace nlockd::rpc
