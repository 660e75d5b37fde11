// SPDX-License-Identifier: Apache-2.0
// Store benchmarks (speed is measured here, never asserted in tests).
//   store_bench                                  SQLite only
//   scripts/with-postgres.sh store_bench         SQLite and PostgreSQL
// Environment: NLOCKD_BENCH_SECONDS (per throughput run, default 2), NLOCKD_BENCH_LOCKS and
// NLOCKD_BENCH_REGISTRATIONS (start-up load sizes, default 1,000,000 and 100,000),
// NLOCKD_BENCH_DIR (where the SQLite files go, default the system temp dir).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <time.h>
#include <unistd.h>

#include "store/open_store.hpp"

namespace nlockd::store {
namespace {

using Clock = std::chrono::steady_clock;

// CPU seconds this process has used (all threads): with other work on the machine, wall time
// overstates what the store costs.
double ProcessCpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) / 1e9;
}

double EnvNumber(const char* name, double fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? std::strtod(value, nullptr) : fallback;
}

std::optional<std::string> PgUri() {
  const char* uri = std::getenv("NLOCKD_TEST_PG_URI");
  return uri != nullptr && *uri != '\0' ? std::optional<std::string>(uri) : std::nullopt;
}

// A directory for the SQLite files of this run, removed at exit.
class BenchDir {
 public:
  BenchDir() {
    const char* base = std::getenv("NLOCKD_BENCH_DIR");
    std::string pattern =
        ((base != nullptr ? std::filesystem::path(base) : std::filesystem::temp_directory_path()) /
         "nlockd-bench.XXXXXX")
            .string();
    if (mkdtemp(pattern.data()) == nullptr) {
      std::perror("mkdtemp");
      std::exit(1);
    }
    path_ = pattern;
  }
  ~BenchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  BenchDir(const BenchDir&) = delete;
  BenchDir& operator=(const BenchDir&) = delete;
  std::string File(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

BenchDir& Dir() {
  static BenchDir dir;
  return dir;
}

std::string UniqueNode(const std::string& prefix) {
  static int counter = 0;
  return fmt::format("{}-{}-{}", prefix, getpid(), counter++);
}

Registration MakeRegistration(const std::string& mon_name) {
  Registration r;
  r.mon_name = mon_name;
  r.my_id = MyId{"lockd", 100021, 4, 16};
  r.priv.fill(0x5a);
  r.source_address = "10.0.0.1";
  return r;
}

// The results the summary prints, keyed "backend/mode/writers" and "backend/load".
std::map<std::string, double>& Results() {
  static std::map<std::string, double> results;
  return results;
}

// The registrations the throughput runs cycle through: nlockd's default limit (10,000), so
// the table grows to a server's size and then takes updates (a second SM_MON of a host).
constexpr uint64_t kClients = 10000;

// Keeps `writers` registrations outstanding (each completion issues the next, as an RPC server
// answering SM_MON from many clients would) until `duration` has passed; returns the number
// acknowledged as durable per second.
double DurableRegistrationsPerSecond(Store& store, int writers,
                                     std::chrono::duration<double> duration) {
  std::mutex mu;
  std::condition_variable idle;
  int in_flight = writers;
  std::atomic<uint64_t> acked{0};
  std::atomic<uint64_t> failed{0};
  std::atomic<uint64_t> next{0};
  const auto start = Clock::now();
  const auto stop_at = start + std::chrono::duration_cast<Clock::duration>(duration);
  std::function<void()> issue = [&] {
    const uint64_t id = next++;
    store.PutRegistration(MakeRegistration(fmt::format("client-{}.example.net", id % kClients)),
                          [&](std::exception_ptr error) {
                            (error ? failed : acked)++;
                            if (Clock::now() < stop_at) {
                              issue();
                              return;
                            }
                            std::lock_guard lock(mu);
                            if (--in_flight == 0) idle.notify_all();
                          });
  };
  for (int i = 0; i < writers; ++i) issue();
  std::unique_lock lock(mu);
  idle.wait(lock, [&] { return in_flight == 0; });
  const std::chrono::duration<double> elapsed = Clock::now() - start;
  if (failed > 0)
    std::fprintf(stderr, "store_bench: %llu writes failed\n",
                 static_cast<unsigned long long>(failed.load()));
  return static_cast<double>(acked.load()) / elapsed.count();
}

struct Backend {
  std::string name;
  std::string (*uri)();  // a fresh location each call (SQLite) or the shared database
};

std::string FreshSqliteUri() { return "sqlite:" + Dir().File(UniqueNode("db") + ".db"); }
std::string PgBackendUri() { return *PgUri(); }

void BM_DurableRegistrations(benchmark::State& state, Backend backend, bool group_commit) {
  const int writers = static_cast<int>(state.range(0));
  StoreOptions options;
  options.node_id = UniqueNode("bench");
  options.group_commit = group_commit;
  std::unique_ptr<Store> store = OpenStore(backend.uri(), options);
  const std::chrono::duration<double> duration(EnvNumber("NLOCKD_BENCH_SECONDS", 2));
  double rate = 0;
  for (auto _ : state) {
    rate = DurableRegistrationsPerSecond(*store, writers, duration);
    state.SetIterationTime(duration.count());
  }
  state.counters["regs_per_s"] = rate;
  Results()[fmt::format("{}/{}/{}", backend.name, group_commit ? "group" : "per-write", writers)] =
      rate;
}

// Fills a store with `registrations` registrations and `locks` locks (50 per owner and file,
// 32-byte file handles), as a busy server leaves it.
void Populate(Store& store, int registrations, int locks) {
  std::mutex mu;
  std::condition_variable done;
  int pending = 0;
  const auto count_down = [&](std::exception_ptr error) {
    if (error) {
      try {
        std::rethrow_exception(error);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "store_bench: populating failed: %s\n", e.what());
        std::abort();
      }
    }
    std::lock_guard lock(mu);
    if (--pending == 0) done.notify_all();
  };
  constexpr int kPerWrite = 1000;
  for (int i = 0; i < registrations; ++i) {
    {
      std::lock_guard lock(mu);
      ++pending;
    }
    store.PutRegistration(MakeRegistration(fmt::format("client-{}.example.net", i)), count_down);
  }
  for (int first = 0; first < locks; first += kPerWrite) {
    std::vector<LockChange> changes;
    for (int i = first; i < std::min(locks, first + kPerWrite); ++i) {
      const int owner = i / 50;
      LockRecord lock;
      lock.file_key = fmt::format("fh-{:029d}", owner % 20000);
      lock.host = fmt::format("10.{}.{}.{}", owner % 200, (owner / 200) % 250, owner % 250);
      lock.svid = owner;
      lock.owner_handle = fmt::format("{}@client-{}", owner, owner % 1000);
      lock.exclusive = i % 2 == 0;
      lock.offset = static_cast<uint64_t>(i % 50) * 4096;
      lock.length = 4096;
      changes.push_back(PutLock{std::move(lock)});
    }
    {
      std::lock_guard lock(mu);
      ++pending;
    }
    store.ApplyLockChanges(std::move(changes), count_down);
  }
  std::unique_lock lock(mu);
  done.wait(lock, [&] { return pending == 0; });
}

struct StartupTimes {
  double open = 0;
  double load = 0;
  double cpu = 0;  // this process, both phases
};

// Opens the store and loads everything, as nlockd's start-up does; the store stays open (and
// its run unfinished) until `store` is reset.
StartupTimes TimeStartup(const std::string& uri, const StoreOptions& options, int registrations,
                         int locks, std::unique_ptr<Store>& store) {
  StartupTimes times;
  const double cpu_start = ProcessCpuSeconds();
  const auto start = Clock::now();
  store = OpenStore(uri, options);
  const auto opened = Clock::now();
  const LoadedState loaded = store->LoadAll();
  const auto loaded_at = Clock::now();
  times.cpu = ProcessCpuSeconds() - cpu_start;
  if (loaded.registrations.size() != static_cast<size_t>(registrations) ||
      loaded.locks.size() != static_cast<size_t>(locks)) {
    std::fprintf(stderr, "store_bench: loaded the wrong number of rows\n");
    std::abort();
  }
  times.open = std::chrono::duration<double>(opened - start).count();
  times.load = std::chrono::duration<double>(loaded_at - opened).count();
  return times;
}

// Start-up with a full table, after a clean shutdown and after a crash (when SQLite also checks
// the file's integrity: StoreOptions::sqlite_check).
void BM_StartupLoad(benchmark::State& state, Backend backend) {
  const int registrations = static_cast<int>(EnvNumber("NLOCKD_BENCH_REGISTRATIONS", 100000));
  const int locks = static_cast<int>(EnvNumber("NLOCKD_BENCH_LOCKS", 1000000));
  StoreOptions options;
  options.node_id = UniqueNode("load");
  const std::string uri = backend.uri();
  {
    std::unique_ptr<Store> store = OpenStore(uri, options);
    Populate(*store, registrations, locks);
    store->MarkCleanShutdown();
  }
  StartupTimes clean;
  StartupTimes crashed;
  for (auto _ : state) {
    std::unique_ptr<Store> store;
    clean = TimeStartup(uri, options, registrations, locks, store);
    store.reset();  // without MarkCleanShutdown: as if the process died
    crashed = TimeStartup(uri, options, registrations, locks, store);
    state.SetIterationTime(clean.open + clean.load);
  }
  state.counters["open_s"] = clean.open;
  state.counters["load_s"] = clean.load;
  state.counters["cpu_s"] = clean.cpu;
  state.counters["after_crash_s"] = crashed.open + crashed.load;
  Results()[backend.name + "/open"] = clean.open;
  Results()[backend.name + "/load"] = clean.load;
  Results()[backend.name + "/cpu"] = clean.cpu;
  Results()[backend.name + "/crash"] = crashed.open + crashed.load;
  Results()[backend.name + "/crash_cpu"] = crashed.cpu;
}

void RegisterAll() {
  std::vector<Backend> backends{{"SQLite", FreshSqliteUri}};
  if (PgUri()) {
    backends.push_back({"PostgreSQL", PgBackendUri});
  } else {
    std::fprintf(stderr,
                 "store_bench: NLOCKD_TEST_PG_URI is not set, so PostgreSQL is skipped (run "
                 "under scripts/with-postgres.sh)\n");
  }
  for (const Backend& backend : backends) {
    for (bool group : {true, false}) {
      benchmark::RegisterBenchmark(
          fmt::format("DurableRegistrations/{}/{}", backend.name, group ? "group" : "per-write")
              .c_str(),
          BM_DurableRegistrations, backend, group)
          ->Arg(1)
          ->Arg(64)
          ->Iterations(1)
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond);
    }
  }
  for (const Backend& backend : backends) {
    benchmark::RegisterBenchmark(fmt::format("StartupLoad/{}", backend.name).c_str(),
                                 BM_StartupLoad, backend)
        ->Iterations(1)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
  }
}

