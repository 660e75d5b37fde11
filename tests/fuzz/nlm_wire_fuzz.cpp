// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: every NLM argument and result decoder, in every version. The first input
// byte picks the version (1, 3 or 4) and the type; the rest is the XDR body. What decodes is
// encoded again, and that encoding must decode and re-encode to the same bytes.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <vector>

#include "nlm/wire.hpp"

namespace {

using namespace nlockd::nlm;

// Decodes `bytes` as T; with an encoder for T, checks that encoding is stable.
template <typename T, bool kEncodes>
void Check(uint32_t version, std::span<const uint8_t> bytes) {
  nlockd::xdr::Decoder dec(bytes);
  T value;
  if (!Decode(dec, version, value)) return;
  if constexpr (kEncodes) {
    std::vector<uint8_t> first;
    nlockd::xdr::Encoder enc(first);
    Encode(enc, version, value);
    nlockd::xdr::Decoder again(first);
    T copy;
    if (!Decode(again, version, copy)) std::abort();  // We wrote what we cannot read.
    std::vector<uint8_t> second;
    nlockd::xdr::Encoder enc2(second);
    Encode(enc2, version, copy);
    if (first != second) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  constexpr uint32_t kVersions[] = {NLM_VERS, NLM_VERSX, NLM4_VERS};
  const uint32_t version = kVersions[(data[0] >> 4) % 3];
  std::span<const uint8_t> body(data + 1, size - 1);
  switch (data[0] & 0x0f) {
    case 0:
      Check<nlm4_lockargs, true>(version, body);
      break;
    case 1:
      Check<nlm4_cancargs, true>(version, body);
      break;
    case 2:
      Check<nlm4_testargs, true>(version, body);
      break;
    case 3:
      Check<nlm4_unlockargs, true>(version, body);
      break;
    case 4:
      Check<nlm4_shareargs, false>(version, body);
      break;
    case 5:
      Check<nlm4_notify, false>(version, body);
      break;
    case 6:
      Check<nlm_sm_status, false>(version, body);
      break;
    case 7:
      Check<nlm4_res, true>(version, body);
      break;
    case 8:
      Check<nlm4_testres, true>(version, body);
      break;
    case 9:
      Check<nlm4_shareres, true>(version, body);
      break;
    default:
      break;
  }
  return 0;
}
