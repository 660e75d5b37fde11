// SPDX-License-Identifier: Apache-2.0
#include "bench/load/nlm_workload.hpp"

#include "nlm/wire.hpp"

namespace nlockd::bench {

namespace {

std::string SeqCookie(uint64_t seq) {
  std::string cookie(8, '\0');
  for (size_t i = 0; i < 8; ++i) cookie[i] = static_cast<char>(seq >> (8 * i));
  return cookie;
}

}  // namespace

std::string BenchFile(uint64_t run) { return "nlockd-bench-file-" + std::to_string(run); }

namespace {

// A lane's own owner (svid) and 4 KiB range of `file`; lanes of one connection share a
// caller_name.
nlm::nlm4_lock LaneLock(size_t connection, size_t lane, size_t pipeline, const std::string& file) {
  size_t owner = connection * pipeline + lane;
  nlm::nlm4_lock lock;
  lock.caller_name = "load-" + std::to_string(connection);
  lock.fh = file;
  lock.svid = static_cast<int32_t>(owner + 1);
  lock.oh = std::to_string(lock.svid) + "@" + lock.caller_name;
  lock.l_offset = owner * 4096;
  lock.l_len = 4096;
  return lock;
}

}  // namespace

CallSpec NlmLockUnlockWorkload::Next(size_t connection, size_t lane, uint64_t seq) {
  nlm::nlm4_lock lock = LaneLock(connection, lane, pipeline_, file_);
  CallSpec call{nlm::NLM_PROG, nlm::NLM4_VERS, 0, {}};
  xdr::Encoder enc(call.args);
  std::string cookie = SeqCookie(seq);
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

CallSpec NlmBlockCancelWorkload::Next(size_t connection, size_t lane, uint64_t seq) {
  nlm::nlm4_lock lock = LaneLock(connection, lane, pipeline_, file_);
  CallSpec call{nlm::NLM_PROG, nlm::NLM4_VERS, 0, {}};
  xdr::Encoder enc(call.args);
  std::string cookie = SeqCookie(seq);
  if (seq % 2 == 0) {
    call.procedure = nlm::NLM_LOCK;
    nlm::Encode(enc, nlm::NLM4_VERS,
                nlm::nlm4_lockargs{cookie, true, true, std::move(lock), false, 1});
  } else {
    call.procedure = nlm::NLM_CANCEL;
    nlm::Encode(enc, nlm::NLM4_VERS, nlm::nlm4_cancargs{cookie, true, true, std::move(lock)});
  }
  return call;
}

bool NlmBlockCancelWorkload::Check(const CallSpec& call, std::span<const uint8_t> result) {
  nlm::nlm4_res res;
  xdr::Decoder dec(result);
  if (!nlm::Decode(dec, nlm::NLM4_VERS, res)) return false;
  return res.stat == (call.procedure == nlm::NLM_LOCK ? nlm::NLM4_BLOCKED : nlm::NLM4_GRANTED);
}

CallSpec NlmBlockCancelWorkload::HolderLock() const {
  nlm::nlm4_lock lock{"holder", file_, "1@holder", 1, 0, 0};
  CallSpec call{nlm::NLM_PROG, nlm::NLM4_VERS, nlm::NLM_LOCK, {}};
  xdr::Encoder enc(call.args);
  nlm::Encode(enc, nlm::NLM4_VERS,
              nlm::nlm4_lockargs{SeqCookie(0), false, true, std::move(lock), false, 1});
  return call;
}

CallSpec NlmFillWorkload::Next(size_t /*connection*/, size_t /*lane*/, uint64_t /*seq*/) {
  const uint64_t index = next_++;
  nlm::nlm4_lock lock{"fill", file_, "1@fill", 1, index * 2, 1};
  CallSpec call{nlm::NLM_PROG, nlm::NLM4_VERS, nlm::NLM_LOCK, {}};
  xdr::Encoder enc(call.args);
  nlm::Encode(enc, nlm::NLM4_VERS,
              nlm::nlm4_lockargs{SeqCookie(index), false, true, std::move(lock), false, 1});
  return call;
}

bool NlmFillWorkload::Check(const CallSpec& /*call*/, std::span<const uint8_t> result) {
  nlm::nlm4_res res;
  xdr::Decoder dec(result);
  return nlm::Decode(dec, nlm::NLM4_VERS, res) && res.stat == nlm::NLM4_GRANTED;
}

std::string NlmTestWorkload::name() const {
  return "NLM4 TEST (" + std::to_string(locks_) + " locks)";
}

CallSpec NlmTestWorkload::Next(size_t connection, size_t lane, uint64_t seq) {
  // A multiplicative walk over [0, 2 * locks): even bytes are locked, odd ones are free.
  const uint64_t span = 2 * locks_;
  const uint64_t position = (seq * 7919 + lane * 104729 + connection * 1299709) % span;
  nlm::nlm4_lock lock;
  lock.caller_name = "tester-" + std::to_string(connection);
  lock.fh = file_;
  lock.svid = static_cast<int32_t>(lane + 1);
  lock.oh = std::to_string(lock.svid) + "@" + lock.caller_name;
  lock.l_offset = position;
  lock.l_len = 1;
  CallSpec call{nlm::NLM_PROG, nlm::NLM4_VERS, nlm::NLM_TEST, {}};
  xdr::Encoder enc(call.args);
  nlm::Encode(enc, nlm::NLM4_VERS, nlm::nlm4_testargs{SeqCookie(seq), false, std::move(lock)});
  return call;
}

bool NlmTestWorkload::Check(const CallSpec& call, std::span<const uint8_t> result) {
  nlm::nlm4_testres res;
  xdr::Decoder dec(result);
  if (!nlm::Decode(dec, nlm::NLM4_VERS, res)) return false;
  // Re-read the tested byte from the call: even bytes must be reported held, odd ones free.
  nlm::nlm4_testargs args;
  xdr::Decoder args_dec(call.args);
  if (!nlm::Decode(args_dec, nlm::NLM4_VERS, args)) return false;
  const bool locked = args.alock.l_offset % 2 == 0;
  if (!locked) return res.stat == nlm::NLM4_GRANTED;
  return res.stat == nlm::NLM4_DENIED && res.holder.l_offset == args.alock.l_offset;
}

}  // namespace nlockd::bench
