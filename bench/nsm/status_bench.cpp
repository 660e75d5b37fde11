// SPDX-License-Identifier: Apache-2.0
// nlockd-nsm-status-bench: against a running nlockd, (1) SM_NOTIFY received -> status callback
// sent, with 1 registration present and with N (default 10,000), measured from sending the
// SM_NOTIFY to the callback's arrival at a local callback server; (2) SM_SIMU_CRASH with N
// monitored hosts: time until every host got SM_NOTIFY with the new state.
//
// REQUIRES: its own network namespace (bench/nsm/run_status.sh makes one): the bench plays this
// host's rpcbind on 0.0.0.0:111 (GETPORT 100021 -> the callback server, 100024 -> itself) and
// every monitored peer (127.a.b.c: GETPORT and SM_NOTIFY on :111, answered from the address
// the datagram was sent to, as each peer's own rpcbind and statd would); a fresh nlockd there
// with an empty store, --rpcbind-port 111 and a registration limit of at least N.
//
// With --real-rpcbind the host's rpcbind is a real one already running in the namespace (with
// its own /run, as bench/nsm/run_status.sh --real starts Debian's): the callback server is
// registered with it (NLM 4 over UDP, through libtirpc's pmap_set), so the status monitor
// under test finds the callback's port as it would on a real host; the peers' rpcbinds are not
// played and SM_SIMU_CRASH is not run. --port 0 finds the status monitor through that rpcbind
// (SM 1 over UDP), so that Debian's rpc.statd can be measured the same way.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <rpc/pmap_clnt.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/testutil/udp_pktinfo.hpp"

