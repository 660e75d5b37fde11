// SPDX-License-Identifier: Apache-2.0
#include "integration/loopback_peers.hpp"

#include <stdexcept>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "integration/raw_rpc.hpp"
#include "testutil/udp_pktinfo.hpp"

namespace nlockd::integration {
namespace {

constexpr uint32_t kSmProg = 100024;
constexpr uint32_t kSmNotify = 6;
constexpr auto kCallTimeout = std::chrono::seconds(5);

// The reader of what an SM_NOTIFY call carries: the RPC call header, then stat_chge.
class Words {
 public:
  explicit Words(std::span<const uint8_t> bytes) : bytes_(bytes) {}
  std::optional<uint32_t> U32() {
    if (bytes_.size() - at_ < 4) return std::nullopt;
    uint32_t v = static_cast<uint32_t>(bytes_[at_]) << 24 |
                 static_cast<uint32_t>(bytes_[at_ + 1]) << 16 |
                 static_cast<uint32_t>(bytes_[at_ + 2]) << 8 | bytes_[at_ + 3];
    at_ += 4;
    return v;
  }
  std::optional<std::string> String() {
    auto length = U32();
    if (!length || *length > 1024 || (*length + 3) / 4 * 4 > bytes_.size() - at_) {
      return std::nullopt;
    }
    std::string s(reinterpret_cast<const char*>(bytes_.data() + at_), *length);
    at_ += (*length + 3) / 4 * 4;
    return s;
  }

 private:
  std::span<const uint8_t> bytes_;
  size_t at_ = 0;
};

std::optional<RpcMessage> CallNlm(const std::string& from, uint16_t port, uint32_t procedure,
                                  const std::vector<uint8_t>& args) {
  static std::atomic<uint32_t> xid = 0x5eed0000;
  UdpSocket socket;
  if (!socket.Bind(Ipv4(from, 0))) return std::nullopt;
  return socket.Call(Ipv4("127.0.0.1", port), BuildCall(++xid, kNlmProgram, 4, procedure, args),
                     kCallTimeout);
}

std::optional<NlmStat> StatusOf(const std::optional<RpcMessage>& reply) {
  if (!reply || reply->reply_stat != 0 || reply->accept_stat != kSuccess) return std::nullopt;
  auto res = DecodeRes(4, reply->body);
  if (!res) return std::nullopt;
  return res->stat;
}

}  // namespace

LoopbackPeers::LoopbackPeers() {
  fd_ = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_in any = Ipv4("0.0.0.0", 0);
  int on = 1;
  if (fd_ < 0 || ::setsockopt(fd_, IPPROTO_IP, IP_PKTINFO, &on, sizeof on) != 0 ||
      ::bind(fd_, reinterpret_cast<sockaddr*>(&any), sizeof any) != 0) {
    if (fd_ >= 0) ::close(fd_);
    throw std::runtime_error("LoopbackPeers: cannot bind the status monitors' socket");
  }
  socklen_t length = sizeof any;
  ::getsockname(fd_, reinterpret_cast<sockaddr*>(&any), &length);
  port_ = ntohs(any.sin_port);
  thread_ = std::thread([this] { Run(); });
}

LoopbackPeers::~LoopbackPeers() {
  stop_ = true;
  thread_.join();
  ::close(fd_);
}

std::string LoopbackPeers::Address(size_t host) {
  return "127.0." + std::to_string(1 + host / 250) + "." + std::to_string(1 + host % 250);
}

void LoopbackPeers::Silence(const std::string& address) {
  std::lock_guard lock(mutex_);
  silent_.insert(address);
}

std::optional<std::map<std::string, LoopbackPeers::Notification>> LoopbackPeers::WaitNotified(
    const std::vector<std::string>& hosts, int32_t above, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  auto all_in = [&] {
    for (const std::string& host : hosts) {
      auto it = notified_.find(host);
      if (it == notified_.end() || it->second.state <= above) return false;
    }
    return true;
  };
  if (!changed_.wait_for(lock, timeout, all_in)) return std::nullopt;
  std::map<std::string, Notification> out;
  for (const std::string& host : hosts) out[host] = notified_[host];
  return out;
}

size_t LoopbackPeers::Attempts(const std::string& address) {
  std::lock_guard lock(mutex_);
  auto it = attempts_.find(address);
  return it == attempts_.end() ? 0 : it->second;
}

bool LoopbackPeers::WaitAttempts(const std::string& address, size_t count,
                                 std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  return changed_.wait_for(lock, timeout, [&] { return attempts_[address] >= count; });
}

void LoopbackPeers::Run() {
  pollfd pfd{fd_, POLLIN, 0};
  while (!stop_) {
    if (::poll(&pfd, 1, 50) > 0) Serve();
  }
}

void LoopbackPeers::Serve() {
  std::vector<uint8_t> buffer(9000);
  auto datagram = testutil::ReceiveAddressed(fd_, buffer);
  if (!datagram) return;
  buffer.resize(datagram->size);
  const sockaddr_in& from = datagram->from;
  const in_addr destination = datagram->destination;
  char text[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &destination, text, sizeof text);
  const std::string host = text;

  auto call = ParseMessage(buffer);
  if (!call || !call->is_call || call->program != kSmProg || call->version != 1) return;
  if (call->procedure == kSmNotify) {
    Words args(call->body);
    auto mon_name = args.String();
    auto state = args.U32();
    if (!mon_name || !state) return;
    std::lock_guard lock(mutex_);
    ++attempts_[host];
    changed_.notify_all();
    if (silent_.contains(host)) return;
    notified_[host] = Notification{*mon_name, static_cast<int32_t>(*state)};
  } else if (call->procedure != 0) {
    return;
  }
  // SM_NOTIFY's result is void; answer from the address the call was sent to.
  std::vector<uint8_t> reply = BuildSuccessReply(call->xid);
  testutil::SendFrom(fd_, from, destination, reply);
}

std::optional<NlmStat> LoopbackPeers::Lock(const std::string& address, uint16_t port,
                                           const NlmLock& lock, NlmLockFlags flags) {
  return StatusOf(CallNlm(address, port, kNlmLock, EncodeLockArgs(4, lock, flags, "lock")));
}

std::optional<NlmStat> LoopbackPeers::Unlock(const std::string& address, uint16_t port,
                                             const NlmLock& lock) {
  return StatusOf(CallNlm(address, port, kNlmUnlock, EncodeUnlockArgs(4, lock, "unlock")));
}

std::string StatOf(const std::optional<NlmStat>& stat) {
  return stat ? "stat=" + std::string(ToString(*stat)) : "no reply";
}

}  // namespace nlockd::integration
