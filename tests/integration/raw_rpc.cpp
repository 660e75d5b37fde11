// SPDX-License-Identifier: Apache-2.0
#include "integration/raw_rpc.hpp"

#include <arpa/inet.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace nlockd::integration {

namespace {

class Reader {
 public:
  explicit Reader(std::span<const uint8_t> bytes) : bytes_(bytes) {}
  bool U32(uint32_t& out) {
    if (bytes_.size() - at_ < 4) return false;
    out = (uint32_t{bytes_[at_]} << 24) | (uint32_t{bytes_[at_ + 1]} << 16) |
          (uint32_t{bytes_[at_ + 2]} << 8) | uint32_t{bytes_[at_ + 3]};
    at_ += 4;
    return true;
  }
  bool SkipOpaque() {
    uint32_t length = 0;
    if (!U32(length)) return false;
    size_t padded = (size_t{length} + 3) & ~size_t{3};
    if (bytes_.size() - at_ < padded) return false;
    at_ += padded;
    return true;
  }
  std::vector<uint8_t> Rest() const {
    return std::vector<uint8_t>(bytes_.begin() + static_cast<std::ptrdiff_t>(at_), bytes_.end());
  }

 private:
  std::span<const uint8_t> bytes_;
  size_t at_ = 0;
};

int MillisUntil(std::chrono::steady_clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  return left.count() < 0 ? 0 : static_cast<int>(left.count());
}

}  // namespace

XdrWriter& XdrWriter::U32(uint32_t value) {
  for (int shift = 24; shift >= 0; shift -= 8) {
    bytes_.push_back(static_cast<uint8_t>(value >> shift));
  }
  return *this;
}

XdrWriter& XdrWriter::U64(uint64_t value) {
  U32(static_cast<uint32_t>(value >> 32));
  return U32(static_cast<uint32_t>(value));
}

XdrWriter& XdrWriter::Opaque(std::string_view bytes) {
  U32(static_cast<uint32_t>(bytes.size()));
  bytes_.insert(bytes_.end(), bytes.begin(), bytes.end());
  while (bytes_.size() % 4 != 0) bytes_.push_back(0);
  return *this;
}

XdrWriter& XdrWriter::LyingOpaque(uint32_t claimed, std::string_view bytes) {
  U32(claimed);
  bytes_.insert(bytes_.end(), bytes.begin(), bytes.end());
  return *this;
}

XdrWriter& XdrWriter::Raw(std::span<const uint8_t> bytes) {
  bytes_.insert(bytes_.end(), bytes.begin(), bytes.end());
  return *this;
}

std::vector<uint8_t> BuildCall(uint32_t xid, uint32_t program, uint32_t version, uint32_t procedure,
                               std::span<const uint8_t> args, uint32_t rpc_version) {
  XdrWriter w;
  w.U32(xid).U32(0).U32(rpc_version).U32(program).U32(version).U32(procedure);
  w.U32(0).U32(0);  // AUTH_NONE credential.
  w.U32(0).U32(0);  // AUTH_NONE verifier.
  w.Raw(args);
  return w.bytes();
}

std::vector<uint8_t> BuildSuccessReply(uint32_t xid, std::span<const uint8_t> result) {
  XdrWriter w;
  w.U32(xid).U32(1).U32(0);  // REPLY, MSG_ACCEPTED.
  w.U32(0).U32(0);           // AUTH_NONE verifier.
  w.U32(0);                  // SUCCESS.
  w.Raw(result);
  return w.bytes();
}

std::optional<RpcMessage> ParseMessage(std::span<const uint8_t> bytes) {
  Reader r(bytes);
  RpcMessage m;
  uint32_t type = 0;
  if (!r.U32(m.xid) || !r.U32(type)) return std::nullopt;
  if (type == 0) {
    uint32_t rpc_version = 0;
    m.is_call = true;
    if (!r.U32(rpc_version) || !r.U32(m.program) || !r.U32(m.version) || !r.U32(m.procedure)) {
      return std::nullopt;
    }
    uint32_t flavor = 0;
    if (!r.U32(flavor) || !r.SkipOpaque() || !r.U32(flavor) || !r.SkipOpaque()) {
      return std::nullopt;
    }
    m.body = r.Rest();
    return m;
  }
  if (type != 1 || !r.U32(m.reply_stat)) return std::nullopt;
  if (m.reply_stat == 1) {  // MSG_DENIED
    if (!r.U32(m.reject_stat)) return std::nullopt;
    if (m.reject_stat == 0 && (!r.U32(m.low) || !r.U32(m.high))) return std::nullopt;
    return m;
  }
  uint32_t flavor = 0;
  if (!r.U32(flavor) || !r.SkipOpaque() || !r.U32(m.accept_stat)) return std::nullopt;
  if (m.accept_stat == kProgMismatch && (!r.U32(m.low) || !r.U32(m.high))) return std::nullopt;
  if (m.accept_stat == kSuccess) m.body = r.Rest();
  return m;
}

