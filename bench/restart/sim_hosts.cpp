// SPDX-License-Identifier: Apache-2.0
#include "bench/restart/sim_hosts.hpp"

#include <cstdio>
#include <stdexcept>
#include <thread>

#include <arpa/inet.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "nlm/wire.hpp"
#include "tests/testutil/udp_pktinfo.hpp"
#include "xdr/decoder.hpp"
#include "xdr/encoder.hpp"

namespace nlockd::bench {
namespace {

constexpr uint32_t kSmProg = 100024;
constexpr uint32_t kSmNotify = 6;
constexpr auto kRetransmit = std::chrono::milliseconds(250);

int BoundUdpSocket(const sockaddr_in& address) {
  int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  int buffer = 4 << 20;
  ::setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &buffer, sizeof buffer);
  if (fd < 0 || ::bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
    std::perror("bind");
    if (fd >= 0) ::close(fd);
    throw std::runtime_error("cannot bind a UDP socket");
  }
  return fd;
}

// The xid and, for an accepted SUCCESS reply, the decoder positioned at its result.
bool ParseReplyHeader(xdr::Decoder& dec, uint32_t& xid) {
  uint32_t type = 0, reply_stat = 0, flavor = 0, accept_stat = 0;
  std::string verifier;
  return dec.U32(xid, "xid") && dec.U32(type, "type") && type == 1 &&
         dec.U32(reply_stat, "reply_stat") && reply_stat == 0 && dec.U32(flavor, "flavor") &&
         dec.Opaque(verifier, 400, "verifier") && dec.U32(accept_stat, "accept_stat") &&
         accept_stat == 0;
}

}  // namespace

sockaddr_in Ipv4(const std::string& address, uint16_t port) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  ::inet_pton(AF_INET, address.c_str(), &sa.sin_addr);
  return sa;
}

std::string HostAddress(size_t host) {
  return "127." + std::to_string(10 + host / 62500) + "." + std::to_string(1 + (host / 250) % 250) +
         "." + std::to_string(1 + host % 250);
}

NlmHost::NlmHost(const std::string& address, sockaddr_in server)
    : fd_(BoundUdpSocket(Ipv4(address, 0))),
      server_(server),
      caller_("h" + address),
      next_xid_(static_cast<uint32_t>(std::hash<std::string>{}(address))) {}

NlmHost::~NlmHost() { ::close(fd_); }

std::vector<uint8_t> NlmHost::Call(uint32_t xid, uint32_t procedure, const Lock& lock, bool reclaim,
                                   int32_t state) const {
  std::vector<uint8_t> bytes;
  xdr::Encoder enc(bytes);
  for (uint32_t word : {xid, 0u, 2u, nlm::NLM_PROG, nlm::NLM4_VERS, procedure, 0u, 0u, 0u, 0u}) {
    enc.U32(word);
  }
  nlm::nlm4_lock alock{caller_, lock.fh, "1@" + caller_, 1, lock.offset, lock.length};
  const std::string cookie(reinterpret_cast<const char*>(&xid), sizeof xid);
  if (procedure == nlm::NLM_UNLOCK) {
    nlm::Encode(enc, nlm::NLM4_VERS, nlm::nlm4_unlockargs{cookie, std::move(alock)});
  } else {
    nlm::Encode(enc, nlm::NLM4_VERS,
                nlm::nlm4_lockargs{cookie, false, true, std::move(alock), reclaim, state});
  }
  return bytes;
}

std::optional<std::pair<uint32_t, int32_t>> NlmHost::Receive(int wait_ms) {
  pollfd pfd{fd_, POLLIN, 0};
  if (::poll(&pfd, 1, wait_ms) <= 0) return std::nullopt;
  uint8_t buffer[2048];
  ssize_t n = ::recv(fd_, buffer, sizeof buffer, MSG_DONTWAIT);
  if (n <= 0) return std::nullopt;  // ECONNREFUSED while nlockd is not up yet, among others.
  xdr::Decoder dec(std::span<const uint8_t>(buffer, static_cast<size_t>(n)));
  uint32_t xid = 0;
  nlm::nlm4_res res;
  if (!ParseReplyHeader(dec, xid) || !nlm::Decode(dec, nlm::NLM4_VERS, res)) {
    return std::pair<uint32_t, int32_t>{xid, -2};
  }
  return std::pair<uint32_t, int32_t>{xid, static_cast<int32_t>(res.stat)};
}

