// SPDX-License-Identifier: Apache-2.0
// nlockd-takeover-bench: HA takeover with H simulated client hosts (default 1,000) holding L
// locks each (default 10). Node A (nlockd --ha on a PostgreSQL store) serves and the hosts take
// their locks; node B waits as standby; then a fault of A: kill -9, SIGTERM or `nlockctl
// service release` (planned moves: A stops, or A stays as standby), or a partition from PostgreSQL
// (A reaches the database through a TCP relay in this process, which stops forwarding: no data, no
// reset, as a cut link). Measured from the fault: (i) the first new lock granted on a file nobody
// held, (ii) B's grace period ended with every lock reclaimed. Both nodes listen on the same
// address and port (a standby has no listener): the service address stays put, as it would with a
// floating address moved at once.
//
// REQUIRES: a private network namespace with lo up (run_takeover.sh) with a PostgreSQL inside
// it (scripts/with-postgres.sh), its URI in NLOCKD_TEST_PG_URI; the fixed ports free.
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench/restart/daemon_process.hpp"
#include "bench/restart/sim_hosts.hpp"

extern char** environ;

namespace nlockd::bench {
namespace {

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// `nlockctl service release` without nlockctl: one HTTP POST to the admin server at
// 127.0.0.1:`port`; the response's status code (0 if none).
int PostRelease(uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const sockaddr_in server = Ipv4("127.0.0.1", port);
  int status = 0;
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&server), sizeof server) == 0) {
    const std::string request =
        "POST /api/v1/service/release HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n"
        "Connection: close\r\n\r\n";
    if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
        static_cast<ssize_t>(request.size())) {
      char reply[256] = {};
      if (::recv(fd, reply, sizeof reply - 1, 0) > 12) status = std::atoi(reply + 9);
    }
  }
  ::close(fd);
  return status;
}

// A TCP relay from 127.0.0.1:`port` to `upstream`; Cut() makes it stop moving bytes in either
// direction while keeping every connection open, as a network partition would.
class Relay {
 public:
  Relay(uint16_t port, sockaddr_in upstream) : upstream_(upstream) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int on = 1;
    ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    sockaddr_in local = Ipv4("127.0.0.1", port);
    if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&local), sizeof local) != 0 ||
        ::listen(listen_fd_, 64) != 0) {
      throw std::runtime_error("relay: cannot listen");
    }
    thread_ = std::thread([this] { Run(); });
  }
  ~Relay() {
    stop_ = true;
    thread_.join();
    for (auto& [a, b] : pairs_) {
      ::close(a);
      ::close(b);
    }
    ::close(listen_fd_);
  }
  Relay(const Relay&) = delete;
  Relay& operator=(const Relay&) = delete;
  void Cut() { cut_ = true; }

 private:
  void Run() {
    while (!stop_) {
      std::vector<pollfd> fds{{listen_fd_, POLLIN, 0}};
      if (!cut_) {
        for (auto& [a, b] : pairs_) {
          fds.push_back({a, POLLIN, 0});
          fds.push_back({b, POLLIN, 0});
        }
      }
      if (::poll(fds.data(), fds.size(), 50) <= 0) continue;
      if (fds[0].revents & POLLIN) {
        const int client = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
        const int server = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (client >= 0 && server >= 0 &&
            ::connect(server, reinterpret_cast<const sockaddr*>(&upstream_), sizeof upstream_) ==
                0 &&
            !cut_) {
          pairs_.emplace_back(client, server);
        } else {
          if (client >= 0) ::close(client);
          if (server >= 0) ::close(server);
        }
      }
      if (cut_) continue;
      for (size_t i = 1; i < fds.size(); ++i) {
        if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        auto& pair = pairs_[(i - 1) / 2];
        const int from = fds[i].fd;
        const int to = from == pair.first ? pair.second : pair.first;
        char buffer[16384];
        const ssize_t n = ::read(from, buffer, sizeof buffer);
        if (n <= 0) {
          ::shutdown(to, SHUT_WR);
          continue;
        }
        for (ssize_t sent = 0; sent < n;) {
          const ssize_t w = ::write(to, buffer + sent, static_cast<size_t>(n - sent));
          if (w <= 0) break;
          sent += w;
        }
      }
    }
  }

  sockaddr_in upstream_;
  int listen_fd_ = -1;
  std::atomic<bool> stop_ = false;
  std::atomic<bool> cut_ = false;
  std::vector<std::pair<int, int>> pairs_;
  std::thread thread_;
};

