// SPDX-License-Identifier: Apache-2.0
// nlockd-notify-bench: one restart-notification round to many monitored hosts on loopback
// addresses (127.a.b.c), a share of which never answer.
//
// One responder thread plays every peer: a UDP socket on 0.0.0.0 answers PMAP GETPORT (100024
// v1 UDP -> its own port) and SM_NOTIFY, replying from the address the datagram was sent to
// (IP_PKTINFO), as each peer's own rpcbind and statd would; datagrams to silent hosts are
// dropped. The notifier runs on the main thread's io_context, as in nlockd.
//
// Reports: time until every answering host was notified (goal < 2 s, none lost), time until
// every host had its first attempt (answered or failed; goal: attempt deadline + 1 s) and until
// the round ended (silent hosts given up after their budget, by default one attempt), and, as
// the baseline measured in the same run, sequential SM_NOTIFY round trips to one host.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <arpa/inet.h>
#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <netinet/in.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/clock.hpp"
#include "nsm/notifier.hpp"
#include "nsm/wire.hpp"
#include "rpc/client.hpp"
#include "rpc/message.hpp"
#include "rpc/rpcbind.hpp"
#include "store/memory/memory_store.hpp"
#include "store/open_store.hpp"
#include "tests/testutil/udp_pktinfo.hpp"
#include "xdr/decoder.hpp"
#include "xdr/encoder.hpp"

namespace {

using Seconds = std::chrono::duration<double>;
using nlockd::nsm::NotifyTarget;

// CPU seconds (user + system) this thread has used: the cost of the round independent of how
// busy the machine is.
double ThreadCpuSeconds() {
  rusage usage{};
  ::getrusage(RUSAGE_THREAD, &usage);
  auto seconds = [](const timeval& tv) {
    return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) / 1e6;
  };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

std::string HostAddress(int i) {
  return "127." + std::to_string(1 + i / 62500) + "." + std::to_string(1 + (i / 250) % 250) + "." +
         std::to_string(1 + i % 250);
}

// Every peer at once: answers GETPORT and SM_NOTIFY on one UDP socket, from the address each
// datagram was sent to. Runs on its own thread; counts the distinct hosts notified.
class Responder {
 public:
  explicit Responder(std::set<uint32_t> silent) : silent_(std::move(silent)) {
    fd_ = ::socket(AF_INET, SOCK_DGRAM, 0);
    int on = 1;
    ::setsockopt(fd_, IPPROTO_IP, IP_PKTINFO, &on, sizeof on);
    int buffer = 8 << 20;
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &buffer, sizeof buffer);
    ::setsockopt(fd_, SOL_SOCKET, SO_SNDBUF, &buffer, sizeof buffer);
    sockaddr_in any{};
    any.sin_family = AF_INET;
    any.sin_addr.s_addr = htonl(INADDR_ANY);
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&any), sizeof any) != 0) {
      throw std::runtime_error("responder bind failed");
    }
    socklen_t len = sizeof any;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&any), &len);
    port_ = ntohs(any.sin_port);
    thread_ = std::thread([this] { Run(); });
  }
  ~Responder() {
    stop_ = true;
    thread_.join();
    ::close(fd_);
  }
  uint16_t port() const { return port_; }
  size_t notified() {
    std::lock_guard lock(mu_);
    return notified_.size();
  }
  uint64_t dropped() const { return dropped_; }

 private:
  void Run() {
    std::vector<uint8_t> buffer(64 * 1024);
    pollfd ready{fd_, POLLIN, 0};
    while (!stop_) {
      if (::poll(&ready, 1, 100) <= 0) continue;  // 100 ms: so that the thread sees stop_
      while (auto datagram = nlockd::testutil::ReceiveAddressed(fd_, buffer)) {
        Answer(*datagram, std::span<const uint8_t>(buffer.data(), datagram->size));
      }
    }
  }

  void Answer(const nlockd::testutil::AddressedDatagram& datagram,
              std::span<const uint8_t> message) {
    const uint32_t to = ntohl(datagram.destination.s_addr);
    if (silent_.count(to)) {
      ++dropped_;
      return;
    }
    nlockd::rpc::DecodedCall call = nlockd::rpc::DecodeCall(message);
    if (call.status != nlockd::rpc::CallDecodeStatus::kOk) return;
    std::vector<uint8_t> reply;
    nlockd::xdr::Encoder enc(reply);
    nlockd::rpc::EncodeAcceptedHeader(enc, call.header.xid, nlockd::rpc::AcceptStat::kSuccess);
    nlockd::xdr::Decoder args(call.args);
    if (call.header.program == nlockd::rpc::kPmapProgram) {
      enc.U32(port_);
    } else if (call.header.program == nlockd::nsm::SM_PROG &&
               call.header.procedure == nlockd::nsm::SM_NOTIFY) {
      nlockd::nsm::stat_chge change;
      if (!Decode(args, change)) return;
      std::lock_guard lock(mu_);
      notified_.insert(to);
    } else {
      return;
    }
    nlockd::testutil::SendFrom(fd_, datagram.from, datagram.destination, reply);
  }

  std::set<uint32_t> silent_;
  int fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> dropped_{0};
  std::mutex mu_;
  std::set<uint32_t> notified_;
  std::thread thread_;
};

