// SPDX-License-Identifier: Apache-2.0
// nlockd-nsm-bench: SM_MON durable registrations per second at 1 and 64 connections against
// the RPC NULL ceiling of the same server in the same run, and SM_MON latency (one client,
// one call at a time) with no registrations present and with 10,000 present.
// REQUIRES: a fresh nlockd (empty store, a registration limit above what the run creates).
#include <cstdlib>
#include <iostream>
#include <random>
#include <string>

#include <CLI/CLI.hpp>

#include "bench/load/load_generator.hpp"
#include "bench/nsm/sm_mon_workload.hpp"

namespace {

using nlockd::bench::FormatResult;
using nlockd::bench::LoadOptions;
using nlockd::bench::LoadResult;
using nlockd::bench::RunLoad;
using nlockd::bench::Workload;

LoadResult Measure(LoadOptions options, size_t connections, Workload& workload,
                   const std::string& label) {
  options.connections = connections;
  LoadResult result = RunLoad(options, workload);
  std::cout << FormatResult(options, label, result) << std::endl;
  return result;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"nlockd-nsm-bench: SM_MON throughput and latency"};
  std::string target = "127.0.0.1:4045";
  double duration = 3;
  uint64_t preload = 10'000;
  app.add_option("--target", target, "ADDR:PORT of a fresh nlockd (default 127.0.0.1:4045)");
  app.add_option("--duration", duration, "measured seconds per run (default 3)");
  app.add_option("--preload", preload, "registrations present for the second latency run");
  CLI11_PARSE(app, argc, argv);

  auto colon = target.rfind(':');
  LoadOptions options;
  options.target = asio::ip::make_address(target.substr(0, colon));
  options.port = static_cast<uint16_t>(std::stoi(target.substr(colon + 1)));
  options.pipeline = 1;
  options.warmup = std::chrono::milliseconds(500);
  options.duration = std::chrono::milliseconds(static_cast<int64_t>(duration * 1000));
  uint64_t run = std::random_device{}();

  // Latency with (almost) nothing present: one client updating 100 registrations of its own.
  nlockd::bench::SmMonWorkload updates(run, 100);
  LoadResult empty = Measure(options, 1, updates, "SM_MON latency, ~0 present");

  // Preload: new registrations from 64 clients until `preload` exist.
  nlockd::bench::SmMonWorkload fresh(run + 1, 0);
  LoadOptions fill = options;
  fill.warmup = std::chrono::milliseconds(0);
  fill.duration = std::chrono::milliseconds(200);
  uint64_t created = 0;
  while (created < preload) {
    created += Measure(fill, 64, fresh, "preload").calls;
  }
  std::cout << "preloaded about " << created << " registrations" << std::endl;
  LoadResult full = Measure(options, 1, updates, "SM_MON latency, preloaded");
  if (empty.p50_us > 0) {
    std::cout << "latency ratio preloaded/empty: p50 " << full.p50_us / empty.p50_us << " p99 "
              << full.p99_us / empty.p99_us << std::endl;
  }

  // Throughput against the NULL ceiling, same connections.
  nlockd::bench::FixedWorkload null_call({100024, 1, 0, {}});
  nlockd::bench::SmMonWorkload throughput(run + 2, 0);
  for (size_t connections : {size_t{1}, size_t{64}}) {
    LoadResult null_result = Measure(options, connections, null_call, "SM_NULL");
    LoadResult mon = Measure(options, connections, throughput, "SM_MON new (durable)");
    if (null_result.calls_per_second > 0) {
      std::cout << "connections=" << connections << " SM_MON/s=" << mon.calls_per_second
                << " ratio to NULL: " << mon.calls_per_second / null_result.calls_per_second
                << std::endl;
    }
    if (mon.calls == 0 || mon.errors > 0) return EXIT_FAILURE;
  }
  return EXIT_SUCCESS;
}
