// SPDX-License-Identifier: Apache-2.0
#include "bench/nsm/sm_mon_workload.hpp"

#include "nsm/wire.hpp"

namespace nlockd::bench {

CallSpec SmMonWorkload::Next(size_t connection, size_t lane, uint64_t seq) {
  uint64_t index = distinct_ ? seq % distinct_ : seq;
  nsm::mon args;
  args.mon_id_.mon_name = "bench-" + std::to_string(run_) + "-" + std::to_string(connection) + "-" +
                          std::to_string(lane) + "-" + std::to_string(index);
  args.mon_id_.my_id_ = nsm::my_id{"localhost", 100021, 4, 16};
  args.priv[0] = static_cast<uint8_t>(seq);
  CallSpec call{nsm::SM_PROG, nsm::SM_VERS, nsm::SM_MON, {}};
  xdr::Encoder enc(call.args);
  nsm::Encode(enc, args);
  return call;
}

bool SmMonWorkload::Check(const CallSpec& /*call*/, std::span<const uint8_t> result) {
  nsm::sm_stat_res res;
  xdr::Decoder dec(result);
  return nsm::Decode(dec, res) && res.res_stat == nsm::stat_succ;
}

}  // namespace nlockd::bench
