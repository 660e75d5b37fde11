// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "xdr/decoder.hpp"
#include "xdr/encoder.hpp"

// NLM wire types (XNFS; nlm_prot.x for versions 1 and 3, RFC 1813 Appendix II for version 4).
// One set of structs with the version 4 shapes serves every version: versions 1 and 3 carry
// 32-bit offsets and lengths, which decode into the 64-bit fields and encode back (saturated)
// by the version-aware functions below. Spellings follow the .x files so that they can be
// grepped against the specs. These types never leave nlm/.
namespace nlockd::nlm {

inline constexpr uint32_t NLM_PROG = 100021;
inline constexpr uint32_t NLM_VERS = 1;
inline constexpr uint32_t NLM_VERSX = 3;
inline constexpr uint32_t NLM4_VERS = 4;

// Bounds of the protocol definitions (nlm_prot.x). Each stops a caller from making us hold large
// strings: caller_name and names at most LM_MAXSTRLEN; cookies and owner handles are netobj<1024>.
inline constexpr uint32_t LM_MAXSTRLEN = 1024;
inline constexpr uint32_t MAXNETOBJ_SZ = 1024;
// File handles: an NFSv3 handle is at most 64 bytes (NFS3_FHSIZE), and Linux lockd caps NLM
// handles there too; a longer one is GARBAGE_ARGS.
inline constexpr uint32_t kMaxFileHandle = 64;

enum NlmProc : uint32_t {
  NLM_NULL = 0,
  NLM_TEST = 1,
  NLM_LOCK = 2,
  NLM_CANCEL = 3,
  NLM_UNLOCK = 4,
  NLM_GRANTED = 5,
  NLM_TEST_MSG = 6,
  NLM_LOCK_MSG = 7,
  NLM_CANCEL_MSG = 8,
  NLM_UNLOCK_MSG = 9,
  NLM_GRANTED_MSG = 10,
  NLM_TEST_RES = 11,
  NLM_LOCK_RES = 12,
  NLM_CANCEL_RES = 13,
  NLM_UNLOCK_RES = 14,
  NLM_GRANTED_RES = 15,
  NLM_SM_NOTIFY = 16,  // The status callback from a co-resident statd (Linux lockd).
  NLM_SHARE = 20,
  NLM_UNSHARE = 21,
  NLM_NM_LOCK = 22,
  NLM_FREE_ALL = 23,
};

// nlm4_stats; versions 1 and 3 know only the first six (nlm_stats).
enum nlm4_stats : int32_t {
  NLM4_GRANTED = 0,
  NLM4_DENIED = 1,
  NLM4_DENIED_NOLOCKS = 2,
  NLM4_BLOCKED = 3,
  NLM4_DENIED_GRACE_PERIOD = 4,
  NLM4_DEADLCK = 5,
  NLM4_ROFS = 6,
  NLM4_STALE_FH = 7,
  NLM4_FBIG = 8,
  NLM4_FAILED = 9,
};

// DOS share modes (fsh_mode) and access (fsh_access).
enum fsh_mode : int32_t { fsm_DN = 0, fsm_DR = 1, fsm_DW = 2, fsm_DRW = 3 };
enum fsh_access : int32_t { fsa_NONE = 0, fsa_R = 1, fsa_W = 2, fsa_RW = 3 };

struct nlm4_lock {
  std::string caller_name;
  std::string fh;  // Opaque bytes.
  std::string oh;  // Opaque bytes.
  int32_t svid = 0;
  uint64_t l_offset = 0;
  uint64_t l_len = 0;
};

struct nlm4_lockargs {
  std::string cookie;
  bool block = false;
  bool exclusive = false;
  nlm4_lock alock;
  bool reclaim = false;
  int32_t state = 0;  // The client's NSM state.
};

struct nlm4_cancargs {
  std::string cookie;
  bool block = false;
  bool exclusive = false;
  nlm4_lock alock;
};

// Also the argument of GRANTED and GRANTED_MSG.
struct nlm4_testargs {
  std::string cookie;
  bool exclusive = false;
  nlm4_lock alock;
};

struct nlm4_unlockargs {
  std::string cookie;
  nlm4_lock alock;
};

struct nlm4_holder {
  bool exclusive = false;
  int32_t svid = 0;
  std::string oh;
  uint64_t l_offset = 0;
  uint64_t l_len = 0;
};

struct nlm4_testres {
  std::string cookie;
  nlm4_stats stat = NLM4_GRANTED;
  nlm4_holder holder;  // Meaningful when stat is NLM4_DENIED.
};

struct nlm4_res {
  std::string cookie;
  nlm4_stats stat = NLM4_GRANTED;
};

struct nlm4_share {
  std::string caller_name;
  std::string fh;
  std::string oh;
  fsh_mode mode = fsm_DN;
  fsh_access access = fsa_NONE;
};

struct nlm4_shareargs {
  std::string cookie;
  nlm4_share share;
  bool reclaim = false;
};

struct nlm4_shareres {
  std::string cookie;
  nlm4_stats stat = NLM4_GRANTED;
  int32_t sequence = 0;
};

struct nlm4_notify {
  std::string name;
  int32_t state = 0;
};

// The argument of procedure 16 (nlm_prot.x's nlm_sm_status, sm_inter.x's status).
struct nlm_sm_status {
  std::string mon_name;
  int32_t state = 0;
  std::array<uint8_t, 16> priv{};
};

// Decoders: false on malformed input (the decoder names the field). `version` selects the
// 32-bit (1, 3) or 64-bit (4) range encoding.
[[nodiscard]] bool Decode(xdr::Decoder& dec, uint32_t version, nlm4_lockargs& out);
[[nodiscard]] bool Decode(xdr::Decoder& dec, uint32_t version, nlm4_cancargs& out);
[[nodiscard]] bool Decode(xdr::Decoder& dec, uint32_t version, nlm4_testargs& out);
[[nodiscard]] bool Decode(xdr::Decoder& dec, uint32_t version, nlm4_unlockargs& out);
[[nodiscard]] bool Decode(xdr::Decoder& dec, uint32_t version, nlm4_shareargs& out);
[[nodiscard]] bool Decode(xdr::Decoder& dec, uint32_t version, nlm4_notify& out);
[[nodiscard]] bool Decode(xdr::Decoder& dec, uint32_t version, nlm_sm_status& out);
[[nodiscard]] bool Decode(xdr::Decoder& dec, uint32_t version, nlm4_res& out);
[[nodiscard]] bool Decode(xdr::Decoder& dec, uint32_t version, nlm4_testres& out);
[[nodiscard]] bool Decode(xdr::Decoder& dec, uint32_t version, nlm4_shareres& out);

// Encoders. For versions 1 and 3 a status that version does not have is mapped
// (StatusForVersion) and holder ranges wider than 32 bits are saturated, never wrapped.
void Encode(xdr::Encoder& enc, uint32_t version, const nlm4_res& res);
void Encode(xdr::Encoder& enc, uint32_t version, const nlm4_testres& res);
void Encode(xdr::Encoder& enc, uint32_t version, const nlm4_shareres& res);
void Encode(xdr::Encoder& enc, uint32_t version, const nlm4_lockargs& args);
void Encode(xdr::Encoder& enc, uint32_t version, const nlm4_testargs& args);
void Encode(xdr::Encoder& enc, uint32_t version, const nlm4_cancargs& args);
void Encode(xdr::Encoder& enc, uint32_t version, const nlm4_unlockargs& args);

// Versions 1 and 3 replies never carry version 4 codes: deadlock becomes denied and ROFS,
// STALE_FH, FBIG and FAILED become denied_nolocks, as Linux lockd maps them.
nlm4_stats StatusForVersion(nlm4_stats stat, uint32_t version);

// The status's name in lowercase without the prefix ("granted", "denied_grace_period", ...): the
// result label of nlm_requests_total. A static string.
std::string_view ToString(nlm4_stats stat);

}  // namespace nlockd::nlm