// The ratios against the baseline measured in the same run.
void PrintSummary() {
  const auto& r = Results();
  const auto get = [&](const std::string& key) {
    const auto it = r.find(key);
    return it == r.end() ? 0.0 : it->second;
  };
  std::printf("\nDurable registrations per second (fsynced before acknowledged):\n");
  std::printf("  %-11s %-10s %12s %12s\n", "backend", "mode", "1 writer", "64 writers");
  for (const char* backend : {"SQLite", "PostgreSQL"}) {
    for (const char* mode : {"group", "per-write"}) {
      const double one = get(fmt::format("{}/{}/1", backend, mode));
      const double many = get(fmt::format("{}/{}/64", backend, mode));
      if (one == 0 && many == 0) continue;
      std::printf("  %-11s %-10s %12.0f %12.0f\n", backend, mode, one, many);
    }
    const double per_write = get(fmt::format("{}/per-write/64", backend));
    if (per_write > 0) {
      std::printf("  %s: group commit / per-write at 64 writers = %.1fx%s\n", backend,
                  get(fmt::format("{}/group/64", backend)) / per_write,
                  std::string(backend) == "SQLite" ? " (goal: >= 20x)" : "");
    }
  }
  for (const char* backend : {"SQLite", "PostgreSQL"}) {
    const double open = get(fmt::format("{}/open", backend));
    const double load = get(fmt::format("{}/load", backend));
    if (open == 0 && load == 0) continue;
    std::printf(
        "Start-up, %s, after a clean shutdown: open %.2f s + LoadAll %.2f s = %.2f s "
        "(nlockd CPU %.2f s)%s\n",
        backend, open, load, open + load, get(fmt::format("{}/cpu", backend)),
        std::string(backend) == "SQLite" ? " (goal: < 2 s)" : "");
    std::printf("Start-up, %s, after a crash: %.2f s (nlockd CPU %.2f s)\n", backend,
                get(fmt::format("{}/crash", backend)), get(fmt::format("{}/crash_cpu", backend)));
  }
}

}  // namespace
}  // namespace nlockd::store

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  nlockd::store::RegisterAll();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  nlockd::store::PrintSummary();
  return 0;
}