// The baseline: SM_NOTIFY round trips one after another to one host, through rpc::Client.
asio::awaitable<void> SequentialNotifies(nlockd::rpc::Client& client, uint16_t port, int count,
                                         double& seconds) {
  nlockd::rpc::CallTarget target{"127.0.0.1", port, nlockd::rpc::Transport::kUdp};
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < count; ++i) {
    std::vector<uint8_t> args;
    nlockd::xdr::Encoder enc(args);
    nlockd::nsm::stat_chge change{"bench-server", 3};
    Encode(enc, change);
    auto result = co_await client.Call(target, nlockd::nsm::SM_PROG, nlockd::nsm::SM_VERS,
                                       nlockd::nsm::SM_NOTIFY, std::move(args));
    if (result.status != nlockd::rpc::CallStatus::kOk) throw std::runtime_error("baseline failed");
  }
  seconds = Seconds(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  int hosts = 10000;
  int silent_percent = 10;
  int deadline_ms = 5000;
  int budget_ms = -1;
  size_t max_in_flight = nlockd::nsm::NotifierOptions{}.max_in_flight;
  bool configured_port = false;
  std::string store_uri = "memory:";
  int baseline_calls = 1000;
  bool verbose = false;
  CLI::App app{"nlockd-notify-bench: one SM_NOTIFY round to many loopback hosts"};
  app.add_option("--hosts", hosts, "monitored hosts (default 10000)");
  app.add_option("--silent-percent", silent_percent, "hosts that never answer (default 10)");
  app.add_option("--deadline-ms", deadline_ms, "per-attempt deadline (default 5000)");
  app.add_option("--budget-ms", budget_ms,
                 "retry budget per host (default: the deadline, i.e. one attempt)");
  app.add_option("--max-in-flight", max_in_flight, "attempts in flight at most");
  app.add_flag("--configured-port", configured_port, "skip rpcbind: statd port configured");
  app.add_option("--store", store_uri, "store URI for the owed rows (default memory:)");
  app.add_option("--baseline-calls", baseline_calls, "sequential SM_NOTIFY calls (default 1000)");
  app.add_flag("--verbose", verbose, "print progress every 250 ms");
  CLI11_PARSE(app, argc, argv);
  spdlog::set_level(spdlog::level::err);
  if (budget_ms < 0) budget_ms = deadline_ms;

  std::vector<NotifyTarget> targets;
  std::set<uint32_t> silent;
  for (int i = 0; i < hosts; ++i) {
    std::string address = HostAddress(i);
    if (i % 100 < silent_percent) {
      in_addr a{};
      ::inet_pton(AF_INET, address.c_str(), &a);
      silent.insert(ntohl(a.s_addr));
    }
    targets.push_back(NotifyTarget{"host-" + std::to_string(i), address});
  }
  const size_t answering = static_cast<size_t>(hosts) - silent.size();
  Responder responder(silent);

  asio::io_context io;
  nlockd::SteadyClock clock;
  nlockd::store::StoreOptions store_options;
  auto store = nlockd::store::OpenStore(store_uri, store_options);
  nlockd::rpc::Client client(io.get_executor());

  double baseline_seconds = 0;
  asio::co_spawn(io, SequentialNotifies(client, responder.port(), baseline_calls, baseline_seconds),
                 [](std::exception_ptr e) {
                   if (e) std::rethrow_exception(e);
                 });
  io.run();
  io.restart();
  const size_t baseline_notified = responder.notified();

  nlockd::nsm::NotifierOptions options;
  options.attempt_deadline = std::chrono::milliseconds(deadline_ms);
  options.total_budget = std::chrono::milliseconds(budget_ms);
  options.max_in_flight = max_in_flight;
  options.rpcbind_port = responder.port();
  if (configured_port) options.statd_port = responder.port();
  nlockd::nsm::Notifier notifier(io.get_executor(), client, *store, clock, options);

  size_t answered = 0;
  size_t given_up = 0;
  double cpu_before = 0;
  double cpu_all_answered = 0;
  std::chrono::steady_clock::time_point all_answered{};
  std::chrono::steady_clock::time_point first_pass{};
  std::chrono::steady_clock::time_point round_end{};
  notifier.set_on_answered([&](const std::string&) {
    if (++answered == answering) {
      all_answered = std::chrono::steady_clock::now();
      cpu_all_answered = ThreadCpuSeconds();
    }
  });
  notifier.set_on_given_up([&](const std::string&) { ++given_up; });

  cpu_before = ThreadCpuSeconds();
  const auto start = std::chrono::steady_clock::now();
  notifier.StartRound("bench-server", 5, targets);
  const auto returned = std::chrono::steady_clock::now();
  auto last_print = start;
  const auto give_up_at = start + std::chrono::milliseconds(budget_ms) + std::chrono::minutes(20);
  while (notifier.RoundActive() && std::chrono::steady_clock::now() < give_up_at) {
    io.run_for(std::chrono::milliseconds(1));
    auto stats = notifier.stats();
    const auto now = std::chrono::steady_clock::now();
    if (verbose && now - last_print > std::chrono::milliseconds(250)) {
      last_print = now;
      std::printf(
          "  %6.3f s: attempts %llu answered %llu failed %llu in flight %zu lingering %zu\n",
          Seconds(now - start).count(), static_cast<unsigned long long>(stats.attempts),
          static_cast<unsigned long long>(stats.answered),
          static_cast<unsigned long long>(stats.failed_attempts), stats.in_flight, stats.lingering);
    }
    if (first_pass == std::chrono::steady_clock::time_point{} &&
        stats.answered + stats.failed_attempts >= static_cast<uint64_t>(hosts)) {
      first_pass = now;
    }
  }
  round_end = std::chrono::steady_clock::now();
  if (first_pass == std::chrono::steady_clock::time_point{}) first_pass = round_end;
  asio::co_spawn(io, notifier.Shutdown(), [](std::exception_ptr) {});
  io.run();
  const auto stats = notifier.stats();

  auto since = [&](std::chrono::steady_clock::time_point t) { return Seconds(t - start).count(); };
  const double per_call = baseline_seconds / baseline_calls;
  std::printf(
      "nlockd-notify-bench: %d hosts (%zu answering, %zu silent), deadline %d ms, "
      "budget %d ms, max_in_flight %zu, %s, store %s\n",
      hosts, answering, silent.size(), deadline_ms, budget_ms, max_in_flight,
      configured_port ? "configured statd port" : "rpcbind GETPORT + SM_NOTIFY", store_uri.c_str());
  std::printf("baseline: %d sequential SM_NOTIFY round trips to one host: %.3f s, %.1f us each\n",
              baseline_calls, baseline_seconds, per_call * 1e6);
  std::printf("StartRound returned after      %8.3f ms\n", Seconds(returned - start).count() * 1e3);
  if (answered == answering) {
    std::printf(
        "all %zu answering hosts in     %8.3f s  (%.2fx the sequential time for as many "
        "hosts; goal < 2 s)\n",
        answering, since(all_answered),
        since(all_answered) / (per_call * static_cast<double>(answering)));
  } else {
    std::printf("only %zu of %zu answering hosts were notified\n", answered, answering);
  }
  std::printf(
      "notifier thread CPU until then: %.3f s (%.1f us per answering host); a loaded "
      "machine stretches wall time beyond it\n",
      cpu_all_answered - cpu_before,
      (cpu_all_answered - cpu_before) / static_cast<double>(answering) * 1e6);
  std::printf("first attempt of every host in %8.3f s  (goal: deadline + 1 s = %.1f s)\n",
              since(first_pass), deadline_ms / 1e3 + 1);
  std::printf("round ended in                 %8.3f s  (%zu answered, %zu given up)\n",
              since(round_end), answered, given_up);
  std::printf(
      "notified hosts seen by responder: %zu (lost: %zu); attempts %llu, SM_NOTIFY sent "
      "%llu, failed attempts %llu, datagrams dropped by silent hosts %llu\n",
      responder.notified() - baseline_notified,
      answering - (responder.notified() - baseline_notified),
      static_cast<unsigned long long>(stats.attempts), static_cast<unsigned long long>(stats.sent),
      static_cast<unsigned long long>(stats.failed_attempts),
      static_cast<unsigned long long>(responder.dropped()));
  return answered == answering ? 0 : 1;
}
