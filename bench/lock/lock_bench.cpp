// SPDX-License-Identifier: Apache-2.0
// Lock manager micro-benchmarks: uncontended LOCK+UNLOCK on an empty file and on a file holding
// 100,000 other locks (the ratio shows the conflict search is O(log n + k), not O(n)), TEST on
// that file, and the memory held per lock with 1,000,000 locks over 10,000 files.
//
// Memory is counted by replacing the global operator new/delete in this binary: live bytes as
// malloc reports them (malloc_usable_size, so allocator rounding is included), plus the growth
// of the resident set as a cross-check.

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>
#include <malloc.h>

#include "base/clock.hpp"
#include "lock/lock_manager.hpp"

namespace {

std::atomic<int64_t> g_live_bytes{0};

void* CountedAlloc(size_t size) {
  void* p = std::malloc(size == 0 ? 1 : size);
  if (p == nullptr) throw std::bad_alloc();
  g_live_bytes.fetch_add(static_cast<int64_t>(malloc_usable_size(p)), std::memory_order_relaxed);
  return p;
}

void CountedFree(void* p) {
  if (p == nullptr) return;
  g_live_bytes.fetch_sub(static_cast<int64_t>(malloc_usable_size(p)), std::memory_order_relaxed);
  std::free(p);
}

}  // namespace

void* operator new(size_t size) { return CountedAlloc(size); }
void* operator new[](size_t size) { return CountedAlloc(size); }
void operator delete(void* p) noexcept { CountedFree(p); }
void operator delete[](void* p) noexcept { CountedFree(p); }
void operator delete(void* p, size_t) noexcept { CountedFree(p); }
void operator delete[](void* p, size_t) noexcept { CountedFree(p); }