namespace {

using Clock = std::chrono::steady_clock;
constexpr uint32_t kPmapProg = 100000, kSmProg = 100024, kNlmProg = 100021;
constexpr uint32_t kSmStat = 1, kSmMon = 2, kSmSimuCrash = 5, kSmNotify = 6;
constexpr uint16_t kRpcbindPort = 111;

// XDR, just what these calls need.
class Xdr {
 public:
  Xdr& U32(uint32_t v) {
    for (int shift = 24; shift >= 0; shift -= 8) bytes.push_back(static_cast<uint8_t>(v >> shift));
    return *this;
  }
  Xdr& Str(const std::string& s) {
    U32(static_cast<uint32_t>(s.size()));
    bytes.insert(bytes.end(), s.begin(), s.end());
    while (bytes.size() % 4) bytes.push_back(0);
    return *this;
  }
  std::vector<uint8_t> bytes;
};

class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  std::optional<uint32_t> U32() {
    if (size_ - pos_ < 4) return std::nullopt;
    uint32_t v = static_cast<uint32_t>(data_[pos_]) << 24 |
                 static_cast<uint32_t>(data_[pos_ + 1]) << 16 |
                 static_cast<uint32_t>(data_[pos_ + 2]) << 8 | data_[pos_ + 3];
    pos_ += 4;
    return v;
  }
  std::optional<std::string> Str() {
    auto length = U32();
    if (!length || *length > size_ - pos_) return std::nullopt;
    std::string s(reinterpret_cast<const char*>(data_ + pos_), *length);
    pos_ += (*length + 3) / 4 * 4;
    return pos_ <= size_ ? std::optional(s) : std::nullopt;
  }
  // Skips an opaque_auth.
  bool Auth() {
    auto flavor = U32();
    auto length = U32();
    if (!flavor || !length || *length > 400 || (*length + 3) / 4 * 4 > size_ - pos_) return false;
    pos_ += (*length + 3) / 4 * 4;
    return true;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

sockaddr_in Ipv4(const std::string& address, uint16_t port) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  inet_pton(AF_INET, address.c_str(), &sa.sin_addr);
  return sa;
}

std::string HostAddress(size_t i) {
  return "127." + std::to_string(10 + i / 62500) + "." + std::to_string(1 + (i / 250) % 250) + "." +
         std::to_string(1 + i % 250);
}

double Micros(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

// This host's rpcbind, the callback server and every peer's rpcbind + statd, on one thread.
class Peers {
 public:
  explicit Peers(bool play_rpcbind) {
    // Without it the socket stays unbound (never readable); the real rpcbind holds :111.
    rpcbind_fd_ =
        play_rpcbind ? Bind(Ipv4("0.0.0.0", kRpcbindPort)) : ::socket(AF_INET, SOCK_DGRAM, 0);
    callback_fd_ = Bind(Ipv4("127.0.0.1", 0));
    sockaddr_in bound{};
    socklen_t length = sizeof bound;
    ::getsockname(callback_fd_, reinterpret_cast<sockaddr*>(&bound), &length);
    callback_port_ = ntohs(bound.sin_port);
    thread_ = std::thread([this] { Run(); });
  }
  ~Peers() {
    stop_ = true;
    thread_.join();
    ::close(rpcbind_fd_);
    ::close(callback_fd_);
  }

  // Waits for a status callback carrying `state`; its arrival time.
  std::optional<Clock::time_point> WaitCallback(int32_t state, std::chrono::seconds timeout) {
    std::unique_lock lock(mutex_);
    bool got = changed_.wait_for(lock, timeout, [&] { return callbacks_.contains(state); });
    if (!got) return std::nullopt;
    return callbacks_[state];
  }
  // Waits until `hosts` distinct peers got SM_NOTIFY with `state`; the last arrival time.
  std::optional<Clock::time_point> WaitNotified(int32_t state, size_t hosts,
                                                std::chrono::seconds timeout) {
    std::unique_lock lock(mutex_);
    bool got = changed_.wait_for(lock, timeout, [&] { return notified_[state].size() >= hosts; });
    if (!got) return std::nullopt;
    return last_notified_[state];
  }
  size_t Notified(int32_t state) {
    std::lock_guard lock(mutex_);
    return notified_[state].size();
  }
  uint64_t duplicate_notifies() const { return duplicates_; }
  uint16_t callback_port() const { return callback_port_; }

 private:
  static int Bind(sockaddr_in address) {
    int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
    // Each datagram's destination says which host it was for, and the answer leaves from it.
    int on = 1;
    ::setsockopt(fd, IPPROTO_IP, IP_PKTINFO, &on, sizeof on);
    int buffer = 8 << 20;
    ::setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &buffer, sizeof buffer);
    ::setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &buffer, sizeof buffer);
    if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
      std::perror("bind");
      std::exit(2);
    }
    return fd;
  }

  void Run() {
    pollfd fds[2] = {{rpcbind_fd_, POLLIN, 0}, {callback_fd_, POLLIN, 0}};
    while (!stop_) {
      if (::poll(fds, 2, 100) <= 0) continue;
      if (fds[0].revents & POLLIN) Serve(rpcbind_fd_, true);
      if (fds[1].revents & POLLIN) Serve(callback_fd_, false);
    }
  }

  void Serve(int fd, bool peer_socket) {
    uint8_t buffer[9000];
    auto datagram = nlockd::testutil::ReceiveAddressed(fd, buffer);
    if (!datagram) return;
    Clock::time_point arrived = Clock::now();
    const in_addr destination = datagram->destination;
    Reader in(buffer, datagram->size);
    auto xid = in.U32();
    auto type = in.U32();
    auto rpcvers = in.U32();
    auto prog = in.U32();
    auto vers = in.U32();
    auto proc = in.U32();
    if (!proc || *type != 0 || *rpcvers != 2 || !in.Auth() || !in.Auth()) return;
    Xdr reply;
    reply.U32(*xid).U32(1).U32(0).U32(0).U32(0).U32(0);  // accepted, AUTH_NONE, SUCCESS
    if (peer_socket && *prog == kPmapProg && *proc == 3) {
      auto wanted = in.U32();
      if (!wanted) return;
      reply.U32(*wanted == kSmProg ? kRpcbindPort : *wanted == kNlmProg ? callback_port_ : 0);
    } else if (peer_socket && *prog == kSmProg && *proc == kSmNotify) {
      if (!in.Str()) return;  // mon_name
      auto state = in.U32();
      if (!state) return;
      std::lock_guard lock(mutex_);
      if (!notified_[static_cast<int32_t>(*state)].insert(destination.s_addr).second) ++duplicates_;
      last_notified_[static_cast<int32_t>(*state)] = arrived;
      changed_.notify_all();
    } else if (!peer_socket && *prog == kNlmProg && *proc == 16) {
      if (!in.Str()) return;  // mon_name
      auto state = in.U32();
      if (!state) return;
      std::lock_guard lock(mutex_);
      callbacks_.emplace(static_cast<int32_t>(*state), arrived);
      changed_.notify_all();
    } else if (*proc != 0) {
      return;
    }
    (void)vers;
    // Answer from the address the call was sent to.
    nlockd::testutil::SendFrom(fd, datagram->from, destination, reply.bytes);
  }

  int rpcbind_fd_ = -1;
  int callback_fd_ = -1;
  uint16_t callback_port_ = 0;
  std::atomic<bool> stop_ = false;
  std::thread thread_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<int32_t, Clock::time_point> callbacks_;
  std::map<int32_t, std::set<uint32_t>> notified_;
  std::map<int32_t, Clock::time_point> last_notified_;
  std::atomic<uint64_t> duplicates_ = 0;
};

