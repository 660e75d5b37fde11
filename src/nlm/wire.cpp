// SPDX-License-Identifier: Apache-2.0
#include "nlm/wire.hpp"

#include <algorithm>

namespace nlockd::nlm {

namespace {

bool Is64Bit(uint32_t version) { return version >= NLM4_VERS; }

bool DecodeRange(xdr::Decoder& dec, uint32_t version, uint64_t& offset, uint64_t& len) {
  if (Is64Bit(version)) return dec.U64(offset, "l_offset") && dec.U64(len, "l_len");
  uint32_t offset32 = 0;
  uint32_t len32 = 0;
  if (!dec.U32(offset32, "l_offset") || !dec.U32(len32, "l_len")) return false;
  offset = offset32;  // Unsigned in nlm_prot.x: no sign extension.
  len = len32;
  return true;
}

// A holder's range as the version can say it: for 32 bits clipped to [0, 2^32), saturated,
// never wrapped (a 64-bit range past 4 GiB reads as "to the end" to a 32-bit client).
void EncodeRange(xdr::Encoder& enc, uint32_t version, uint64_t offset, uint64_t len) {
  if (Is64Bit(version)) {
    enc.U64(offset);
    enc.U64(len);
    return;
  }
  constexpr uint64_t kLimit = uint64_t{1} << 32;
  uint64_t offset32 = std::min<uint64_t>(offset, kLimit - 1);
  uint64_t len32 = 0;  // 0 stays "to the end".
  if (len != 0) len32 = std::min({len, kLimit - offset32, kLimit - 1});
  enc.U32(static_cast<uint32_t>(offset32));
  enc.U32(static_cast<uint32_t>(len32));
}

bool DecodeLock(xdr::Decoder& dec, uint32_t version, nlm4_lock& out) {
  return dec.String(out.caller_name, LM_MAXSTRLEN, "caller_name") &&
         dec.Opaque(out.fh, kMaxFileHandle, "fh") && dec.Opaque(out.oh, MAXNETOBJ_SZ, "oh") &&
         dec.I32(out.svid, "svid") && DecodeRange(dec, version, out.l_offset, out.l_len);
}

// Arguments we send (GRANTED callbacks) repeat a client's own lock: for versions 1 and 3 its
// offset and length came as 32-bit values and go back unchanged.
void EncodeLock(xdr::Encoder& enc, uint32_t version, const nlm4_lock& lock) {
  enc.String(lock.caller_name);
  enc.Opaque(lock.fh);
  enc.Opaque(lock.oh);
  enc.I32(lock.svid);
  if (Is64Bit(version)) {
    enc.U64(lock.l_offset);
    enc.U64(lock.l_len);
  } else {
    enc.U32(static_cast<uint32_t>(lock.l_offset));
    enc.U32(static_cast<uint32_t>(lock.l_len));
  }
}

bool DecodeCookie(xdr::Decoder& dec, std::string& cookie) {
  return dec.Opaque(cookie, MAXNETOBJ_SZ, "cookie");
}

bool DecodeStat(xdr::Decoder& dec, nlm4_stats& out) {
  int32_t raw = 0;
  if (!dec.Enum(raw, "stat")) return false;
  if (raw < NLM4_GRANTED || raw > NLM4_FAILED) return dec.Fail(xdr::DecodeError::kBadValue, "stat");
  out = static_cast<nlm4_stats>(raw);
  return true;
}

}  // namespace

nlm4_stats StatusForVersion(nlm4_stats stat, uint32_t version) {
  if (Is64Bit(version)) return stat;
  switch (stat) {
    case NLM4_GRANTED:
    case NLM4_DENIED:
    case NLM4_DENIED_NOLOCKS:
    case NLM4_BLOCKED:
    case NLM4_DENIED_GRACE_PERIOD:
      return stat;
    case NLM4_DEADLCK:
      return NLM4_DENIED;
    default:
      return NLM4_DENIED_NOLOCKS;
  }
}

std::string_view ToString(nlm4_stats stat) {
  switch (stat) {
    case NLM4_GRANTED:
      return "granted";
    case NLM4_DENIED:
      return "denied";
    case NLM4_DENIED_NOLOCKS:
      return "denied_nolocks";
    case NLM4_BLOCKED:
      return "blocked";
    case NLM4_DENIED_GRACE_PERIOD:
      return "denied_grace_period";
    case NLM4_DEADLCK:
      return "deadlck";
    case NLM4_ROFS:
      return "rofs";
    case NLM4_STALE_FH:
      return "stale_fh";
    case NLM4_FBIG:
      return "fbig";
    case NLM4_FAILED:
      return "failed";
  }
  return "unknown";
}

bool Decode(xdr::Decoder& dec, uint32_t version, nlm4_lockargs& out) {
  return DecodeCookie(dec, out.cookie) && dec.Bool(out.block, "block") &&
         dec.Bool(out.exclusive, "exclusive") && DecodeLock(dec, version, out.alock) &&
         dec.Bool(out.reclaim, "reclaim") && dec.I32(out.state, "state");
}

bool Decode(xdr::Decoder& dec, uint32_t version, nlm4_cancargs& out) {
  return DecodeCookie(dec, out.cookie) && dec.Bool(out.block, "block") &&
         dec.Bool(out.exclusive, "exclusive") && DecodeLock(dec, version, out.alock);
}

bool Decode(xdr::Decoder& dec, uint32_t version, nlm4_testargs& out) {
  return DecodeCookie(dec, out.cookie) && dec.Bool(out.exclusive, "exclusive") &&
         DecodeLock(dec, version, out.alock);
}

bool Decode(xdr::Decoder& dec, uint32_t version, nlm4_unlockargs& out) {
  return DecodeCookie(dec, out.cookie) && DecodeLock(dec, version, out.alock);
}

bool Decode(xdr::Decoder& dec, uint32_t /*version*/, nlm4_shareargs& out) {
  int32_t mode = 0;
  int32_t access = 0;
  if (!DecodeCookie(dec, out.cookie) ||
      !dec.String(out.share.caller_name, LM_MAXSTRLEN, "caller_name") ||
      !dec.Opaque(out.share.fh, kMaxFileHandle, "fh") ||
      !dec.Opaque(out.share.oh, MAXNETOBJ_SZ, "oh") || !dec.Enum(mode, "mode") ||
      !dec.Enum(access, "access") || !dec.Bool(out.reclaim, "reclaim")) {
    return false;
  }
  if (mode < fsm_DN || mode > fsm_DRW) return dec.Fail(xdr::DecodeError::kBadValue, "mode");
  if (access < fsa_NONE || access > fsa_RW) {
    return dec.Fail(xdr::DecodeError::kBadValue, "access");
  }
  out.share.mode = static_cast<fsh_mode>(mode);
  out.share.access = static_cast<fsh_access>(access);
  return true;
}

bool Decode(xdr::Decoder& dec, uint32_t /*version*/, nlm4_notify& out) {
  // nlm_notify's name is string<MAXNAMELEN> (1025) in nlm_prot.x.
  return dec.String(out.name, LM_MAXSTRLEN + 1, "name") && dec.I32(out.state, "state");
}

bool Decode(xdr::Decoder& dec, uint32_t /*version*/, nlm_sm_status& out) {
  return dec.String(out.mon_name, LM_MAXSTRLEN, "mon_name") && dec.I32(out.state, "state") &&
         dec.FixedOpaque(out.priv, "priv");
}

bool Decode(xdr::Decoder& dec, uint32_t /*version*/, nlm4_res& out) {
  return DecodeCookie(dec, out.cookie) && DecodeStat(dec, out.stat);
}

bool Decode(xdr::Decoder& dec, uint32_t version, nlm4_testres& out) {
  if (!DecodeCookie(dec, out.cookie) || !DecodeStat(dec, out.stat)) return false;
  if (out.stat != NLM4_DENIED) return true;
  return dec.Bool(out.holder.exclusive, "exclusive") && dec.I32(out.holder.svid, "svid") &&
         dec.Opaque(out.holder.oh, MAXNETOBJ_SZ, "oh") &&
         DecodeRange(dec, version, out.holder.l_offset, out.holder.l_len);
}

bool Decode(xdr::Decoder& dec, uint32_t /*version*/, nlm4_shareres& out) {
  return DecodeCookie(dec, out.cookie) && DecodeStat(dec, out.stat) &&
         dec.I32(out.sequence, "sequence");
}

void Encode(xdr::Encoder& enc, uint32_t version, const nlm4_res& res) {
  enc.Opaque(res.cookie);
  enc.Enum(StatusForVersion(res.stat, version));
}

void Encode(xdr::Encoder& enc, uint32_t version, const nlm4_testres& res) {
  enc.Opaque(res.cookie);
  nlm4_stats stat = StatusForVersion(res.stat, version);
  enc.Enum(stat);
  if (stat == NLM4_DENIED && res.stat == NLM4_DENIED) {
    enc.Bool(res.holder.exclusive);
    enc.I32(res.holder.svid);
    enc.Opaque(res.holder.oh);
    EncodeRange(enc, version, res.holder.l_offset, res.holder.l_len);
  } else if (stat == NLM4_DENIED) {
    // A version 4 code mapped to denied has no holder to report: an empty one.
    enc.Bool(false);
    enc.I32(0);
    enc.Opaque(std::string_view());
    EncodeRange(enc, version, 0, 0);
  }
}

void Encode(xdr::Encoder& enc, uint32_t version, const nlm4_shareres& res) {
  enc.Opaque(res.cookie);
  enc.Enum(StatusForVersion(res.stat, version));
  enc.I32(res.sequence);
}

void Encode(xdr::Encoder& enc, uint32_t version, const nlm4_lockargs& args) {
  enc.Opaque(args.cookie);
  enc.Bool(args.block);
  enc.Bool(args.exclusive);
  EncodeLock(enc, version, args.alock);
  enc.Bool(args.reclaim);
  enc.I32(args.state);
}

void Encode(xdr::Encoder& enc, uint32_t version, const nlm4_testargs& args) {
  enc.Opaque(args.cookie);
  enc.Bool(args.exclusive);
  EncodeLock(enc, version, args.alock);
}

void Encode(xdr::Encoder& enc, uint32_t version, const nlm4_cancargs& args) {
  enc.Opaque(args.cookie);
  enc.Bool(args.block);
  enc.Bool(args.exclusive);
  EncodeLock(enc, version, args.alock);
}

void Encode(xdr::Encoder& enc, uint32_t version, const nlm4_unlockargs& args) {
  enc.Opaque(args.cookie);
  EncodeLock(enc, version, args.alock);
}

}  // namespace nlockd::nlm
