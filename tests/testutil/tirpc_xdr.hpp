// SPDX-License-Identifier: Apache-2.0
#pragma once

// Runs libtirpc's rpcgen-generated XDR routines over memory, so that our codec can be checked
// byte for byte against code nobody here wrote.
#include <cstdint>
#include <string>
#include <vector>

#include <rpc/rpc.h>

namespace nlockd::testutil {

template <typename T>
std::vector<uint8_t> TirpcEncode(bool_t (*proc)(XDR*, T*), T* value) {
  std::vector<uint8_t> buffer(8192);
  XDR xdr;
  xdrmem_create(&xdr, reinterpret_cast<char*>(buffer.data()), static_cast<u_int>(buffer.size()),
                XDR_ENCODE);
  if (!proc(&xdr, value)) return {};
  buffer.resize(xdr_getpos(&xdr));
  xdr_destroy(&xdr);
  return buffer;
}

// Decodes into `out`; free with xdr_free(proc, out) afterwards.
template <typename T>
bool TirpcDecode(bool_t (*proc)(XDR*, T*), const std::vector<uint8_t>& bytes, T* out) {
  XDR xdr;
  std::vector<uint8_t> copy = bytes;
  xdrmem_create(&xdr, reinterpret_cast<char*>(copy.data()), static_cast<u_int>(copy.size()),
                XDR_DECODE);
  bool ok = proc(&xdr, out);
  xdr_destroy(&xdr);
  return ok;
}

inline netobj NetObj(std::string& bytes) {
  return netobj{static_cast<u_int>(bytes.size()), bytes.data()};
}

}  // namespace nlockd::testutil