struct Options {
  std::string nlockd;
  std::string store;  // postgresql://user:password@127.0.0.1:PORT/db
  std::vector<std::string> faults{"kill", "term", "release", "partition"};
  size_t hosts = 1000;
  size_t locks = 10;
  int lease = 5;
  uint16_t port = 40450;
  uint16_t statd_port = 40460;
  uint16_t relay_port = 40470;
  uint16_t admin_port = 40480;  // node A's admin server, for the release fault
  int grace = 90;
  size_t workers = 64;
};

// One fault: A serves the hosts' locks, B is standby, A fails as `fault` says; prints and
// returns whether every lock was reclaimed.
bool RunFault(const Options& o, const std::string& fault, int round) {
  const std::string service = fmt::format("bench-{}-{}-{}", fault, getpid(), round);
  const std::smatch match = [&] {
    std::smatch m;
    if (!std::regex_search(o.store, m, std::regex(R"(@([0-9.]+):(\d+)/)"))) {
      throw std::runtime_error("the store URI must name host:port");
    }
    return m;
  }();
  Relay relay(o.relay_port, Ipv4(match[1].str(), static_cast<uint16_t>(std::stoi(match[2]))));
  const std::string relayed = std::regex_replace(o.store, std::regex(R"(@[0-9.]+:\d+/)"),
                                                 fmt::format("@127.0.0.1:{}/", o.relay_port));
  auto argv = [&](const std::string& store, const std::string& admin) {
    return std::vector<std::string>{o.nlockd,
                                    "--listen",
                                    fmt::format("127.0.0.1:{}", o.port),
                                    "--rpcbind-register=false",
                                    "--admin-listen",
                                    admin,
                                    "--admin-open-writes=true",
                                    "--name",
                                    service,
                                    "--store",
                                    store,
                                    "--grace",
                                    std::to_string(o.grace),
                                    "--notify-statd-port",
                                    std::to_string(o.statd_port),
                                    "--max-hosts",
                                    std::to_string(o.hosts + 100),
                                    "--nsm-max-registrations",
                                    std::to_string(o.hosts + 100),
                                    "--ha=true",
                                    "--ha-lease",
                                    std::to_string(o.lease)};
  };
  const sockaddr_in server = Ipv4("127.0.0.1", o.port);
  std::vector<std::unique_ptr<NlmHost>> hosts;
  for (size_t h = 0; h < o.hosts; ++h) {
    hosts.push_back(std::make_unique<NlmHost>(HostAddress(h), server));
  }
  NlmHost prober("127.0.0.2", server);
  LockWorkers workers(hosts, o.locks, o.workers);

  auto a = std::make_unique<Daemon>(
      argv(relayed, fault == "release" ? fmt::format("127.0.0.1:{}", o.admin_port) : "off"));
  if (!a->Wait("nlockd listening", std::chrono::seconds(60))) {
    throw std::runtime_error("A did not serve:\n" + a->Log());
  }
  workers.LockAll();
  workers.WaitAllAnswered();
  if (workers.failed() != 0) {
    throw std::runtime_error(fmt::format("{} first locks failed", workers.failed()));
  }
  Daemon b(argv(o.store, "off"));
  if (!b.Wait("ha: standby for service", std::chrono::seconds(60))) {
    throw std::runtime_error("B did not wait as standby:\n" + b.Log());
  }
  workers.ResetCounts();
  StatusMonitors monitors(o.statd_port, o.hosts,
                          [&](size_t host, int32_t state) { workers.Reclaim(host, state); });

  const Clock::time_point fault_at = Clock::now();
  std::string a_status;
  if (fault == "kill") {
    a->Kill(SIGKILL);
  } else if (fault == "term") {
    a->Kill(SIGTERM);
  } else if (fault == "release") {
    if (PostRelease(o.admin_port) != 202) {
      throw std::runtime_error("A did not accept the release:\n" + a->Log());
    }
  } else {
    relay.Cut();
  }
  const Clock::time_point available =
      FirstGrant(prober, "unrelated-" + fault, fault_at + std::chrono::seconds(o.lease * 4 + 60));
  auto listening = b.Wait("nlockd listening", std::chrono::seconds(60));
  auto ended = b.Wait("grace period ended", std::chrono::seconds(o.grace + 30));
  workers.WaitAllAnswered(Clock::now() + std::chrono::seconds(5));
  std::optional<std::pair<Clock::time_point, std::string>> a_stopped;
  if (fault == "partition") {
    a_stopped = a->Wait("ha: (lost the lease|could not renew)", std::chrono::seconds(30));
  }
  workers.Close();
  if (!listening || !ended) {
    std::cerr << "B did not log the expected lines:\n" << b.Log();
    return false;
  }
  const bool all = workers.granted() == o.hosts * o.locks &&
                   ended->second.find("reason=all-reclaimed") != std::string::npos;
  std::cout << fmt::format(
      "{:9} {} hosts x {} locks, lease {} s: fault -> B listening {:.3f} s, (i) first new lock "
      "{:.3f} s, (ii) grace ended {:.3f} s ({:.3f} s after (i)); {} of {} reclaimed{}\n",
      fault, o.hosts, o.locks, o.lease, Seconds(listening->first - fault_at),
      Seconds(available - fault_at), Seconds(ended->first - fault_at),
      Seconds(ended->first - available), workers.granted(), o.hosts * o.locks,
      a_stopped
          ? fmt::format("; A stopped {:.3f} s after the cut", Seconds(a_stopped->first - fault_at))
          : std::string());
  if (!all)
    std::cerr << "not every lock was reclaimed before grace ended: " << ended->second << "\n";
  if (std::getenv("NLOCKD_BENCH_LOGS") != nullptr) {
    std::cerr << "--- A (" << fault << ")\n" << a->Log() << "--- B (" << fault << ")\n" << b.Log();
  }
  return all;
}

}  // namespace
}  // namespace nlockd::bench

