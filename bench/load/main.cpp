// SPDX-License-Identifier: Apache-2.0
// nlockd-load: drives an RPC server with a closed-loop load and prints calls per second and
// latency percentiles. By default it calls NULL of NLM version 4.
#include <cctype>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "bench/load/load_generator.hpp"
#include "bench/load/nlm_workload.hpp"

namespace {

// Checked by HexDigits before it is parsed.
std::vector<uint8_t> ParseHex(const std::string& hex) {
  std::vector<uint8_t> out;
  for (size_t i = 0; i < hex.size(); i += 2) {
    out.push_back(static_cast<uint8_t>(std::stoul(hex.substr(i, 2), nullptr, 16)));
  }
  return out;
}

// CLI11's check of a hex option: an even number of hex digits (`allow_empty`: none at all).
std::function<std::string(const std::string&)> HexDigits(bool allow_empty) {
  return [allow_empty](const std::string& hex) -> std::string {
    if (hex.empty()) return allow_empty ? "" : "an even, non-zero number of hex digits";
    if (hex.size() % 2 != 0) return "an even number of hex digits";
    for (char c : hex) {
      if (!std::isxdigit(static_cast<unsigned char>(c))) return "hex digits only";
    }
    return {};
  };
}

// The NLM workloads' file: the handle --fh-hex gave, else a made-up one of a file of run `run`.
std::string FileOf(const std::string& fh, uint64_t run) {
  return fh.empty() ? nlockd::bench::BenchFile(run) : fh;
}

void Print(const nlockd::bench::LoadOptions& options, const std::string& name,
           const nlockd::bench::LoadResult& result, bool json) {
  std::cout << (json ? nlockd::bench::ResultJson(options, name, result)
                     : nlockd::bench::FormatResult(options, name, result));
}

// nlm4-test: per file size, fill a file of its own over the wire, then TEST it; NULL first as
// the ceiling, and every row's calls/s as a ratio of the first file size's TEST.
// `base` holds the target, the durations and the call timeout.
int RunTests(const nlockd::bench::LoadOptions& base, const std::vector<size_t>& connections,
             const std::vector<size_t>& pipelines, bool json,
             const std::vector<uint64_t>& file_locks, uint64_t run, const std::string& fh) {
  std::vector<uint64_t> runs;
  for (uint64_t locks : file_locks) {
    nlockd::bench::NlmFillWorkload fill(FileOf(fh, run + runs.size()));
    nlockd::bench::LoadOptions options = base;
    options.connections = 1;
    options.pipeline = 16;
    options.warmup = std::chrono::milliseconds(0);
    options.duration = std::chrono::minutes(10);
    options.max_calls = locks;
    auto filled = nlockd::bench::RunLoad(options, fill);
    if (filled.calls != locks || filled.errors != 0) {
      std::cerr << "filling a file with " << locks << " locks failed: " << filled.calls
                << " granted, " << filled.errors << " errors\n";
      return EXIT_FAILURE;
    }
    runs.push_back(run + runs.size());
  }
  for (size_t pipeline : pipelines) {
    for (size_t count : connections) {
      nlockd::bench::LoadOptions options = base;
      options.connections = count;
      options.pipeline = pipeline;
      nlockd::bench::FixedWorkload null_workload({100021, 4, 0, {}});
      auto null_result = nlockd::bench::RunLoad(options, null_workload);
      Print(options, "NULL", null_result, json);
      std::cout << std::endl;
      double first = 0;
      for (size_t i = 0; i < file_locks.size(); ++i) {
        nlockd::bench::NlmTestWorkload test(file_locks[i], FileOf(fh, runs[i]));
        auto result = nlockd::bench::RunLoad(options, test);
        Print(options, test.name(), result, json);
        if (i == 0) first = result.calls_per_second;
        if (first > 0) {
          std::cout << (json ? "\n" : "  ") << "ratio to " << file_locks[0]
                    << " lock(s): " << result.calls_per_second / first;
        }
        if (null_result.calls_per_second > 0) {
          std::cout << "  to NULL: " << result.calls_per_second / null_result.calls_per_second;
        }
        std::cout << std::endl;
        if (result.calls == 0 || result.errors != 0) return EXIT_FAILURE;
      }
    }
  }
  return EXIT_SUCCESS;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"nlockd-load: closed-loop ONC RPC load over TCP"};
  std::string target = "127.0.0.1:4045";
  std::vector<size_t> connections{1, 8, 64};
  std::vector<size_t> pipelines{1};
  double duration = 5, warmup = 1, call_timeout = 10;
  uint64_t calls = 0;
  uint32_t program = 100021, version = 4, procedure = 0;
  std::string args_hex, fh_hex;
  bool distinct_sources = false, json = false;
  std::string workload_name = "fixed";
  bool against_null = false;
  std::vector<uint64_t> file_locks{1, 100'000};
  app.add_option("--target", target, "ADDR:PORT of the server (default 127.0.0.1:4045)");
  app.add_option("--connections", connections, "connection counts to run, e.g. 1,8,64")
      ->delimiter(',');
  app.add_option("--pipeline", pipelines, "calls in flight per connection, e.g. 1,8")
      ->delimiter(',');
  app.add_option("--duration", duration, "measured seconds per run (default 5)");
  app.add_option("--warmup", warmup, "unmeasured seconds before each run (default 1)");
  app.add_option("--call-timeout", call_timeout,
                 "seconds a call may go unanswered (or a connection unmade) before its "
                 "connection is ended and counted as an error (default 10)")
      ->check(CLI::PositiveNumber);
  app.add_option("--calls", calls,
                 "stop each run after this many calls in all (0, the default: run for "
                 "--duration); with --warmup 0, a fixed amount of work, as the instruction "
                 "count guard needs");
  app.add_option("--program", program, "RPC program (default 100021)");
  app.add_option("--version", version, "program version (default 4)");
  app.add_option("--procedure", procedure, "procedure (default 0, NULL)");
  app.add_option("--args-hex", args_hex, "XDR-encoded arguments in hex (default none)")
      ->check(HexDigits(true));
  app.add_flag("--distinct-sources", distinct_sources,
               "bind each connection to its own 127.1.x.y source address");
  app.add_flag("--json", json, "one JSON object per run instead of a table");
  app.add_option("--workload", workload_name,
                 "fixed (the --program/--version/--procedure/--args-hex call, default NULL) or "
                 "nlm4-lock-unlock (LOCK then UNLOCK of a distinct range per lane) or "
                 "nlm4-test (TEST against a file holding --file-locks locks) or "
                 "nlm4-block-cancel (blocking LOCK then CANCEL behind a holder of the file)")
      ->check(CLI::IsMember({"fixed", "nlm4-lock-unlock", "nlm4-test", "nlm4-block-cancel"}));
  app.add_option("--fh-hex", fh_hex,
                 "NLM workloads: the file handle, in hex, of the file to lock, for a server that "
                 "locks only real files (an NFS server's own NLM; bench/ganesha_fh.py prints "
                 "one); runs then share that file, so this takes one run (default: a made-up "
                 "handle, a file of its own per run)")
      ->check(HexDigits(false));
  app.add_option("--file-locks", file_locks,
                 "nlm4-test: locks held on the tested file, one run each (default 1,100000)")
      ->delimiter(',');
  app.add_flag("--against-null", against_null,
               "before each run, measure RPC NULL (NLM v4) with the same connections and "
               "pipeline, and print the workload's calls/s as a ratio of it");
  CLI11_PARSE(app, argc, argv);
  // A run ends with lanes holding their lock (and, for block-cancel, waiters queued): runs that
  // share one file would meet those and be DENIED where they must be GRANTED.
  const size_t runs_sharing_file =
      workload_name == "nlm4-test" ? file_locks.size() : connections.size() * pipelines.size();
  if (!fh_hex.empty() && runs_sharing_file != 1) {
    std::cerr << "--fh-hex takes one run: give one --connections and one --pipeline value (one "
                 "--file-locks value for nlm4-test), and start the server afresh for the next\n";
    return EXIT_FAILURE;
  }
  std::string fh;
  for (uint8_t byte : ParseHex(fh_hex)) fh.push_back(static_cast<char>(byte));

  auto colon = target.rfind(':');
  if (colon == std::string::npos) {
    std::cerr << "--target must be ADDR:PORT\n";
    return EXIT_FAILURE;
  }
  nlockd::bench::LoadOptions base;
  base.target = asio::ip::make_address(target.substr(0, colon));
  base.port = static_cast<uint16_t>(std::stoi(target.substr(colon + 1)));
  base.duration = std::chrono::milliseconds(static_cast<int64_t>(duration * 1000));
  base.warmup = std::chrono::milliseconds(static_cast<int64_t>(warmup * 1000));
  base.call_timeout = std::chrono::milliseconds(static_cast<int64_t>(call_timeout * 1000));
  nlockd::bench::CallSpec spec{program, version, procedure, ParseHex(args_hex)};
  nlockd::bench::FixedWorkload fixed(spec);
  uint64_t run = std::random_device{}();
  if (workload_name == "nlm4-test") {
    return RunTests(base, connections, pipelines, json, file_locks, run, fh);
  }
  for (size_t pipeline : pipelines) {
    for (size_t count : connections) {
      nlockd::bench::NlmLockUnlockWorkload lock_unlock(pipeline, FileOf(fh, run));
      nlockd::bench::NlmBlockCancelWorkload block_cancel(pipeline, FileOf(fh, run));
      ++run;  // a file of its own per run: waiters left by the last one stay queued there
      nlockd::bench::Workload& workload = workload_name == "nlm4-lock-unlock"
                                              ? static_cast<nlockd::bench::Workload&>(lock_unlock)
                                          : workload_name == "nlm4-block-cancel"
                                              ? static_cast<nlockd::bench::Workload&>(block_cancel)
                                              : fixed;
      nlockd::bench::LoadOptions options = base;
      if (workload_name == "nlm4-block-cancel") {
        nlockd::bench::FixedWorkload holder(block_cancel.HolderLock());
        nlockd::bench::LoadOptions once = options;
        once.connections = 1;
        once.pipeline = 1;
        once.warmup = std::chrono::milliseconds(0);
        once.duration = std::chrono::seconds(10);
        once.max_calls = 1;
        if (nlockd::bench::RunLoad(once, holder).calls != 1) {
          std::cerr << "the holder's LOCK was not answered\n";
          return EXIT_FAILURE;
        }
      }
      options.connections = count;
      options.pipeline = pipeline;
      options.distinct_sources = distinct_sources;
      options.max_calls = calls;
      std::optional<nlockd::bench::LoadResult> null_result;
      if (against_null) {
        nlockd::bench::FixedWorkload null_workload({100021, 4, 0, {}});
        null_result = nlockd::bench::RunLoad(options, null_workload);
        std::cout << (json ? nlockd::bench::ResultJson(options, "NULL", *null_result)
                           : nlockd::bench::FormatResult(options, "NULL", *null_result))
                  << std::endl;
      }
      auto result = nlockd::bench::RunLoad(options, workload);
      std::cout << (json ? nlockd::bench::ResultJson(options, workload.name(), result)
                         : nlockd::bench::FormatResult(options, workload.name(), result));
      if (null_result && null_result->calls_per_second > 0) {
        std::cout << (json ? "\n" : "  ")
                  << "ratio to NULL: " << result.calls_per_second / null_result->calls_per_second;
      }
      std::cout << std::endl;
      if (result.calls == 0) return EXIT_FAILURE;
    }
  }
  return EXIT_SUCCESS;
}
