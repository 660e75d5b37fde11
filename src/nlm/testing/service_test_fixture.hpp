// SPDX-License-Identifier: Apache-2.0
// The fixture of NlmService's unit tests: fakes for the monitor, the client calls and the lock
// journal, and a service on a test io_context.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <asio/io_context.hpp>
#include <gtest/gtest.h>

#include "base/clock.hpp"
#include "nlm/service.hpp"
#include "rpc/event.hpp"
#include "testutil/run_coroutine.hpp"

namespace nlockd::nlm::test_support {

using testutil::RunCoroutine;

class FakeMonitor : public HostMonitor {
 public:
  asio::awaitable<bool> Monitor(MonitorRequest request) override {
    requests.push_back(request);
    co_return succeed;
  }
  std::vector<MonitorRequest> requests;
  bool succeed = true;
};

// Records the calls NLM makes to clients and answers them as told.
class FakeCaller : public ClientCaller {
 public:
  struct Sent {
    ClientAddress client;
    uint32_t version;
    uint32_t procedure;
    std::vector<uint8_t> args;
  };
  asio::awaitable<rpc::CallResult> Call(ClientAddress client, uint32_t version, uint32_t procedure,
                                        std::vector<uint8_t> args,
                                        std::chrono::milliseconds) override {
    sent.push_back(Sent{client, version, procedure, args});
    rpc::CallResult result;
    result.status = reachable ? rpc::CallStatus::kOk : rpc::CallStatus::kTimedOut;
    if (reachable && granted_answer && procedure == NLM_GRANTED) {
      nlm4_testargs granted;
      xdr::Decoder in(args);
      EXPECT_TRUE(Decode(in, version, granted));
      xdr::Encoder out(result.body);
      Encode(out, version, nlm4_res{granted.cookie, *granted_answer});
    }
    if (on_call) on_call(sent.back());
    co_return result;
  }
  void ForgetHost(const asio::ip::address& address) override {
    forgotten.push_back(address.to_string());
  }
  std::vector<Sent> sent;
  std::vector<std::string> forgotten;  // ForgetHost() calls, in order
  bool reachable = true;
  // When set, a GRANTED call's reply carries this status (GRANTED_MSG's reply is void).
  std::optional<nlm4_stats> granted_answer;
  std::function<void(const Sent&)> on_call;
};

// Records what NLM journals, in order; `succeed` decides the answer. `on_record` runs inside
// Record, so a test can check what was (not yet) answered or sent at that moment. With
// `writes_inline` it records inline too (as the journal over the lock log does).
class RecordingJournal : public LockJournal {
 public:
  asio::awaitable<bool> Record(std::vector<JournalEntry> entries) override {
    co_return Recorded(std::move(entries));
  }
  bool records_inline() const override { return writes_inline; }
  bool RecordInline(std::span<const JournalEntryRef> entries) override {
    return Recorded(Copies(entries));
  }
  // The entries a RecordInline names, as JournalEntry values.
  static std::vector<JournalEntry> Copies(std::span<const JournalEntryRef> entries) {
    std::vector<JournalEntry> copies;
    for (const JournalEntryRef& e : entries) {
      copies.push_back(JournalEntry{e.kind, e.file, e.owner, e.range});
    }
    return copies;
  }
  bool Recorded(std::vector<JournalEntry> entries) {
    batches.push_back(entries);
    if (on_record) on_record(entries);
    return succeed;
  }
  std::vector<std::vector<JournalEntry>> batches;
  bool succeed = true;
  bool writes_inline = false;
  std::function<void(const std::vector<JournalEntry>&)> on_record;
};

// A journal whose writes stay in flight until the test completes them, oldest first, with
// success or failure.
class ManualJournal : public LockJournal {
 public:
  struct Write {
    explicit Write(asio::any_io_executor executor) : done(std::move(executor)) {}
    std::vector<JournalEntry> entries;
    rpc::Event done;
    bool ok = false;
  };
  explicit ManualJournal(asio::any_io_executor executor) : executor_(std::move(executor)) {}

  // With `writes_inline`, a write NLM makes inline succeeds at once and is kept in `inline_writes`
  // (the writes of the coroutine forms stay in flight as before).
  bool records_inline() const override { return writes_inline; }
  bool RecordInline(std::span<const JournalEntryRef> entries) override {
    inline_writes.push_back(RecordingJournal::Copies(entries));
    return true;
  }
  bool writes_inline = false;
  std::vector<std::vector<JournalEntry>> inline_writes;

  asio::awaitable<bool> Record(std::vector<JournalEntry> entries) override {
    auto write = std::make_shared<Write>(executor_);
    write->entries = std::move(entries);
    writes.push_back(write);
    co_await write->done.Wait();
    co_return write->ok;
  }

  // Completes the oldest write still in flight.
  void CompleteNext(bool ok) {
    ASSERT_FALSE(writes.empty());
    std::shared_ptr<Write> write = writes.front();
    writes.erase(writes.begin());
    write->ok = ok;
    write->done.Set();
  }

  std::vector<std::shared_ptr<Write>> writes;  // In flight, oldest first.