sockaddr_in Ipv4(const std::string& address, uint16_t port) {
  sockaddr_in out{};
  out.sin_family = AF_INET;
  out.sin_port = htons(port);
  inet_pton(AF_INET, address.c_str(), &out.sin_addr);
  return out;
}

UdpSocket::UdpSocket() : fd_(socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)) {}

UdpSocket::~UdpSocket() {
  if (fd_ >= 0) close(fd_);
}

bool UdpSocket::Bind(const sockaddr_in& local) {
  return bind(fd_, reinterpret_cast<const sockaddr*>(&local), sizeof local) == 0;
}

bool UdpSocket::SendTo(const sockaddr_in& to, std::span<const uint8_t> bytes) {
  ssize_t sent =
      sendto(fd_, bytes.data(), bytes.size(), 0, reinterpret_cast<const sockaddr*>(&to), sizeof to);
  return sent == static_cast<ssize_t>(bytes.size());
}

std::optional<std::vector<uint8_t>> UdpSocket::Receive(std::chrono::milliseconds timeout,
                                                       sockaddr_in* from) {
  pollfd pfd{fd_, POLLIN, 0};
  if (poll(&pfd, 1, static_cast<int>(timeout.count())) <= 0) return std::nullopt;
  std::vector<uint8_t> buffer(65536);
  sockaddr_in source{};
  socklen_t length = sizeof source;
  ssize_t n =
      recvfrom(fd_, buffer.data(), buffer.size(), 0, reinterpret_cast<sockaddr*>(&source), &length);
  if (n < 0) return std::nullopt;
  buffer.resize(static_cast<size_t>(n));
  if (from != nullptr) *from = source;
  return buffer;
}

std::optional<RpcMessage> UdpSocket::Call(const sockaddr_in& to, std::span<const uint8_t> call,
                                          std::chrono::milliseconds timeout) {
  auto sent = ParseMessage(call);
  if (!sent || !SendTo(to, call)) return std::nullopt;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    auto datagram = Receive(std::chrono::milliseconds(MillisUntil(deadline)));
    if (!datagram) return std::nullopt;
    auto message = ParseMessage(*datagram);
    if (message && !message->is_call && message->xid == sent->xid) return message;
  }
}

TcpConnection::TcpConnection(const sockaddr_in& to)
    : fd_(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
  if (fd_ >= 0 && connect(fd_, reinterpret_cast<const sockaddr*>(&to), sizeof to) != 0) {
    close(fd_);
    fd_ = -1;
  }
}

TcpConnection::~TcpConnection() {
  if (fd_ >= 0) close(fd_);
}

bool TcpConnection::SendBytes(std::span<const uint8_t> bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = send(fd_, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

bool TcpConnection::SendRecord(std::span<const uint8_t> message) {
  XdrWriter w;
  w.U32(0x80000000u | static_cast<uint32_t>(message.size())).Raw(message);
  return SendBytes(w.bytes());
}

bool TcpConnection::ReadExactly(uint8_t* out, size_t size,
                                std::chrono::steady_clock::time_point deadline) {
  size_t done = 0;
  while (done < size) {
    pollfd pfd{fd_, POLLIN, 0};
    if (poll(&pfd, 1, MillisUntil(deadline)) <= 0) return false;
    ssize_t n = recv(fd_, out + done, size - done, 0);
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

std::optional<std::vector<uint8_t>> TcpConnection::ReceiveRecord(
    std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  std::vector<uint8_t> record;
  for (;;) {
    uint8_t mark[4];
    if (!ReadExactly(mark, 4, deadline)) return std::nullopt;
    uint32_t header = (uint32_t{mark[0]} << 24) | (uint32_t{mark[1]} << 16) |
                      (uint32_t{mark[2]} << 8) | uint32_t{mark[3]};
    size_t length = header & 0x7fffffffu;
    if (record.size() + length > (1u << 20)) return std::nullopt;
    size_t at = record.size();
    record.resize(at + length);
    if (!ReadExactly(record.data() + at, length, deadline)) return std::nullopt;
    if (header & 0x80000000u) return record;
  }
}

std::optional<RpcMessage> TcpConnection::Call(std::span<const uint8_t> call,
                                              std::chrono::milliseconds timeout) {
  if (!SendRecord(call)) return std::nullopt;
  auto record = ReceiveRecord(timeout);
  if (!record) return std::nullopt;
  return ParseMessage(*record);
}

}  // namespace nlockd::integration
