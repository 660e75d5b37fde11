// SPDX-License-Identifier: Apache-2.0
#pragma once

// ONC RPC messages as bytes (RFC 5531), for what no polite client sends: retransmissions with
// a chosen xid, _MSG calls whose _RES comes back to the same socket, truncated and oversized
// arguments. Argument bodies come from rpcgen's routines (nlm_rpcgen.hpp) or from XdrWriter.

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <netinet/in.h>

namespace nlockd::integration {

// Big-endian XDR items, with lengths that may lie about what follows.
class XdrWriter {
 public:
  XdrWriter& U32(uint32_t value);
  XdrWriter& U64(uint64_t value);
  // A length word, then the bytes, padded to 4.
  XdrWriter& Opaque(std::string_view bytes);
  // A length word that claims `claimed` bytes, followed by only `bytes` (unpadded).
  XdrWriter& LyingOpaque(uint32_t claimed, std::string_view bytes);
  XdrWriter& Raw(std::span<const uint8_t> bytes);
  const std::vector<uint8_t>& bytes() const { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

// A call: xid, CALL, rpcvers, prog, vers, proc, AUTH_NONE credential and verifier, arguments.
std::vector<uint8_t> BuildCall(uint32_t xid, uint32_t program, uint32_t version, uint32_t procedure,
                               std::span<const uint8_t> args, uint32_t rpc_version = 2);
// An accepted SUCCESS reply with `result`.
std::vector<uint8_t> BuildSuccessReply(uint32_t xid, std::span<const uint8_t> result = {});

// A decoded message: a call (the header and its arguments) or a reply.
struct RpcMessage {
  uint32_t xid = 0;
  bool is_call = false;
  // Call.
  uint32_t program = 0;
  uint32_t version = 0;
  uint32_t procedure = 0;
  // Reply: reply_stat 0 accepted / 1 denied; accept_stat (0 SUCCESS, 1 PROG_UNAVAIL,
  // 2 PROG_MISMATCH, 3 PROC_UNAVAIL, 4 GARBAGE_ARGS, 5 SYSTEM_ERR); reject_stat (0
  // RPC_MISMATCH, 1 AUTH_ERROR); for the mismatches, the range.
  uint32_t reply_stat = 0;
  uint32_t accept_stat = 0;
  uint32_t reject_stat = 0;
  uint32_t low = 0;
  uint32_t high = 0;
  std::vector<uint8_t> body;  // Call arguments, or a SUCCESS reply's result.
};

enum AcceptStat : uint32_t {
  kSuccess = 0,
  kProgUnavail = 1,
  kProgMismatch = 2,
  kProcUnavail = 3,
  kGarbageArgs = 4,
  kSystemErr = 5,
};

std::optional<RpcMessage> ParseMessage(std::span<const uint8_t> bytes);

sockaddr_in Ipv4(const std::string& address, uint16_t port);

// A UDP socket of the test's own, bound to an ephemeral port.
class UdpSocket {
 public:
  UdpSocket();
  ~UdpSocket();
  UdpSocket(const UdpSocket&) = delete;
  UdpSocket& operator=(const UdpSocket&) = delete;

  // Binds to `local` (before the first send); false if it is taken.
  bool Bind(const sockaddr_in& local);
  bool SendTo(const sockaddr_in& to, std::span<const uint8_t> bytes);
  // The next datagram (and its source), or nullopt when none came in time.
  std::optional<std::vector<uint8_t>> Receive(std::chrono::milliseconds timeout,
                                              sockaddr_in* from = nullptr);
  // Sends a call and waits for the reply with its xid, dropping other datagrams.
  std::optional<RpcMessage> Call(const sockaddr_in& to, std::span<const uint8_t> call,
                                 std::chrono::milliseconds timeout);

 private:
  int fd_ = -1;
};

// One TCP connection speaking record marking.
class TcpConnection {
 public:
  explicit TcpConnection(const sockaddr_in& to);
  ~TcpConnection();
  TcpConnection(const TcpConnection&) = delete;
  TcpConnection& operator=(const TcpConnection&) = delete;

  bool connected() const { return fd_ >= 0; }
  // Sends `message` as one record (one last fragment).
  bool SendRecord(std::span<const uint8_t> message);
  bool SendBytes(std::span<const uint8_t> bytes);
  // Reads one whole record; nullopt on timeout or when the server closes.
  std::optional<std::vector<uint8_t>> ReceiveRecord(std::chrono::milliseconds timeout);
  std::optional<RpcMessage> Call(std::span<const uint8_t> call, std::chrono::milliseconds timeout);

 private:
  bool ReadExactly(uint8_t* out, size_t size, std::chrono::steady_clock::time_point deadline);
  int fd_ = -1;
};

}  // namespace nlockd::integration
