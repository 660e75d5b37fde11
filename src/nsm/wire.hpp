// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "xdr/decoder.hpp"
#include "xdr/encoder.hpp"

// NSM wire types (XNFS; rpcsvc/sm_inter.x, plus SM_NOTIFY which that file lacks). Spellings
// follow sm_inter.x. These types never leave nsm/.
namespace nlockd::nsm {

inline constexpr uint32_t SM_PROG = 100024;
inline constexpr uint32_t SM_VERS = 1;
// mon_name and my_name are string<SM_MAXSTRLEN>; a longer one is GARBAGE_ARGS.
inline constexpr uint32_t SM_MAXSTRLEN = 1024;
inline constexpr size_t SM_PRIV_SIZE = 16;

enum SmProc : uint32_t {
  SM_NULL = 0,
  SM_STAT = 1,
  SM_MON = 2,
  SM_UNMON = 3,
  SM_UNMON_ALL = 4,
  SM_SIMU_CRASH = 5,
  SM_NOTIFY = 6,
};

enum res : int32_t { stat_succ = 0, stat_fail = 1 };

struct sm_name {
  std::string mon_name;
};

struct my_id {
  std::string my_name;
  int32_t my_prog = 0;
  int32_t my_vers = 0;
  int32_t my_proc = 0;
};

struct mon_id {
  std::string mon_name;
  my_id my_id_;  // sm_inter.x calls this field my_id, like its type.
};

struct mon {
  mon_id mon_id_;
  std::array<uint8_t, SM_PRIV_SIZE> priv{};  // Fixed opaque: no length word.
};

struct sm_stat_res {
  res res_stat = stat_succ;
  int32_t state = 0;
};

struct sm_stat {
  int32_t state = 0;
};

struct stat_chge {
  std::string mon_name;
  int32_t state = 0;
};

// The callback to a registrant (sm_inter.x's status; nlm_prot.x's nlm_sm_status).
struct status {
  std::string mon_name;
  int32_t state = 0;
  std::array<uint8_t, SM_PRIV_SIZE> priv{};
};

[[nodiscard]] bool Decode(xdr::Decoder& dec, sm_name& out);
[[nodiscard]] bool Decode(xdr::Decoder& dec, my_id& out);
[[nodiscard]] bool Decode(xdr::Decoder& dec, mon_id& out);
[[nodiscard]] bool Decode(xdr::Decoder& dec, mon& out);
[[nodiscard]] bool Decode(xdr::Decoder& dec, stat_chge& out);
[[nodiscard]] bool Decode(xdr::Decoder& dec, status& out);
[[nodiscard]] bool Decode(xdr::Decoder& dec, sm_stat_res& out);
[[nodiscard]] bool Decode(xdr::Decoder& dec, sm_stat& out);

void Encode(xdr::Encoder& enc, const sm_stat_res& value);
void Encode(xdr::Encoder& enc, const sm_stat& value);
void Encode(xdr::Encoder& enc, const stat_chge& value);
void Encode(xdr::Encoder& enc, const status& value);
void Encode(xdr::Encoder& enc, const mon& value);
void Encode(xdr::Encoder& enc, const mon_id& value);
void Encode(xdr::Encoder& enc, const my_id& value);
void Encode(xdr::Encoder& enc, const sm_name& value);

}  // namespace nlockd::nsm
