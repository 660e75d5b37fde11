// SPDX-License-Identifier: Apache-2.0
// nlockd-restart-bench: restart-to-available. H simulated client hosts (default 1,000)
// take L locks each (default 10) from a fresh nlockd on a SQLite store; nlockd is killed with
// SIGKILL and started again on the same store. Each host's status monitor reclaims the host's
// locks as soon as its SM_NOTIFY arrives, and a host that held nothing asks for a lock on a
// file nobody held, over and over, from the moment nlockd is exec'd. Measured from the exec:
// (a) that first new lock granted, (b) the grace period ended with every restored lock
// reclaimed. The same-run baseline is the first run's exec to first lock on an empty store.
//
// REQUIRES: a private network namespace with lo up (run_restart.sh); the fixed ports free.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench/restart/daemon_process.hpp"
#include "bench/restart/sim_hosts.hpp"

extern char** environ;

namespace nlockd::bench {
namespace {

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

struct Options {
  std::string nlockd;
  std::string store;
  size_t hosts = 1000;
  size_t locks = 10;
  uint16_t port = 40450;
  uint16_t statd_port = 40460;
  int grace = 90;
  size_t workers = 64;
};

int Run(const Options& o) {
  rlimit files{65536, 65536};
  ::setrlimit(RLIMIT_NOFILE, &files);
  const std::vector<std::string> argv{o.nlockd,
                                      "--listen",
                                      "127.0.0.1:" + std::to_string(o.port),
                                      "--rpcbind-register=false",
                                      "--admin-listen",
                                      "off",
                                      "--name",
                                      "bench-server",
                                      "--store",
                                      o.store,
                                      "--grace",
                                      std::to_string(o.grace),
                                      "--notify-statd-port",
                                      std::to_string(o.statd_port),
                                      "--max-hosts",
                                      std::to_string(o.hosts + 100),
                                      "--nsm-max-registrations",
                                      std::to_string(o.hosts + 100)};
  const sockaddr_in server = Ipv4("127.0.0.1", o.port);
  std::vector<std::unique_ptr<NlmHost>> hosts;
  for (size_t h = 0; h < o.hosts; ++h) {
    hosts.push_back(std::make_unique<NlmHost>(HostAddress(h), server));
  }
  NlmHost prober("127.0.0.2", server);

  // First locks, then reclaims, on workers fed by a queue.
  LockWorkers workers(hosts, o.locks, o.workers);

  // Run 1: a fresh store; every host takes its locks. Its exec-to-first-lock is the baseline.
  auto first = std::make_unique<Daemon>(argv);
  const double baseline =
      Seconds(FirstGrant(prober, "unrelated-cold", first->exec() + std::chrono::seconds(30)) -
              first->exec());
  prober.Unlock({"unrelated-cold", 0, 1}, std::chrono::seconds(5));
  const Clock::time_point locking = Clock::now();
  workers.LockAll();
  workers.WaitAllAnswered();
  const double lock_seconds = Seconds(Clock::now() - locking);
  if (workers.failed() != 0) {
    throw std::runtime_error(fmt::format("{} first locks failed", workers.failed()));
  }
  first->Kill(SIGKILL);
  first.reset();

  // Run 2: the same store after kill -9.
  workers.ResetCounts();
  StatusMonitors monitors(o.statd_port, o.hosts,
                          [&](size_t host, int32_t state) { workers.Reclaim(host, state); });
  Daemon second(argv);
  const Clock::time_point exec = second.exec();
  const Clock::time_point available =
      FirstGrant(prober, "unrelated-warm", exec + std::chrono::seconds(60));
  auto listening = second.Wait("nlockd listening", std::chrono::seconds(60));
  auto started = second.Wait("grace period (started|none)", std::chrono::seconds(60));
  auto ended = second.Wait("grace period ended", std::chrono::seconds(o.grace + 30));
  // Reclaims still in flight when grace ended (it should end only after the last one).
  workers.WaitAllAnswered(Clock::now() + std::chrono::seconds(5));
  workers.Close();
  if (!listening || !started || !ended) {
    std::cerr << "nlockd did not log the expected lines:\n" << second.Log();
    return 1;
  }
  const double a = Seconds(available - exec);
  const double b = Seconds(ended->first - exec);
  auto since_exec = [&](Clock::time_point at, bool happened) {
    return happened ? fmt::format("{:.3f} s", Seconds(at - exec)) : std::string("never");
  };
  const std::optional<Clock::time_point> last_reclaim = workers.last_answered();
  const std::string reclaimed =
      since_exec(last_reclaim.value_or(Clock::time_point()), last_reclaim.has_value());
  const std::string notified =
      since_exec(monitors.last_notification(), monitors.notifications() != 0);
  std::cout << fmt::format(
      "restart-to-available: {} hosts x {} locks on {}, nlockd killed with SIGKILL and restarted\n"
      "  run 1 (empty store): exec -> first lock granted {:.3f} s (baseline); {} locks taken in "
      "{:.2f} s\n"
      "  run 2 (restored):    exec -> listening {:.3f} s\n"
      "                       exec -> (a) first new lock granted {:.3f} s  (goal < 0.5 s; "
      "{:.1f}x the empty-store start; 90 s grace of Linux lockd / NFS-Ganesha: {:.0f}x sooner)\n"
      "                       exec -> last SM_NOTIFY answered {} ({} notifications)\n"
      "                       exec -> last reclaim granted {} ({} of {} granted)\n"
      "                       exec -> (b) grace ended {:.3f} s  (goal < 2 s; 90 s grace: {:.0f}x "
      "sooner)\n"
      "  {}\n  {}\n",
      o.hosts, o.locks, o.store.substr(0, o.store.find(':')), baseline, o.hosts * o.locks,
      lock_seconds, Seconds(listening->first - exec), a, a / baseline, 90.0 / a, notified,
      monitors.notifications(), reclaimed, workers.granted(), o.hosts * o.locks, b, 90.0 / b,
      started->second, ended->second);
  const bool all_reclaimed = workers.granted() == o.hosts * o.locks &&
                             ended->second.find("reason=all-reclaimed") != std::string::npos;
  if (!all_reclaimed) std::cerr << "not every lock was reclaimed before grace ended\n";
  return all_reclaimed ? 0 : 1;
}

}  // namespace
}  // namespace nlockd::bench

int main(int argc, char** argv) {
  CLI::App app{"nlockd-restart-bench: restart-to-available after kill -9"};
  nlockd::bench::Options o;
  app.add_option("--nlockd", o.nlockd, "the nlockd binary")->required();
  app.add_option("--store", o.store, "store URI, e.g. sqlite:/tmp/x/nlockd.db (fresh)")->required();
  app.add_option("--hosts", o.hosts, "simulated client hosts (default 1000)")
      ->check(CLI::Range(1, 60000));
  app.add_option("--locks", o.locks, "locks per host (default 10)")->check(CLI::Range(1, 1000));
  app.add_option("--port", o.port, "nlockd's port (default 40450)");
  app.add_option("--statd-port", o.statd_port, "the hosts' status monitor port (default 40460)");
  app.add_option("--grace", o.grace, "nlockd --grace (default 90)")->check(CLI::Range(1, 3600));
  app.add_option("--workers", o.workers, "hosts locking or reclaiming at once (default 64)")
      ->check(CLI::Range(1, 1000));
  CLI11_PARSE(app, argc, argv);
  try {
    return nlockd::bench::Run(o);
  } catch (const std::exception& e) {
    std::cerr << "nlockd-restart-bench: " << e.what() << "\n";
    return 1;
  }
}