// A UDP caller of nlockd's NSM, from a given local address.
class NsmCaller {
 public:
  NsmCaller(sockaddr_in server, const std::string& local) : server_(server) {
    fd_ = ::socket(AF_INET, SOCK_DGRAM, 0);
    sockaddr_in address = Ipv4(local, 0);
    ::bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address);
    timeval timeout{2, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  }
  ~NsmCaller() { ::close(fd_); }
  NsmCaller(const NsmCaller&) = delete;
  NsmCaller& operator=(const NsmCaller&) = delete;

  // The result words of a successful reply; nullopt after three unanswered tries.
  std::optional<std::vector<uint32_t>> Call(uint32_t proc, const Xdr& args, size_t words) {
    uint32_t xid = ++xid_;
    Xdr call;
    call.U32(xid).U32(0).U32(2).U32(kSmProg).U32(1).U32(proc).U32(0).U32(0).U32(0).U32(0);
    call.bytes.insert(call.bytes.end(), args.bytes.begin(), args.bytes.end());
    for (int attempt = 0; attempt < 3; ++attempt) {
      ::sendto(fd_, call.bytes.data(), call.bytes.size(), 0,
               reinterpret_cast<const sockaddr*>(&server_), sizeof server_);
      uint8_t buffer[1024];
      for (;;) {
        ssize_t n = ::recv(fd_, buffer, sizeof buffer, 0);
        if (n <= 0) break;
        Reader in(buffer, static_cast<size_t>(n));
        if (in.U32() != xid || in.U32() != 1u || in.U32() != 0u || !in.Auth() || in.U32() != 0u) {
          continue;
        }
        std::vector<uint32_t> result;
        for (size_t i = 0; i < words; ++i) {
          auto word = in.U32();
          if (!word) return std::nullopt;
          result.push_back(*word);
        }
        return result;
      }
    }
    return std::nullopt;
  }

  bool Mon(const std::string& mon_name, uint8_t priv0) {
    Xdr args;
    args.Str(mon_name).Str("localhost").U32(kNlmProg).U32(4).U32(16);
    args.U32(static_cast<uint32_t>(priv0) << 24).U32(0).U32(0).U32(0);
    auto res = Call(kSmMon, args, 2);
    return res && (*res)[0] == 0;
  }
  std::optional<int32_t> State() {
    auto res = Call(kSmStat, Xdr().Str("x"), 2);
    if (!res) return std::nullopt;
    return static_cast<int32_t>((*res)[1]);
  }

 private:
  int fd_ = -1;
  sockaddr_in server_;
  uint32_t xid_ = 1;
};

struct Stats {
  double p50 = 0, p99 = 0, max = 0;
  size_t lost = 0;
};

// SM_NOTIFY from `host` (bound to its address) with increasing states; each until its callback.
Stats NotifyToCallback(Peers& peers, sockaddr_in server, const std::string& host, int rounds,
                       int32_t& state) {
  NsmCaller notifier(server, host);
  std::vector<double> micros;
  Stats stats;
  for (int i = 0; i < rounds; ++i) {
    state += 2;
    Xdr args;
    args.Str(host).U32(static_cast<uint32_t>(state));
    Clock::time_point sent = Clock::now();
    notifier.Call(kSmNotify, args, 0);
    auto arrived = peers.WaitCallback(state, std::chrono::seconds(5));
    if (!arrived) {
      ++stats.lost;
      continue;
    }
    micros.push_back(Micros(*arrived - sent));
  }
  if (micros.empty()) return stats;
  std::sort(micros.begin(), micros.end());
  stats.p50 = micros[micros.size() / 2];
  stats.p99 = micros[std::min(micros.size() - 1, micros.size() * 99 / 100)];
  stats.max = micros.back();
  return stats;
}

std::string daemon_label;  // --label: printed before each line

void Print(const std::string& label, const Stats& s) {
  std::cout << daemon_label << label << ": notify->callback p50=" << s.p50 << "us p99=" << s.p99
            << "us max=" << s.max << "us lost=" << s.lost << std::endl;
}