int main(int argc, char** argv) {
  CLI::App app{"nlockd-takeover-bench: HA takeover after kill -9, SIGTERM or a partition"};
  nlockd::bench::Options o;
  int rounds = 1;
  app.add_option("--nlockd", o.nlockd, "the nlockd binary")->required();
  app.add_option("--store", o.store, "postgresql:// URI with host:port")->required();
  app.add_option("--faults", o.faults, "kill, term, release, partition (default all four)");
  app.add_option("--rounds", rounds, "rounds of every fault (default 1)");
  app.add_option("--hosts", o.hosts, "simulated client hosts (default 1000)")
      ->check(CLI::Range(1, 60000));
  app.add_option("--locks", o.locks, "locks per host (default 10)")->check(CLI::Range(1, 1000));
  app.add_option("--lease", o.lease, "--ha-lease seconds (default 5)");
  app.add_option("--grace", o.grace, "nlockd --grace (default 90)");
  app.add_option("--workers", o.workers, "hosts locking or reclaiming at once (default 64)");
  CLI11_PARSE(app, argc, argv);
  rlimit files{65536, 65536};
  ::setrlimit(RLIMIT_NOFILE, &files);
  ::signal(SIGPIPE, SIG_IGN);
  bool ok = true;
  try {
    for (int round = 1; round <= rounds; ++round) {
      for (const std::string& fault : o.faults) {
        ok = nlockd::bench::RunFault(o, fault, round) && ok;
      }
    }
  } catch (const std::exception& e) {
    std::cerr << "nlockd-takeover-bench: " << e.what() << "\n";
    return 1;
  }
  return ok ? 0 : 1;
}
