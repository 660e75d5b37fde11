// SPDX-License-Identifier: Apache-2.0
// hostile_client: one client host of the hostile-client test, run inside its network namespace.
// Either the legitimate client, which locks and unlocks through rpcgen's NLM version 4 stubs
// over TCP and reports its latencies, or one of the attacks on nlockd's RPC transport. Each
// runs for the seconds given, prints one line of results and exits 0 (1 on a usage error).
//
//   hostile_client --server ADDR --port N --seconds S [--source ADDR] MODE
//   MODE:
//     legit              LOCK then UNLOCK, one after the other, on one connection
//     connections COUNT  COUNT idle TCP connections, held open
//     trickle COUNT MS   COUNT connections, each sending one byte of an unfinished record every
//                        MS milliseconds
//     unread COUNT       COUNT connections pipelining TEST calls (1 KiB cookie) and never
//                        reading a reply
//     fragments SIZE     records of SIZE bytes in 1-byte fragments, one connection after another
//     partial COUNT      COUNT connections, each sending all but the last byte of a 1 MiB record
//     truncated_msg      a LOCK_MSG over UDP whose arguments stop short; prints what came back
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "integration/nlm_rpcgen.hpp"
#include "integration/raw_rpc.hpp"

namespace nlockd::integration {
namespace {

using Clock = std::chrono::steady_clock;
using Bytes = std::vector<uint8_t>;

struct Target {
  sockaddr_in address{};
  std::string source;  // The local address to send from; empty: the system's choice.
  Clock::time_point until;
};

// A TCP socket connected to the target (blocking connect), or -1.
int Connect(const Target& target) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (!target.source.empty()) {
    const sockaddr_in local = Ipv4(target.source, 0);
    if (bind(fd, reinterpret_cast<const sockaddr*>(&local), sizeof local) != 0) {
      close(fd);
      return -1;
    }
  }
  if (connect(fd, reinterpret_cast<const sockaddr*>(&target.address), sizeof target.address) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

void SetNonBlocking(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }

// Whether the server closed `fd` (EOF or reset), without waiting.
bool ClosedByServer(int fd) {
  uint8_t byte;
  const ssize_t n = recv(fd, &byte, 1, MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

// Enough descriptors for a thousand connections and more.
void RaiseFileLimit() {
  rlimit limit{};
  getrlimit(RLIMIT_NOFILE, &limit);
  limit.rlim_cur = limit.rlim_max;
  setrlimit(RLIMIT_NOFILE, &limit);
}

void SleepUntil(Clock::time_point when) { std::this_thread::sleep_until(when); }

Bytes RecordOf(const Bytes& message) {
  XdrWriter w;
  w.U32(0x80000000u | static_cast<uint32_t>(message.size())).Raw(message);
  return w.bytes();
}

int Legit(const Target& target) {
  auto client = NlmRpcgenClient::Connect(4, /*tcp=*/true, target.address);
  if (!client) {
    std::printf("legit connect_failed %s\n", NlmRpcgenClient::CreateError().c_str());
    return 0;
  }
  NlmLock lock{.caller_name = "legit",
               .fh = "legit-file",
               .oh = "legit-owner",
               .svid = 1,
               .offset = 0,
               .length = 1};
  std::vector<double> lock_ms;
  int failures = 0;
  for (uint32_t i = 0; Clock::now() < target.until; ++i) {
    const std::string cookie = std::to_string(i);
    const auto start = Clock::now();
    auto locked = client->Lock(lock, NlmLockFlags{}, cookie);
    lock_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
    if (!locked || locked->stat != NlmStat::kGranted) ++failures;
    auto unlocked = client->Unlock(lock, cookie);
    if (!unlocked || unlocked->stat != NlmStat::kGranted) ++failures;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));  // A client's pace, not a flood.
  }
  std::sort(lock_ms.begin(), lock_ms.end());
  auto at = [&](double q) {
    return lock_ms.empty() ? 0.0 : lock_ms[static_cast<size_t>(q * double(lock_ms.size() - 1))];
  };
  std::printf("legit locks=%zu failures=%d p50_ms=%.2f p99_ms=%.2f max_ms=%.2f\n", lock_ms.size(),
              failures, at(0.5), at(0.99), lock_ms.empty() ? 0.0 : lock_ms.back());
  return 0;
}

// Opens up to `count` connections; with `trickle` > 0, each sends a record mark claiming 1 KiB
// and then one byte of it every `trickle` ms.
int Connections(const Target& target, int count, int trickle_ms) {
  RaiseFileLimit();
  std::vector<int> fds;
  for (int i = 0; i < count; ++i) {
    const int fd = Connect(target);
    if (fd < 0) break;
    if (trickle_ms > 0) {
      const uint8_t mark[4] = {0x80, 0, 0x04, 0};
      (void)send(fd, mark, sizeof mark, MSG_NOSIGNAL);
    }
    fds.push_back(fd);
  }
  std::printf("opened %zu\n", fds.size());
  std::fflush(stdout);
  size_t trickled = 0;
  auto next = Clock::now();
  while (Clock::now() < target.until) {
    if (trickle_ms <= 0) {
      SleepUntil(target.until);
      break;
    }
    next += std::chrono::milliseconds(trickle_ms);
    SleepUntil(std::min(next, target.until));
    for (int fd : fds) {
      const uint8_t byte = 0;
      if (send(fd, &byte, 1, MSG_NOSIGNAL | MSG_DONTWAIT) == 1) ++trickled;
    }
  }
  size_t closed = 0;
  for (int fd : fds) {
    closed += ClosedByServer(fd) ? 1u : 0u;
    close(fd);
  }
  std::printf("connections opened=%zu closed_by_server=%zu trickled=%zu\n", fds.size(), closed,
              trickled);
  return 0;
}

// Pipelines TEST calls with a 1 KiB cookie on `count` connections and reads nothing.
int Unread(const Target& target, int count) {
  NlmLock lock{.caller_name = "hostile", .fh = "file", .oh = "owner", .svid = 1};
  Bytes stream;
  for (uint32_t xid = 1; xid <= 64; ++xid) {
    Bytes call = BuildCall(xid, kNlmProgram, 4, kNlmTest,
                           EncodeTestArgs(4, lock, true, std::string(1024, 'c')));
    Bytes record = RecordOf(call);
    stream.insert(stream.end(), record.begin(), record.end());
  }
  std::vector<int> fds;
  for (int i = 0; i < count; ++i) {
    const int fd = Connect(target);
    if (fd < 0) break;
    SetNonBlocking(fd);
    fds.push_back(fd);
  }
  std::vector<size_t> offset(fds.size(), 0);
  uint64_t sent = 0;
  while (Clock::now() < target.until) {
    std::vector<pollfd> polls;
    for (int fd : fds) polls.push_back({fd, POLLOUT, 0});
    if (poll(polls.data(), polls.size(), 50) <= 0) continue;
    for (size_t i = 0; i < fds.size(); ++i) {
      if (!(polls[i].revents & POLLOUT)) continue;
      const ssize_t n = send(fds[i], stream.data() + offset[i], stream.size() - offset[i],
                             MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n <= 0) continue;
      sent += static_cast<uint64_t>(n);
      offset[i] = (offset[i] + static_cast<size_t>(n)) % stream.size();
    }
  }
  size_t closed = 0;
  for (int fd : fds) {
    closed += ClosedByServer(fd) ? 1u : 0u;
    close(fd);
  }
  std::printf("unread connections=%zu sent_bytes=%llu closed_by_server=%zu\n", fds.size(),
              static_cast<unsigned long long>(sent), closed);
  return 0;
}

// Sends records of `size` bytes (a NULL call, padded) in 1-byte fragments, reconnecting when
// the server closes the connection.
int Fragments(const Target& target, size_t size) {
  Bytes call = BuildCall(1, kNlmProgram, 4, kNlmNull, {});
  call.resize(std::max(size, call.size()), 0);
  Bytes stream;
  stream.reserve(call.size() * 5);
  for (size_t i = 0; i < call.size(); ++i) {
    const uint32_t mark = (i + 1 == call.size() ? 0x80000000u : 0u) | 1u;
    for (int shift = 24; shift >= 0; shift -= 8) stream.push_back(uint8_t(mark >> shift));
    stream.push_back(call[i]);
  }
  uint64_t sent = 0, connections = 0, replies = 0;
  while (Clock::now() < target.until) {
    const int fd = Connect(target);
    if (fd < 0) break;
    ++connections;
    timeval tv{0, 200 * 1000};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    size_t done = 0;
    while (Clock::now() < target.until) {
      const ssize_t n = send(fd, stream.data() + done, stream.size() - done, MSG_NOSIGNAL);
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) continue;
      if (n <= 0) break;
      sent += static_cast<uint64_t>(n);
      done = (done + static_cast<size_t>(n)) % stream.size();
      uint8_t drain[4096];
      while (recv(fd, drain, sizeof drain, MSG_DONTWAIT) > 0) ++replies;
    }
    close(fd);
  }
  std::printf("fragments sent_bytes=%llu connections=%llu reads_with_replies=%llu\n",
              static_cast<unsigned long long>(sent), static_cast<unsigned long long>(connections),
              static_cast<unsigned long long>(replies));
  return 0;
}

// `count` connections, each sending a 1 MiB record but its last byte, then holding it.
int Partial(const Target& target, int count) {
  RaiseFileLimit();
  constexpr uint32_t kRecord = 1 << 20;
  Bytes data(kRecord - 1, 0x55);
  Bytes mark{0x80, uint8_t(kRecord >> 16), uint8_t(kRecord >> 8), uint8_t(kRecord)};
  std::vector<int> fds;
  for (int i = 0; i < count && Clock::now() < target.until; ++i) {
    const int fd = Connect(target);
    if (fd < 0) break;
    timeval tv{1, 0};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    bool ok = send(fd, mark.data(), mark.size(), MSG_NOSIGNAL) == 4;
    size_t done = 0;
    while (ok && done < data.size()) {
      const ssize_t n = send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL);
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
    fds.push_back(fd);
  }
  std::printf("opened %zu\n", fds.size());
  std::fflush(stdout);
  SleepUntil(target.until);
  size_t closed = 0;
  for (int fd : fds) {
    closed += ClosedByServer(fd) ? 1u : 0u;
    close(fd);
  }
  std::printf("partial connections=%zu closed_by_server=%zu\n", fds.size(), closed);
  return 0;
}

// A LOCK_MSG whose arguments stop after the cookie, over UDP; prints every datagram that comes
// back to the sending socket (the reply, and any _RES call) until the time is up.
int TruncatedMsg(const Target& target) {
  NlmLock lock{.caller_name = "hostile", .fh = "file", .oh = "owner", .svid = 1};
  Bytes args = EncodeLockArgs(4, lock, NlmLockFlags{}, "cookie");
  args.resize(12);  // The cookie, then nothing.
  UdpSocket socket;
  if (!target.source.empty()) socket.Bind(Ipv4(target.source, 0));
  if (!socket.SendTo(target.address, BuildCall(77, kNlmProgram, 4, kNlmLockMsg, args))) {
    std::printf("truncated_msg send_failed\n");
    return 0;
  }
  int replies = 0, calls = 0;
  while (Clock::now() < target.until) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(target.until - Clock::now());
    auto datagram = socket.Receive(left);
    if (!datagram) break;
    auto message = ParseMessage(*datagram);
    if (!message) continue;
    if (message->is_call) {
      ++calls;
      std::printf("call procedure=%u\n", message->procedure);
    } else {
      ++replies;
      std::printf("reply xid=%u accept_stat=%u\n", message->xid, message->accept_stat);
    }
  }
  std::printf("truncated_msg replies=%d calls=%d\n", replies, calls);
  return 0;
}

int Usage() {
  std::fprintf(stderr, "usage: hostile_client --server ADDR --port N --seconds S MODE ...\n");
  return 1;
}

int Main(int argc, char** argv) {
  std::string server;
  int port = 0;
  double seconds = 0;
  std::string source;
  int i = 1;
  for (; i + 1 < argc && std::strncmp(argv[i], "--", 2) == 0; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--server")
      server = argv[i + 1];
    else if (flag == "--port")
      port = std::atoi(argv[i + 1]);
    else if (flag == "--seconds")
      seconds = std::atof(argv[i + 1]);
    else if (flag == "--source")
      source = argv[i + 1];
    else
      return Usage();
  }
  if (server.empty() || port <= 0 || i >= argc) return Usage();
  Target target;
  target.address = Ipv4(server, static_cast<uint16_t>(port));
  target.source = source;
  target.until = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                    std::chrono::duration<double>(seconds));
  const std::string mode = argv[i];
  auto number = [&](int at) { return at < argc ? std::atoi(argv[at]) : 0; };
  if (mode == "legit") return Legit(target);
  if (mode == "connections") return Connections(target, number(i + 1), 0);
  if (mode == "trickle") return Connections(target, number(i + 1), number(i + 2));
  if (mode == "unread") return Unread(target, number(i + 1));
  if (mode == "fragments") return Fragments(target, static_cast<size_t>(number(i + 1)));
  if (mode == "partial") return Partial(target, number(i + 1));
  if (mode == "truncated_msg") return TruncatedMsg(target);
  return Usage();
}

}  // namespace
}  // namespace nlockd::integration

int main(int argc, char** argv) { return nlockd::integration::Main(argc, argv); }