// The real rpcbind's entry for the callback server, taken out again when the bench ends.
class CallbackRegistration {
 public:
  explicit CallbackRegistration(uint16_t port) {
    ::pmap_unset(kNlmProg, 4);
    registered_ = ::pmap_set(kNlmProg, 4, IPPROTO_UDP, port) != 0;
  }
  ~CallbackRegistration() {
    if (registered_) ::pmap_unset(kNlmProg, 4);
  }
  CallbackRegistration(const CallbackRegistration&) = delete;
  CallbackRegistration& operator=(const CallbackRegistration&) = delete;
  bool registered() const { return registered_; }

 private:
  bool registered_ = false;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"nlockd-nsm-status-bench: SM_NOTIFY -> status callback, SM_SIMU_CRASH round"};
  uint16_t port = 4045;
  size_t registrations = 10'000;
  int rounds = 200;
  app.add_option("--port", port, "nlockd's port on 127.0.0.1 (UDP; default 4045)");
  app.add_option("--registrations", registrations, "registrations for the second run (10,000)");
  app.add_option("--rounds", rounds, "SM_NOTIFYs per run (200)");
  bool real_rpcbind = false;
  app.add_flag("--real-rpcbind", real_rpcbind,
               "register the callback with the rpcbind running here instead of playing one; "
               "no SM_SIMU_CRASH run");
  app.add_option("--label", daemon_label, "prefix for each result line");
  CLI11_PARSE(app, argc, argv);

  Peers peers(!real_rpcbind);
  std::optional<CallbackRegistration> registration;
  if (real_rpcbind) {
    registration.emplace(peers.callback_port());
    if (!registration->registered()) {
      std::cerr << "could not register NLM 4 with the local rpcbind" << std::endl;
      return EXIT_FAILURE;
    }
  }
  if (port == 0) {
    sockaddr_in rpcbind = Ipv4("127.0.0.1", kRpcbindPort);
    port = ::pmap_getport(&rpcbind, kSmProg, 1, IPPROTO_UDP);
    if (port == 0) {
      std::cerr << "no SM 1 over UDP at the local rpcbind" << std::endl;
      return EXIT_FAILURE;
    }
  }
  sockaddr_in server = Ipv4("127.0.0.1", port);
  NsmCaller local(server, "127.0.0.1");
  const std::string notified_host = HostAddress(0);
  if (!local.Mon(notified_host, 7)) {
    std::cerr << "SM_MON failed" << std::endl;
    return EXIT_FAILURE;
  }
  int32_t peer_state = 1;
  Print("1 registration", NotifyToCallback(peers, server, notified_host, rounds, peer_state));

  Clock::time_point fill_start = Clock::now();
  for (size_t i = 1; i < registrations; ++i) {
    if (!local.Mon(HostAddress(i), 0)) {
      std::cerr << "SM_MON " << i << " failed" << std::endl;
      return EXIT_FAILURE;
    }
  }
  std::cout << "registered " << registrations << " hosts one at a time in "
            << std::chrono::duration<double>(Clock::now() - fill_start).count() << " s"
            << std::endl;
  Print(std::to_string(registrations) + " registrations",
        NotifyToCallback(peers, server, notified_host, rounds, peer_state));

  if (real_rpcbind) return EXIT_SUCCESS;
  // SM_SIMU_CRASH: every monitored host must get the new state.
  auto before = local.State();
  Clock::time_point sent = Clock::now();
  bool answered = local.Call(kSmSimuCrash, Xdr(), 0).has_value();
  auto after = local.State();
  if (!answered || !before || !after || *after != *before + 2) {
    std::cerr << "SM_SIMU_CRASH: answered=" << answered << " state " << before.value_or(-1)
              << " -> " << after.value_or(-1) << std::endl;
    return EXIT_FAILURE;
  }
  auto last = peers.WaitNotified(*after, registrations, std::chrono::seconds(120));
  if (!last) {
    std::cout << "SM_SIMU_CRASH: only " << peers.Notified(*after) << " of " << registrations
              << " hosts notified within 120 s" << std::endl;
    return EXIT_FAILURE;
  }
  std::cout << "SM_SIMU_CRASH state " << *before << " -> " << *after << ": all " << registrations
            << " hosts notified in " << Micros(*last - sent) / 1000 << " ms (duplicate notifies "
            << peers.duplicate_notifies() << ")" << std::endl;
  return EXIT_SUCCESS;
}