 private:
  asio::any_io_executor executor_;
};

// Renders journal batches as text: "locks f=file1 h=192.0.2.1 svid=1; share ...; released h=..."
inline std::string Render(const std::vector<std::vector<JournalEntry>>& batches) {
  std::string out;
  for (const auto& batch : batches) {
    if (!out.empty()) out += " | ";
    std::string line;
    for (const auto& e : batch) {
      if (!line.empty()) line += "; ";
      switch (e.kind) {
        case JournalEntry::Kind::kLocks:
          line += "locks f=" + e.file.value() + " h=" + e.owner.host.value() +
                  " svid=" + std::to_string(e.owner.svid);
          break;
        case JournalEntry::Kind::kShare:
          line += "share f=" + e.file.value() + " h=" + e.owner.host.value() +
                  " oh=" + e.owner.oh.value();
          break;
        case JournalEntry::Kind::kHostReleased:
          line += "released h=" + e.owner.host.value();
          break;
      }
    }
    out += line;
  }
  return out;
}

// A host's locks on file1 as "X [0,9], S [10,19]".
inline std::string OwnerLocks(const lock::LockManager& locks, const char* host) {
  std::string out;
  locks.ForEachLock(
      [&](const lock::LockView& v) {
        if (!out.empty()) out += ", ";
        out += (v.type == lock::LockType::kExclusive ? "X " : "S ") + v.range.ToString();
      },
      lock::StateFilter{lock::HostId(host), lock::FileKey("file1")});
  return out;
}

// The GRANTED / GRANTED_MSG arguments of a recorded call.
inline nlm4_testargs GrantedArgs(const FakeCaller::Sent& sent) {
  nlm4_testargs args;
  xdr::Decoder dec(sent.args);
  EXPECT_TRUE(Decode(dec, sent.version, args));
  return args;
}

class NlmServiceTest : public ::testing::Test {
 protected:
  NlmServiceTest() { MakeService(TestOptions()); }

  // Same cookies every run, short callback deadlines, two attempts per grant.
  static NlmOptions TestOptions() {
    NlmOptions options;
    options.cookie_key = GrantCookies::Key{1, 2};
    options.callback_deadline = std::chrono::milliseconds(50);
    options.callback_retry_delay = std::chrono::milliseconds(5);
    options.callback_attempts = 2;
    return options;
  }

  // Replaces the service with one made with `options` (the old one is shut down first).
  void MakeService(const NlmOptions& options) {
    if (service_) RunCoroutine(io_, service_->Shutdown());
    service_ = std::make_unique<NlmService>(io_.get_executor(), locks_, monitor_, caller_, options);
  }

  // Callbacks still in flight end before the service goes (their frames hold its TaskGate).
  ~NlmServiceTest() override { RunCoroutine(io_, service_->Shutdown()); }

  static rpc::CallContext From(const char* address, uint32_t version = NLM4_VERS,
                               uint16_t port = 800) {
    rpc::CallContext context;
    context.peer_address = asio::ip::make_address(address);
    context.peer_port = port;
    context.version = version;
    return context;
  }

  static nlm4_lockargs LockArgs(const char* caller, int32_t svid, uint64_t offset, uint64_t len,
                                bool block = false, const char* fh = "file1") {
    nlm4_lockargs args;
    args.cookie = "cookie-" + std::to_string(svid);
    args.block = block;
    args.exclusive = true;
    args.alock = nlm4_lock{caller, fh, std::to_string(svid) + "@" + caller, svid, offset, len};
    args.state = 3;
    return args;
  }

  nlm4_res Lock(const rpc::CallContext& context, nlm4_lockargs args, bool monitor = true) {
    return RunCoroutine(io_, service_->Lock(context, std::move(args), monitor));
  }

  // Host A (192.0.2.1, svid 1) holds [0, 10) of file1; `waiters` hosts B, C, ... (192.0.2.2,
  // 192.0.2.3, ...; svid 2, 3, ...) queue behind it in that order. Returns A's lock: its unlock
  // grants the range to B.
  nlm4_lockargs HoldWithWaiters(int waiters) {
    auto held = LockArgs("client-a", 1, 0, 10);
    EXPECT_EQ(Lock(From("192.0.2.1"), held).stat, NLM4_GRANTED);
    for (int i = 1; i <= waiters; ++i) {
      const std::string host = "192.0.2." + std::to_string(1 + i);
      const std::string caller = std::string("client-") + static_cast<char>('a' + i);
      EXPECT_EQ(Lock(From(host.c_str()), LockArgs(caller.c_str(), 1 + i, 0, 10, true)).stat,
                NLM4_BLOCKED);
    }
    return held;
  }

  nlm4_res Unlock(const rpc::CallContext& context, const nlm4_lockargs& lock) {
    return RunCoroutine(io_, service_->Unlock(context, nlm4_unlockargs{lock.cookie, lock.alock}));
  }

  void RunFor(std::chrono::milliseconds duration) {
    io_.restart();
    io_.run_for(duration);
  }

  asio::io_context io_;
  SteadyClock clock_;
  lock::LockManager locks_{clock_};
  FakeMonitor monitor_;
  FakeCaller caller_;
  std::unique_ptr<NlmService> service_;
};

}  // namespace nlockd::nlm::test_support