std::vector<int32_t> NlmHost::LockAll(const std::vector<Lock>& locks, bool reclaim, int32_t state,
                                      std::chrono::milliseconds timeout) {
  std::vector<int32_t> stats(locks.size(), -1);
  std::unordered_map<uint32_t, size_t> pending;  // xid -> lock
  std::vector<std::vector<uint8_t>> calls;
  for (size_t i = 0; i < locks.size(); ++i) {
    const uint32_t xid = next_xid_++;
    calls.push_back(Call(xid, nlm::NLM_LOCK, locks[i], reclaim, state));
    pending.emplace(xid, i);
  }
  const auto deadline = Clock::now() + timeout;
  while (!pending.empty() && Clock::now() < deadline) {
    // (Re)send what is unanswered; the server's duplicate request cache absorbs repeats.
    for (const auto& [xid, i] : pending) {
      ::sendto(fd_, calls[i].data(), calls[i].size(), 0,
               reinterpret_cast<const sockaddr*>(&server_), sizeof server_);
    }
    const auto resend_at = std::min(deadline, Clock::now() + kRetransmit);
    while (!pending.empty() && Clock::now() < resend_at) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(resend_at - Clock::now());
      auto reply = Receive(static_cast<int>(std::max<int64_t>(1, left.count())));
      if (!reply) continue;
      auto it = pending.find(reply->first);
      if (it == pending.end()) continue;
      stats[it->second] = reply->second;
      pending.erase(it);
    }
  }
  return stats;
}

bool NlmHost::Unlock(const Lock& lock, std::chrono::milliseconds timeout) {
  const uint32_t xid = next_xid_++;
  const std::vector<uint8_t> call = Call(xid, nlm::NLM_UNLOCK, lock, false, 0);
  const auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    ::sendto(fd_, call.data(), call.size(), 0, reinterpret_cast<const sockaddr*>(&server_),
             sizeof server_);
    auto reply = Receive(static_cast<int>(kRetransmit.count()));
    if (reply && reply->first == xid) return reply->second == nlm::NLM4_GRANTED;
  }
  return false;
}

std::optional<int32_t> NlmHost::TryLock(const Lock& lock, std::chrono::milliseconds wait,
                                        std::chrono::milliseconds resend) {
  const uint32_t xid = next_xid_++;
  const std::vector<uint8_t> call = Call(xid, nlm::NLM_LOCK, lock, false, 1);
  const auto deadline = Clock::now() + wait;
  while (Clock::now() < deadline) {
    ::sendto(fd_, call.data(), call.size(), 0, reinterpret_cast<const sockaddr*>(&server_),
             sizeof server_);
    const auto resend_at = std::min(deadline, Clock::now() + resend);
    while (Clock::now() < resend_at) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(resend_at - Clock::now());
      auto reply = Receive(static_cast<int>(std::max<int64_t>(1, left.count())));
      if (reply && reply->first == xid) return reply->second;
    }
  }
  return std::nullopt;
}

std::vector<NlmHost::Lock> LocksOf(size_t host, size_t locks) {
  std::vector<NlmHost::Lock> out;
  for (size_t i = 0; i < locks; ++i) {
    out.push_back({"bench-" + std::to_string(host) + "-" + std::to_string(i), 0, 4096});
  }
  return out;
}

