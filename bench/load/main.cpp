// nlockd-load: drives an RPC server with a closed-loop load and prints calls per second and
// latency percentiles. By default it calls NULL of NLM version 4.
#include <cstdlib>
#include <iostream>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "bench/load/load_generator.hpp"
#include "bench/load/nlm_workload.hpp"

namespace {

std::vector<uint8_t> ParseHex(const std::string& hex) {
  std::vector<uint8_t> out;
  if (hex.size() % 2 != 0) throw CLI::ValidationError("--args-hex", "odd number of digits");
  for (size_t i = 0; i < hex.size(); i += 2) {
    out.push_back(static_cast<uint8_t>(std::stoul(hex.substr(i, 2), nullptr, 16)));
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"nlockd-load: closed-loop ONC RPC load over TCP"};
  std::string target = "127.0.0.1:4045";
  std::vector<size_t> connections{1, 8, 64};
  std::vector<size_t> pipelines{1};
  double duration = 5, warmup = 1;
  uint32_t program = 100021, version = 4, procedure = 0;
  std::string args_hex;
  bool distinct_sources = false, json = false;
  std::string workload_name = "fixed";
  bool against_null = false;
  app.add_option("--target", target, "ADDR:PORT of the server (default 127.0.0.1:4045)");
  app.add_option("--connections", connections, "connection counts to run, e.g. 1,8,64")
      ->delimiter(',');
  app.add_option("--pipeline", pipelines, "calls in flight per connection, e.g. 1,8")
      ->delimiter(',');
  app.add_option("--duration", duration, "measured seconds per run (default 5)");
  app.add_option("--warmup", warmup, "unmeasured seconds before each run (default 1)");
  app.add_option("--program", program, "RPC program (default 100021)");
  app.add_option("--version", version, "program version (default 4)");
  app.add_option("--procedure", procedure, "procedure (default 0, NULL)");
  app.add_option("--args-hex", args_hex, "XDR-encoded arguments in hex (default none)");
  app.add_flag("--distinct-sources", distinct_sources,
               "bind each connection to its own 127.1.x.y source address");
  app.add_flag("--json", json, "one JSON object per run instead of a table");
  app.add_option("--workload", workload_name,
                 "fixed (the --program/--version/--procedure/--args-hex call, default NULL) or "
                 "nlm4-lock-unlock (LOCK then UNLOCK of a distinct range per lane)")
      ->check(CLI::IsMember({"fixed", "nlm4-lock-unlock"}));
  app.add_flag("--against-null", against_null,
               "before each run, measure RPC NULL (NLM v4) with the same connections and "
               "pipeline, and print the workload's calls/s as a ratio of it");
  CLI11_PARSE(app, argc, argv);

  auto colon = target.rfind(':');
  if (colon == std::string::npos) {
    std::cerr << "--target must be ADDR:PORT\n";
    return EXIT_FAILURE;
  }
  nlockd::bench::CallSpec spec{program, version, procedure, ParseHex(args_hex)};
  nlockd::bench::FixedWorkload fixed(spec);
  uint64_t run = std::random_device{}();
  for (size_t pipeline : pipelines) {
    nlockd::bench::NlmLockUnlockWorkload nlm(pipeline, run++);
    nlockd::bench::Workload& workload =
        workload_name == "fixed" ? static_cast<nlockd::bench::Workload&>(fixed) : nlm;
    for (size_t count : connections) {
      nlockd::bench::LoadOptions options;
      options.target = asio::ip::make_address(target.substr(0, colon));
      options.port = static_cast<uint16_t>(std::stoi(target.substr(colon + 1)));
      options.connections = count;
      options.pipeline = pipeline;
      options.duration = std::chrono::milliseconds(static_cast<int64_t>(duration * 1000));
      options.warmup = std::chrono::milliseconds(static_cast<int64_t>(warmup * 1000));
      options.distinct_sources = distinct_sources;
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
        std::cout << (json ? "\n" : "  ") << "ratio to NULL: "
                  << result.calls_per_second / null_result->calls_per_second;
      }
      std::cout << std::endl;
      if (result.calls == 0) return EXIT_FAILURE;
    }
  }
  return EXIT_SUCCESS;
}
