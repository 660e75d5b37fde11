// SPDX-License-Identifier: Apache-2.0
#include "rpc/message.hpp"

namespace nlockd::rpc {

namespace {

bool DecodeOpaqueAuth(xdr::Decoder& dec, OpaqueAuth& out, std::string_view field) {
  return dec.U32(out.flavor, field) && dec.OpaqueView(out.body, kMaxAuthBytes, field);
}

void EncodeNullVerifier(xdr::Encoder& enc) {
  enc.U32(static_cast<uint32_t>(AuthFlavor::kNone));
  enc.U32(0);
}

void EncodeReplyStart(xdr::Encoder& enc, uint32_t xid, ReplyStat stat) {
  enc.U32(xid);
  enc.U32(static_cast<uint32_t>(MsgType::kReply));
  enc.U32(static_cast<uint32_t>(stat));
}

}  // namespace

DecodedCall DecodeCall(std::span<const uint8_t> message) {
  DecodedCall out;
  xdr::Decoder dec(message);
  uint32_t msg_type = 0;
  if (!dec.U32(out.header.xid, "xid") || !dec.U32(msg_type, "msg_type")) return out;
  if (msg_type != static_cast<uint32_t>(MsgType::kCall)) {
    out.status = CallDecodeStatus::kNotACall;
    return out;
  }
  if (!dec.U32(out.header.rpc_version, "rpcvers")) return out;
  if (out.header.rpc_version != kRpcVersion) {
    out.status = CallDecodeStatus::kRpcMismatch;
    return out;
  }
  if (!dec.U32(out.header.program, "prog") || !dec.U32(out.header.version, "vers") ||
      !dec.U32(out.header.procedure, "proc") || !DecodeOpaqueAuth(dec, out.header.cred, "cred") ||
      !DecodeOpaqueAuth(dec, out.header.verf, "verf")) {
    return out;
  }
  out.status = CallDecodeStatus::kOk;
  out.args = dec.rest();
  return out;
}

std::optional<AuthSys> DecodeAuthSys(std::span<const uint8_t> body) {
  AuthSys auth;
  xdr::Decoder dec(body);
  auto gid = [](xdr::Decoder& d, uint32_t& g) { return d.U32(g, "gid"); };
  if (!dec.U32(auth.stamp, "stamp") || !dec.String(auth.machine_name, kMaxMachineName, "name") ||
      !dec.U32(auth.uid, "uid") || !dec.U32(auth.gid, "gid") ||
      !dec.Array(auth.gids, kMaxAuthSysGids, 4, gid, "gids")) {
    return std::nullopt;
  }
  return auth;
}

void EncodeAuthSys(xdr::Encoder& enc, const AuthSys& auth) {
  enc.U32(auth.stamp);
  enc.String(auth.machine_name);
  enc.U32(auth.uid);
  enc.U32(auth.gid);
  enc.Array(auth.gids, [](xdr::Encoder& e, uint32_t g) { e.U32(g); });
}

void EncodeAcceptedHeader(xdr::Encoder& enc, uint32_t xid, AcceptStat stat) {
  EncodeReplyStart(enc, xid, ReplyStat::kMsgAccepted);
  EncodeNullVerifier(enc);
  enc.U32(static_cast<uint32_t>(stat));
}

void EncodeProgMismatch(xdr::Encoder& enc, uint32_t xid, uint32_t low, uint32_t high) {
  EncodeAcceptedHeader(enc, xid, AcceptStat::kProgMismatch);
  enc.U32(low);
  enc.U32(high);
}

void EncodeRpcMismatch(xdr::Encoder& enc, uint32_t xid) {
  EncodeReplyStart(enc, xid, ReplyStat::kMsgDenied);
  enc.U32(static_cast<uint32_t>(RejectStat::kRpcMismatch));
  enc.U32(kRpcVersion);
  enc.U32(kRpcVersion);
}

void EncodeAuthError(xdr::Encoder& enc, uint32_t xid, AuthStat stat) {
  EncodeReplyStart(enc, xid, ReplyStat::kMsgDenied);
  enc.U32(static_cast<uint32_t>(RejectStat::kAuthError));
  enc.U32(static_cast<uint32_t>(stat));
}

void EncodeCallHeader(xdr::Encoder& enc, uint32_t xid, uint32_t program, uint32_t version,
                      uint32_t procedure, const std::optional<AuthSys>& auth) {
  enc.U32(xid);
  enc.U32(static_cast<uint32_t>(MsgType::kCall));
  enc.U32(kRpcVersion);
  enc.U32(program);
  enc.U32(version);
  enc.U32(procedure);
  if (auth) {
    std::vector<uint8_t> body;
    xdr::Encoder body_enc(body);
    EncodeAuthSys(body_enc, *auth);
    enc.U32(static_cast<uint32_t>(AuthFlavor::kSys));
    enc.Opaque(body);
  } else {
    EncodeNullVerifier(enc);
  }
  EncodeNullVerifier(enc);
}

DecodedReply DecodeReply(std::span<const uint8_t> message) {
  DecodedReply out;
  xdr::Decoder dec(message);
  uint32_t msg_type = 0;
  uint32_t reply_stat = 0;
  if (!dec.U32(out.xid, "xid") || !dec.U32(msg_type, "msg_type") ||
      msg_type != static_cast<uint32_t>(MsgType::kReply) || !dec.U32(reply_stat, "reply_stat")) {
    return out;
  }
  if (reply_stat == static_cast<uint32_t>(ReplyStat::kMsgAccepted)) {
    OpaqueAuth verf;
    uint32_t accept_stat = 0;
    if (!DecodeOpaqueAuth(dec, verf, "verf") || !dec.U32(accept_stat, "accept_stat") ||
        accept_stat > static_cast<uint32_t>(AcceptStat::kSystemErr)) {
      return out;
    }
    out.reply_stat = ReplyStat::kMsgAccepted;
    out.accept_stat = static_cast<AcceptStat>(accept_stat);
    if (out.accept_stat == AcceptStat::kProgMismatch &&
        (!dec.U32(out.mismatch_low, "low") || !dec.U32(out.mismatch_high, "high"))) {
      return out;
    }
    out.body = dec.rest();
    out.ok = true;
    return out;
  }
  if (reply_stat != static_cast<uint32_t>(ReplyStat::kMsgDenied)) return out;
  out.reply_stat = ReplyStat::kMsgDenied;
  uint32_t reject_stat = 0;
  if (!dec.U32(reject_stat, "reject_stat")) return out;
  if (reject_stat == static_cast<uint32_t>(RejectStat::kRpcMismatch)) {
    out.reject_stat = RejectStat::kRpcMismatch;
    out.ok = dec.U32(out.mismatch_low, "low") && dec.U32(out.mismatch_high, "high");
  } else if (reject_stat == static_cast<uint32_t>(RejectStat::kAuthError)) {
    uint32_t auth_stat = 0;
    out.reject_stat = RejectStat::kAuthError;
    out.ok = dec.U32(auth_stat, "auth_stat");
    out.auth_stat = static_cast<AuthStat>(auth_stat);
  }
  return out;
}

}  // namespace nlockd::rpc
