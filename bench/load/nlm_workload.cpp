#include "bench/load/nlm_workload.hpp"

#include "nlm/wire.hpp"

namespace nlockd::bench {

CallSpec NlmLockUnlockWorkload::Next(size_t connection, size_t lane, uint64_t seq) {
  size_t owner = connection * pipeline_ + lane;
  nlm::nlm4_lock lock;
  lock.caller_name = "load-" + std::to_string(connection);
  lock.fh = "nlockd-bench-file-" + std::to_string(run_);
  lock.svid = static_cast<int32_t>(owner + 1);
  lock.oh = std::to_string(lock.svid) + "@" + lock.caller_name;
  lock.l_offset = owner * 4096;
  lock.l_len = 4096;
  CallSpec call{nlm::NLM_PROG, nlm::NLM4_VERS, 0, {}};
  xdr::Encoder enc(call.args);
  std::string cookie(8, '\0');
  for (int i = 0; i < 8; ++i) cookie[static_cast<size_t>(i)] = static_cast<char>(seq >> (8 * i));
  if (seq % 2 == 0) {
    call.procedure = nlm::NLM_LOCK;
    nlm::Encode(enc, nlm::NLM4_VERS,
                nlm::nlm4_lockargs{cookie, false, true, std::move(lock), false, 1});
  } else {
    call.procedure = nlm::NLM_UNLOCK;
    nlm::Encode(enc, nlm::NLM4_VERS, nlm::nlm4_unlockargs{cookie, std::move(lock)});
  }
  return call;
}

bool NlmLockUnlockWorkload::Check(const CallSpec& /*call*/, std::span<const uint8_t> result) {
  nlm::nlm4_res res;
  xdr::Decoder dec(result);
  return nlm::Decode(dec, nlm::NLM4_VERS, res) && res.stat == nlm::NLM4_GRANTED;
}

}  // namespace nlockd::bench
