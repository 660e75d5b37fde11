// SPDX-License-Identifier: Apache-2.0
// The wait-for check of blocking requests (deadlock detection), with and without it (the
// `/check:1` and `/check:0` arguments): each benchmark makes 10,000 queued waiters first, so
// the check never takes its "nobody waits" shortcut, then measures one blocking LOCK and the
// CANCEL that withdraws it (or, for a refused request, the LOCK alone; it changes nothing).
//
//   BM_BlockingLock        the common case: the holder waits for nobody.
//   BM_Chain/<length>      the holder heads a chain of waiting owners: 10 (followed to its end)
//                          or 100 (the check stops at the 16-owner bound).
//   BM_CycleRefused        the request closes a cycle of 16 owners and is refused.
//   BM_Fan/<width>         the request waits for `width` readers that all wait for others:
//                          1,000 (followed) or 10,000 (the check stops at its step limit).

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "base/clock.hpp"
#include "lock/lock_manager.hpp"

namespace nlockd::lock {
namespace {

constexpr uint64_t kWaiters = 10'000;

FileKey Handle(uint64_t n) {
  std::string bytes(32, '\0');
  for (int i = 0; i < 8; ++i) bytes[static_cast<size_t>(i)] = static_cast<char>(n >> (8 * i));
  bytes[31] = 'f';
  return FileKey(std::move(bytes));
}

// Owner n: 100 hosts, Linux-style owner handles.
LockOwner ClientOwner(uint64_t n) {
  const uint64_t host = n % 100;
  const auto svid = static_cast<int32_t>(n);
  return LockOwner{HostId("10.2." + std::to_string(host / 256) + "." + std::to_string(host % 256)),
                   svid, OwnerHandle(std::to_string(svid) + "@client-" + std::to_string(host))};
}

LockRequest Request(const FileKey& file, const LockOwner& owner, LockType type, bool block) {
  LockRequest request;
  request.file = file;
  request.owner = owner;
  request.offset = 0;
  request.length = 1;
  request.type = type;
  request.block = block;
  return request;
}

LockManagerOptions Options(bool check) {
  LockManagerOptions options;
  options.max_hosts = 1'000'000;
  options.max_waiters_per_host = 1'000'000;
  options.detect_deadlocks = check;
  return options;
}

void Expect(bool ok) {
  if (!ok) std::abort();
}

// Builds `chains` chains of `length` owners (by default as many as make kWaiters waiters): in
// each, owner i holds file i and waits for file i+1; the last owner waits for nobody. Returns
// the first file of each chain. Files and owners are numbered from `base`.
std::vector<FileKey> MakeChains(LockManager& manager, uint64_t length, uint64_t base,
                                uint64_t chains = 0) {
  std::vector<FileKey> heads;
  if (chains == 0) chains = kWaiters / (length - 1);
  for (uint64_t c = 0; c < chains; ++c) {
    const uint64_t first = base + c * length;
    for (uint64_t i = 0; i < length; ++i) {
      Expect(
          manager
              .Lock(Request(Handle(first + i), ClientOwner(first + i), LockType::kExclusive, false))
              .status == LockStatus::kGranted);
    }
    for (uint64_t i = 0; i + 1 < length; ++i) {
      Expect(manager
                 .Lock(Request(Handle(first + i + 1), ClientOwner(first + i), LockType::kExclusive,
                               true))
                 .status == LockStatus::kBlocked);
    }
    heads.push_back(Handle(first));
  }
  return heads;
}

// The requester: an owner that holds a lock of its own (so the check runs for it).
LockOwner Requester(LockManager& manager) {
  const LockOwner me = ClientOwner(9'000'000);
  Expect(manager.Lock(Request(Handle(9'000'000), me, LockType::kExclusive, false)).status ==
         LockStatus::kGranted);
  return me;
}

// Blocking LOCK on `file` (held by someone) and its CANCEL, per iteration.
void BlockAndCancel(benchmark::State& state, LockManager& manager, const LockOwner& me,
                    const FileKey& file) {
  const LockRequest lock = Request(file, me, LockType::kExclusive, true);
  for (auto _ : state) {
    LockOutcome out = manager.Lock(lock);
    if (out.status != LockStatus::kBlocked) state.SkipWithError("not blocked");
    benchmark::DoNotOptimize(out);
    CancelOutcome cancelled = manager.Cancel(lock);
    benchmark::DoNotOptimize(cancelled);
  }
  state.counters["gave_up"] = benchmark::Counter(
      static_cast<double>(manager.deadlock_counts().gave_up), benchmark::Counter::kAvgIterations);
}

void BM_BlockingLock(benchmark::State& state) {
  SteadyClock clock;
  LockManager manager(clock, Options(state.range(0) != 0));
  MakeChains(manager, 11, 0);  // The 10,000 waiters elsewhere.
  const LockOwner me = Requester(manager);
  const FileKey held = Handle(8'000'000);
  Expect(manager.Lock(Request(held, ClientOwner(8'000'000), LockType::kExclusive, false)).status ==
         LockStatus::kGranted);
  BlockAndCancel(state, manager, me, held);
}
BENCHMARK(BM_BlockingLock)->ArgName("check")->Arg(0)->Arg(1);

void BM_Chain(benchmark::State& state) {
  SteadyClock clock;
  LockManager manager(clock, Options(state.range(1) != 0));
  const std::vector<FileKey> heads = MakeChains(manager, static_cast<uint64_t>(state.range(0)), 0);
  const LockOwner me = Requester(manager);
  BlockAndCancel(state, manager, me, heads[heads.size() / 2]);
}
BENCHMARK(BM_Chain)->ArgNames({"length", "check"})->ArgsProduct({{10, 100}, {0, 1}});

void BM_CycleRefused(benchmark::State& state) {
  SteadyClock clock;
  LockManager manager(clock, Options(true));
  MakeChains(manager, 11, 0);
  // A chain of 16 owners: its last one blocking on the first file closes the cycle.
  const std::vector<FileKey> cycle = MakeChains(manager, 16, 5'000'000, 1);
  const LockRequest closing =
      Request(cycle[0], ClientOwner(5'000'000 + 15), LockType::kExclusive, true);
  for (auto _ : state) {
    LockOutcome out = manager.Lock(closing);
    if (!out.deadlock) state.SkipWithError("not refused");
    benchmark::DoNotOptimize(out);
  }
}
BENCHMARK(BM_CycleRefused);

// `width` readers hold a shared lock on the fan's file, and each waits for a file held by an
// owner that waits for nobody; with more fans, kWaiters waiters in all.
void BM_Fan(benchmark::State& state) {
  SteadyClock clock;
  LockManager manager(clock, Options(state.range(1) != 0));
  const auto width = static_cast<uint64_t>(state.range(0));
  std::vector<FileKey> fans;
  for (uint64_t f = 0; f < kWaiters / width; ++f) {
    const FileKey fan = Handle(1'000'000 + f);
    fans.push_back(fan);
    for (uint64_t r = 0; r < width; ++r) {
      const uint64_t reader = f * width + r;
      Expect(manager.Lock(Request(fan, ClientOwner(reader), LockType::kShared, false)).status ==
             LockStatus::kGranted);
      const FileKey other = Handle(2'000'000 + reader);
      Expect(
          manager.Lock(Request(other, ClientOwner(3'000'000 + reader), LockType::kExclusive, false))
              .status == LockStatus::kGranted);
      Expect(manager.Lock(Request(other, ClientOwner(reader), LockType::kExclusive, true)).status ==
             LockStatus::kBlocked);
    }
  }
  const LockOwner me = Requester(manager);
  BlockAndCancel(state, manager, me, fans[0]);
}
BENCHMARK(BM_Fan)->ArgNames({"width", "check"})->ArgsProduct({{1000, 10000}, {0, 1}});

}  // namespace
}  // namespace nlockd::lock

BENCHMARK_MAIN();