Clock::time_point FirstGrant(NlmHost& prober, const std::string& fh, Clock::time_point give_up) {
  while (Clock::now() < give_up) {
    auto stat = prober.TryLock({fh, 0, 1}, std::chrono::seconds(1), std::chrono::milliseconds(10));
    if (stat && *stat == 0) return Clock::now();
    if (stat) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  throw std::runtime_error("no new lock was granted on " + fh);
}

StatusMonitors::StatusMonitors(uint16_t port, size_t hosts, OnNotify on_notify)
    : fd_(BoundUdpSocket(Ipv4("0.0.0.0", port))), on_notify_(std::move(on_notify)) {
  int on = 1;
  ::setsockopt(fd_, IPPROTO_IP, IP_PKTINFO, &on, sizeof on);
  for (size_t host = 0; host < hosts; ++host) {
    host_of_.emplace(Ipv4(HostAddress(host), 0).sin_addr.s_addr, host);
  }
  thread_ = std::thread([this] { Run(); });
}

StatusMonitors::~StatusMonitors() {
  stop_ = true;
  thread_.join();
  ::close(fd_);
}

Clock::time_point StatusMonitors::last_notification() const {
  return Clock::time_point(Clock::duration(last_ns_.load()));
}

void StatusMonitors::Run() {
  pollfd pfd{fd_, POLLIN, 0};
  while (!stop_) {
    if (::poll(&pfd, 1, 50) > 0) Serve();
  }
}

void StatusMonitors::Serve() {
  uint8_t buffer[4096];
  auto datagram = testutil::ReceiveAddressed(fd_, buffer);
  if (!datagram) return;
  const size_t n = datagram->size;
  const sockaddr_in& from = datagram->from;
  const in_addr destination = datagram->destination;
  xdr::Decoder dec(std::span<const uint8_t>(buffer, n));
  uint32_t xid = 0, type = 0, rpcvers = 0, prog = 0, vers = 0, proc = 0, flavor = 0;
  std::string credential, verifier, mon_name;
  int32_t state = 0;
  if (!dec.U32(xid, "xid") || !dec.U32(type, "type") || type != 0 || !dec.U32(rpcvers, "rpcvers") ||
      !dec.U32(prog, "prog") || prog != kSmProg || !dec.U32(vers, "vers") ||
      !dec.U32(proc, "proc") || !dec.U32(flavor, "cred") || !dec.Opaque(credential, 400, "cred") ||
      !dec.U32(flavor, "verf") || !dec.Opaque(verifier, 400, "verf")) {
    return;
  }
  const bool notify =
      proc == kSmNotify && dec.String(mon_name, 1024, "mon_name") && dec.I32(state, "state");
  if (proc != 0 && !notify) return;
  std::vector<uint8_t> reply;
  xdr::Encoder enc(reply);
  for (uint32_t word : {xid, 1u, 0u, 0u, 0u, 0u}) enc.U32(word);  // accepted, SUCCESS, void
  testutil::SendFrom(fd_, from, destination, reply);
  if (!notify) return;
  ++notifications_;
  last_ns_ = Clock::now().time_since_epoch().count();
  auto host = host_of_.find(destination.s_addr);
  if (host != host_of_.end()) on_notify_(host->second, state);
}

void HostQueue::Push(size_t host) {
  {
    std::lock_guard lock(mutex_);
    hosts_.push_back(host);
  }
  ready_.notify_one();
}

std::optional<size_t> HostQueue::Pop() {
  std::unique_lock lock(mutex_);
  ready_.wait(lock, [&] { return closed_ || !hosts_.empty(); });
  if (hosts_.empty()) return std::nullopt;
  size_t host = hosts_.front();
  hosts_.pop_front();
  return host;
}

void HostQueue::Close() {
  {
    std::lock_guard lock(mutex_);
    closed_ = true;
  }
  ready_.notify_all();
}

LockWorkers::LockWorkers(const std::vector<std::unique_ptr<NlmHost>>& hosts, size_t locks,
                         size_t threads)
    : hosts_(hosts), locks_(locks) {
  for (size_t t = 0; t < threads; ++t) {
    threads_.emplace_back([this] {
      while (auto h = queue_.Pop()) {
        const int32_t state = reclaim_state_.load();
        for (int32_t stat : hosts_[*h]->LockAll(LocksOf(*h, locks_), state != 0,
                                                state != 0 ? state : 1, std::chrono::seconds(30))) {
          ++(stat == 0 ? granted_ : failed_);
        }
        last_answered_ns_ = Clock::now().time_since_epoch().count();
      }
    });
  }
}

void LockWorkers::LockAll() {
  for (size_t h = 0; h < hosts_.size(); ++h) queue_.Push(h);
}

void LockWorkers::Reclaim(size_t host, int32_t state) {
  reclaim_state_ = state;
  queue_.Push(host);
}

bool LockWorkers::WaitAllAnswered(std::optional<Clock::time_point> until) const {
  while (granted_ + failed_ < hosts_.size() * locks_) {
    if (until && Clock::now() >= *until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

void LockWorkers::ResetCounts() {
  granted_ = 0;
  failed_ = 0;
  last_answered_ns_ = 0;
}

std::optional<Clock::time_point> LockWorkers::last_answered() const {
  const int64_t ns = last_answered_ns_.load();
  if (ns == 0) return std::nullopt;
  return Clock::time_point(Clock::duration(ns));
}

void LockWorkers::Close() {
  queue_.Close();
  for (std::thread& thread : threads_) {
    if (thread.joinable()) thread.join();
  }
}

}  // namespace nlockd::bench
