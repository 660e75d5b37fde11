// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "xdr/decoder.hpp"
#include "xdr/encoder.hpp"

// ONC RPC version 2 messages (RFC 5531 §9) and the AUTH_NONE / AUTH_SYS credentials (§10, §14).
namespace nlockd::rpc {

inline constexpr uint32_t kRpcVersion = 2;

enum class MsgType : uint32_t { kCall = 0, kReply = 1 };
enum class ReplyStat : uint32_t { kMsgAccepted = 0, kMsgDenied = 1 };
enum class AcceptStat : uint32_t {
  kSuccess = 0,
  kProgUnavail = 1,
  kProgMismatch = 2,
  kProcUnavail = 3,
  kGarbageArgs = 4,
  kSystemErr = 5,
};
enum class RejectStat : uint32_t { kRpcMismatch = 0, kAuthError = 1 };
enum class AuthStat : uint32_t {
  kOk = 0,
  kBadCred = 1,
  kRejectedCred = 2,
  kBadVerf = 3,
  kRejectedVerf = 4,
  kTooWeak = 5,
};
enum class AuthFlavor : uint32_t { kNone = 0, kSys = 1 };

// Limits from RFC 5531: an opaque_auth body is at most 400 bytes; AUTH_SYS's machine name at
// most 255 bytes and 16 groups. They stop a caller from making us hold large credentials.
inline constexpr uint32_t kMaxAuthBytes = 400;
inline constexpr uint32_t kMaxMachineName = 255;
inline constexpr uint32_t kMaxAuthSysGids = 16;

struct OpaqueAuth {
  uint32_t flavor = 0;
  std::span<const uint8_t> body;  // Points into the message being decoded.
};

// AUTH_SYS credentials (RFC 5531 Appendix A). Not authentication: never use them as identity.
struct AuthSys {
  uint32_t stamp = 0;
  std::string machine_name;
  uint32_t uid = 0;
  uint32_t gid = 0;
  std::vector<uint32_t> gids;
};

struct CallHeader {
  uint32_t xid = 0;
  uint32_t rpc_version = 0;
  uint32_t program = 0;
  uint32_t version = 0;
  uint32_t procedure = 0;
  OpaqueAuth cred;
  OpaqueAuth verf;
};

// The outcome of reading a message that claims to be a call.
enum class CallDecodeStatus {
  kOk,           // Header read; the arguments follow.
  kNotACall,     // A reply or an unknown message type: ignore it.
  kMalformed,    // The header itself does not decode: nothing sensible to answer.
  kRpcMismatch,  // rpcvers != 2: answer MSG_DENIED/RPC_MISMATCH.
};

struct DecodedCall {
  CallDecodeStatus status = CallDecodeStatus::kMalformed;
  CallHeader header;
  std::span<const uint8_t> args;  // The bytes after the header.
};

// Reads the call header of one RPC message. REQUIRES: `message` outlives the result.
DecodedCall DecodeCall(std::span<const uint8_t> message);

// Parses AUTH_SYS credentials; nullopt when the body is malformed.
std::optional<AuthSys> DecodeAuthSys(std::span<const uint8_t> body);
void EncodeAuthSys(xdr::Encoder& enc, const AuthSys& auth);

// Reply headers. Each writes the whole header; the caller appends the result body after
// EncodeAcceptedHeader with kSuccess. Verifiers are AUTH_NONE.
void EncodeAcceptedHeader(xdr::Encoder& enc, uint32_t xid, AcceptStat stat);
// Where in a reply written by EncodeAcceptedHeader (from offset 0) the accept_stat word sits.
inline constexpr size_t kAcceptStatOffset = 20;
void EncodeProgMismatch(xdr::Encoder& enc, uint32_t xid, uint32_t low, uint32_t high);
void EncodeRpcMismatch(xdr::Encoder& enc, uint32_t xid);
void EncodeAuthError(xdr::Encoder& enc, uint32_t xid, AuthStat stat);

// Call header for an outgoing call with the given credentials (AUTH_NONE when empty).
void EncodeCallHeader(xdr::Encoder& enc, uint32_t xid, uint32_t program, uint32_t version,
                      uint32_t procedure, const std::optional<AuthSys>& auth = std::nullopt);

// A reply as a client reads it.
struct DecodedReply {
  bool ok = false;  // The header decoded.
  uint32_t xid = 0;
  ReplyStat reply_stat = ReplyStat::kMsgAccepted;
  AcceptStat accept_stat = AcceptStat::kSuccess;      // When accepted.
  RejectStat reject_stat = RejectStat::kRpcMismatch;  // When denied.
  AuthStat auth_stat = AuthStat::kOk;                 // When denied with AUTH_ERROR.
  uint32_t mismatch_low = 0;                          // PROG_MISMATCH or RPC_MISMATCH range.
  uint32_t mismatch_high = 0;
  std::span<const uint8_t> body;  // The result after a SUCCESS header.
};
DecodedReply DecodeReply(std::span<const uint8_t> message);

}  // namespace nlockd::rpc
