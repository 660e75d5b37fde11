// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: every NSM (version 1) argument and result decoder. The first input byte
// picks the type; the rest is the XDR body. What decodes is encoded again, and that encoding
// must decode and re-encode to the same bytes.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <vector>

#include "nsm/wire.hpp"

namespace {

using namespace nlockd::nsm;

template <typename T>
void Check(std::span<const uint8_t> bytes) {
  nlockd::xdr::Decoder dec(bytes);
  T value;
  if (!Decode(dec, value)) return;
  std::vector<uint8_t> first;
  nlockd::xdr::Encoder enc(first);
  Encode(enc, value);
  nlockd::xdr::Decoder again(first);
  T copy;
  if (!Decode(again, copy)) std::abort();  // We wrote what we cannot read.
  std::vector<uint8_t> second;
  nlockd::xdr::Encoder enc2(second);
  Encode(enc2, copy);
  if (first != second) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::span<const uint8_t> body(data + 1, size - 1);
  switch (data[0] % 8) {
    case 0:
      Check<sm_name>(body);
      break;
    case 1:
      Check<my_id>(body);
      break;
    case 2:
      Check<mon_id>(body);
      break;
    case 3:
      Check<mon>(body);
      break;
    case 4:
      Check<stat_chge>(body);
      break;
    case 5:
      Check<status>(body);
      break;
    case 6:
      Check<sm_stat_res>(body);
      break;
    case 7:
      Check<sm_stat>(body);
      break;
  }
  return 0;
}
