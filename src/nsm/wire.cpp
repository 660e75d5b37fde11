// SPDX-License-Identifier: Apache-2.0
#include "nsm/wire.hpp"

namespace nlockd::nsm {

bool Decode(xdr::Decoder& dec, sm_name& out) {
  return dec.String(out.mon_name, SM_MAXSTRLEN, "mon_name");
}

bool Decode(xdr::Decoder& dec, my_id& out) {
  return dec.String(out.my_name, SM_MAXSTRLEN, "my_name") && dec.I32(out.my_prog, "my_prog") &&
         dec.I32(out.my_vers, "my_vers") && dec.I32(out.my_proc, "my_proc");
}

bool Decode(xdr::Decoder& dec, mon_id& out) {
  return dec.String(out.mon_name, SM_MAXSTRLEN, "mon_name") && Decode(dec, out.my_id_);
}

bool Decode(xdr::Decoder& dec, mon& out) {
  return Decode(dec, out.mon_id_) && dec.FixedOpaque(out.priv, "priv");
}

bool Decode(xdr::Decoder& dec, stat_chge& out) {
  return dec.String(out.mon_name, SM_MAXSTRLEN, "mon_name") && dec.I32(out.state, "state");
}

bool Decode(xdr::Decoder& dec, status& out) {
  return dec.String(out.mon_name, SM_MAXSTRLEN, "mon_name") && dec.I32(out.state, "state") &&
         dec.FixedOpaque(out.priv, "priv");
}

bool Decode(xdr::Decoder& dec, sm_stat_res& out) {
  int32_t raw = 0;
  if (!dec.Enum(raw, "res_stat") || !dec.I32(out.state, "state")) return false;
  if (raw != stat_succ && raw != stat_fail) {
    return dec.Fail(xdr::DecodeError::kBadValue, "res_stat");
  }
  out.res_stat = static_cast<res>(raw);
  return true;
}

bool Decode(xdr::Decoder& dec, sm_stat& out) { return dec.I32(out.state, "state"); }

void Encode(xdr::Encoder& enc, const sm_stat_res& value) {
  enc.Enum(value.res_stat);
  enc.I32(value.state);
}

void Encode(xdr::Encoder& enc, const sm_stat& value) { enc.I32(value.state); }

void Encode(xdr::Encoder& enc, const stat_chge& value) {
  enc.String(value.mon_name);
  enc.I32(value.state);
}

void Encode(xdr::Encoder& enc, const status& value) {
  enc.String(value.mon_name);
  enc.I32(value.state);
  enc.FixedOpaque(value.priv);
}

void Encode(xdr::Encoder& enc, const my_id& value) {
  enc.String(value.my_name);
  enc.I32(value.my_prog);
  enc.I32(value.my_vers);
  enc.I32(value.my_proc);
}

void Encode(xdr::Encoder& enc, const mon_id& value) {
  enc.String(value.mon_name);
  Encode(enc, value.my_id_);
}

void Encode(xdr::Encoder& enc, const mon& value) {
  Encode(enc, value.mon_id_);
  enc.FixedOpaque(value.priv);
}

void Encode(xdr::Encoder& enc, const sm_name& value) { enc.String(value.mon_name); }

}  // namespace nlockd::nsm
