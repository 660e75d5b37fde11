// SPDX-License-Identifier: Apache-2.0
// NlmService's shutdown under load: callbacks to clients that never answer, and a journal
// whose writes never complete.
#include <chrono>
#include <exception>
#include <memory>
#include <optional>

#include <asio/co_spawn.hpp>
#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <gtest/gtest.h>

#include "nlm/testing/service_test_fixture.hpp"
#include "rpc/use_tuple.hpp"
#include "testutil/captured_log.hpp"

namespace nlockd::nlm {
namespace {

using std::chrono::milliseconds;
using test_support::FakeMonitor;
using test_support::ManualJournal;
using testutil::RunCoroutine;

// A client that never answers: each call waits until the calling coroutine is cancelled
// (whatever its deadline says), and counts that.
class SilentCaller : public ClientCaller {
 public:
  asio::awaitable<rpc::CallResult> Call(ClientAddress, uint32_t, uint32_t procedure,
                                        std::vector<uint8_t>, milliseconds) override {
    ++calls;
    last_procedure = procedure;
    asio::steady_timer never(co_await asio::this_coro::executor, std::chrono::hours(1));
    auto [ec] = co_await never.async_wait(rpc::kUseTuple);
    if (ec == asio::error::operation_aborted) ++cancelled;
    rpc::CallResult result;
    result.status = rpc::CallStatus::kTimedOut;
    co_return result;
  }
  int calls = 0;
  int cancelled = 0;
  uint32_t last_procedure = 0;
};

rpc::CallContext From(const char* address) {
  rpc::CallContext context;
  context.peer_address = asio::ip::make_address(address);
  context.peer_port = 800;
  context.version = NLM4_VERS;
  return context;
}

nlm4_lockargs LockArgs(const char* caller, int32_t svid, bool block, const char* fh) {
  nlm4_lockargs args;
  args.cookie = "cookie-" + std::to_string(svid);
  args.block = block;
  args.exclusive = true;
  args.alock = nlm4_lock{caller, fh, std::to_string(svid) + "@" + caller, svid, 0, 10};
  args.state = 3;
  return args;
}

TEST(NlmServiceShutdown, CancelsCallbacksInFlightAndReportsAJournalWriteThatHangs) {
  asio::io_context io;
  SteadyClock clock;
  lock::LockManager locks(clock);
  FakeMonitor monitor;
  SilentCaller caller;
  NlmOptions options;
  // The shutdown bound is the longer deadline plus a second: 1.3 s here.
  options.callback_deadline = milliseconds(300);
  options.res_deadline = milliseconds(300);
  auto service = std::make_unique<NlmService>(io.get_executor(), locks, monitor, caller, options);
  auto run = [&](auto awaitable) { return RunCoroutine(io, std::move(awaitable)); };

  // A holds file1, B waits for it; D holds file3.
  auto held = LockArgs("client-a", 1, false, "file1");
  ASSERT_EQ(run(service->Lock(From("192.0.2.1"), held, true)).stat, NLM4_GRANTED);
  ASSERT_EQ(
      run(service->Lock(From("192.0.2.2"), LockArgs("client-b", 2, true, "file1"), true)).stat,
      NLM4_BLOCKED);
  ASSERT_EQ(
      run(service->Lock(From("192.0.2.4"), LockArgs("client-d", 4, false, "file3"), true)).stat,
      NLM4_GRANTED);
  // A's UNLOCK grants B: its GRANTED_MSG callback goes out and is never answered.
  run(service->Unlock(From("192.0.2.1"), nlm4_unlockargs{held.cookie, held.alock}));
  io.restart();
  io.run_for(milliseconds(20));
  ASSERT_EQ(caller.calls, 1);
  ASSERT_EQ(caller.last_procedure, static_cast<uint32_t>(NLM_GRANTED_MSG));

  // From now on the store never completes a write: C's LOCK waits for its write (a call in
  // flight), and releasing D writes in the background.
  ManualJournal journal(io.get_executor());
  service->set_journal(&journal);
  const rpc::CallContext c = From("192.0.2.3");  // Lock keeps a reference to it
  std::optional<nlm4_res> c_answer;
  asio::co_spawn(io, service->Lock(c, LockArgs("client-c", 3, false, "file2"), true),
                 [&](std::exception_ptr, nlm4_res res) { c_answer = res; });
  EXPECT_EQ(service->ReleaseHosts("192.0.2.4").hosts, 1u);
  io.restart();
  io.run_for(milliseconds(20));
  ASSERT_EQ(journal.writes.size(), 2u);

  testutil::CapturedLog log;
  const auto started = std::chrono::steady_clock::now();
  run(service->Shutdown());
  const auto took = std::chrono::steady_clock::now() - started;
  // The callback was cancelled at once; the background write held the shutdown for its bound,
  // and was named when the bound ran out.
  EXPECT_EQ(caller.cancelled, 1);
  EXPECT_GE(took, milliseconds(1300));
  EXPECT_LT(took, milliseconds(5000));
  EXPECT_EQ(log.Count("nlm: 1 background journal write still running 1300 ms after shutdown "
                      "began; shutting down without them"),
            1u)
      << log.text();
  EXPECT_FALSE(c_answer.has_value());

  // The store comes back before the service goes: the call is answered, the write ends.
  journal.CompleteNext(true);
  journal.CompleteNext(true);
  io.restart();
  io.run_for(milliseconds(20));
  ASSERT_TRUE(c_answer.has_value());
  EXPECT_EQ(c_answer->stat, NLM4_GRANTED);
  run(service->Shutdown());  // a second time: nothing left, returns at once
  service.reset();
}

}  // namespace
}  // namespace nlockd::nlm