namespace nlockd::lock {
namespace {

// A 32-byte file handle, the size of a typical NFSv3 handle.
FileKey Handle(uint64_t n) {
  std::string bytes(32, '\0');
  for (int i = 0; i < 8; ++i) bytes[static_cast<size_t>(i)] = static_cast<char>(n >> (8 * i));
  bytes[31] = 'f';
  return FileKey(std::move(bytes));
}

// Owners as Linux clients name them: host address, svid, oh = "svid@nodename".
LockOwner ClientOwner(uint64_t host, int32_t svid) {
  const std::string name = "client-" + std::to_string(host);
  return LockOwner{HostId("10.1." + std::to_string(host / 256) + "." + std::to_string(host % 256)),
                   svid, OwnerHandle(std::to_string(svid) + "@" + name)};
}

LockRequest Request(const FileKey& file, const LockOwner& owner, uint64_t offset, uint64_t length,
                    LockType type) {
  LockRequest request;
  request.file = file;
  request.owner = owner;
  request.offset = offset;
  request.length = length;
  request.type = type;
  return request;
}

LockManagerOptions BigOptions() {
  LockManagerOptions options;
  options.max_hosts = 1'000'000;
  options.max_locks = 100'000'000;
  options.max_locks_per_host = 100'000'000;
  return options;
}

constexpr uint64_t kStride = 16;  // Lock i of the big file covers [i*16, i*16+7].

// `count` locks on `file` by 1,000 owners on 100 hosts, exclusive and shared alternating, each
// in its own 16-byte slot; the second half of every slot is free.
void FillFile(LockManager& manager, const FileKey& file, uint64_t count) {
  for (uint64_t i = 0; i < count; ++i) {
    const uint64_t owner = i % 1000;
    const LockOutcome out = manager.Lock(
        Request(file, ClientOwner(owner / 10, static_cast<int32_t>(owner)), i * kStride, 8,
                i % 2 == 0 ? LockType::kExclusive : LockType::kShared));
    if (out.status != LockStatus::kGranted) std::abort();
  }
}

// LOCK+UNLOCK of a free range. `others` locks are on the file; `warm` means the requesting
// owner already holds a lock elsewhere on the file, so no owner or file record is created.
void LockUnlock(benchmark::State& state, uint64_t others, bool warm) {
  SteadyClock clock;
  LockManager manager(clock, BigOptions());
  const FileKey file = Handle(1);
  FillFile(manager, file, others);
  const LockOwner me = ClientOwner(5000, 1);
  if (warm) manager.Lock(Request(file, me, ~uint64_t{0} - 10, 1, LockType::kShared));
  const uint64_t slot = others / 2;
  const LockRequest lock = Request(file, me, slot * kStride + 8, 8, LockType::kExclusive);
  for (auto _ : state) {
    LockOutcome locked = manager.Lock(lock);
    benchmark::DoNotOptimize(locked);
    UnlockOutcome unlocked = manager.Unlock(file, me, lock.offset, lock.length);
    benchmark::DoNotOptimize(unlocked);
  }
  if (manager.Counts().locks != others + (warm ? 1 : 0)) std::abort();
}

void BM_LockUnlock_EmptyFile(benchmark::State& state) { LockUnlock(state, 0, false); }
void BM_LockUnlock_File100k(benchmark::State& state) { LockUnlock(state, 100'000, false); }
void BM_LockUnlock_EmptyFile_Warm(benchmark::State& state) { LockUnlock(state, 0, true); }
void BM_LockUnlock_File100k_Warm(benchmark::State& state) { LockUnlock(state, 100'000, true); }
BENCHMARK(BM_LockUnlock_EmptyFile);
BENCHMARK(BM_LockUnlock_File100k);
BENCHMARK(BM_LockUnlock_EmptyFile_Warm);
BENCHMARK(BM_LockUnlock_File100k_Warm);

// TEST against the 100k-lock file: a free range (no conflict) and one that hits a holder.
void TestOn100k(benchmark::State& state, bool conflicting) {
  SteadyClock clock;
  LockManager manager(clock, BigOptions());
  const FileKey file = Handle(1);
  FillFile(manager, file, 100'000);
  const LockOwner me = ClientOwner(5000, 1);
  const uint64_t slot = 50'000;
  const LockRequest test =
      Request(file, me, slot * kStride + (conflicting ? 0 : 8), 8, LockType::kExclusive);
  for (auto _ : state) {
    TestOutcome out = manager.Test(test);
    benchmark::DoNotOptimize(out);
  }
}

void BM_Test_File100k_Free(benchmark::State& state) { TestOn100k(state, false); }
void BM_Test_File100k_Conflict(benchmark::State& state) { TestOn100k(state, true); }
BENCHMARK(BM_Test_File100k_Free);
BENCHMARK(BM_Test_File100k_Conflict);

// Reads the resident set size in bytes.
int64_t ResidentBytes() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  long pages_total = 0;
  long pages_resident = 0;
  const int read = std::fscanf(f, "%ld %ld", &pages_total, &pages_resident);
  std::fclose(f);
  return read == 2 ? static_cast<int64_t>(pages_resident) * 4096 : 0;
}

// 1,000,000 locks over 10,000 files (100 per file), 1,000 owners on 100 hosts. `hosts_per_file`
// bounds how many distinct hosts lock each file: 100 is the worst case for the per-host file
// index (every lock on a file from another host), 10 a more usual sharing.
void Memory(benchmark::State& state, uint64_t hosts_per_file) {
  constexpr uint64_t kFiles = 10'000;
  constexpr uint64_t kPerFile = 100;
  constexpr uint64_t kLocks = kFiles * kPerFile;
  double bytes_per_lock = 0;
  double rss_per_lock = 0;
  for (auto _ : state) {
    SteadyClock clock;
    std::vector<FileKey> keys;
    std::vector<LockOwner> owners;
    for (uint64_t f = 0; f < kFiles; ++f) keys.push_back(Handle(f));
    for (uint64_t o = 0; o < 1000; ++o)
      owners.push_back(ClientOwner(o / 10, static_cast<int32_t>(o)));
    malloc_trim(0);
    const int64_t bytes_before = g_live_bytes.load();
    const int64_t rss_before = ResidentBytes();
    {
      auto manager = std::make_unique<LockManager>(clock, BigOptions());
      for (uint64_t f = 0; f < kFiles; ++f) {
        for (uint64_t j = 0; j < kPerFile; ++j) {
          // Owner o = host*10 + svid-slot; the file's hosts are a window of hosts_per_file.
          const uint64_t host = (f + j % hosts_per_file) % 100;
          const uint64_t owner = host * 10 + (j / hosts_per_file) % 10;
          const LockOutcome out =
              manager->Lock(Request(keys[f], owners[owner], j * 64, 32,
                                    j % 2 == 0 ? LockType::kExclusive : LockType::kShared));
          if (out.status != LockStatus::kGranted) std::abort();
        }
      }
      if (manager->Counts().locks != kLocks) std::abort();
      bytes_per_lock = static_cast<double>(g_live_bytes.load() - bytes_before) / kLocks;
      rss_per_lock = static_cast<double>(ResidentBytes() - rss_before) / kLocks;
    }
  }
  state.counters["bytes_per_lock"] = bytes_per_lock;
  state.counters["rss_bytes_per_lock"] = rss_per_lock;
}

void BM_Memory_1M_Locks_10k_Files_100HostsPerFile(benchmark::State& state) { Memory(state, 100); }
void BM_Memory_1M_Locks_10k_Files_10HostsPerFile(benchmark::State& state) { Memory(state, 10); }
BENCHMARK(BM_Memory_1M_Locks_10k_Files_100HostsPerFile)
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Memory_1M_Locks_10k_Files_10HostsPerFile)
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace nlockd::lock

BENCHMARK_MAIN();
