// SPDX-License-Identifier: Apache-2.0
#pragma once

// The example's own RPC program: a toy file service that hands out file handles, as an NFS
// server's MOUNT and LOOKUP would. Program 0x20000153 (the range RFC 5531 leaves to users),
// version 1:
//   0 NULL     void            -> void
//   1 LOOKUP   string name<255> -> opaque fh<64>  (the same name always gets the same handle)
//   2 REMOVE   string name<255> -> unsigned locks  (lock owners released on the file)
#include <cstdint>
#include <string>

namespace example {

inline constexpr uint32_t kFileProgram = 0x20000153;
inline constexpr uint32_t kFileVersion = 1;
inline constexpr uint32_t kLookup = 1;
inline constexpr uint32_t kRemove = 2;

// The handle of `name`: printable, so that test tools can pass it on a command line. A real
// NFS server's handle names its export and inode; libnlockd only compares the bytes.
inline std::string FileHandleOf(const std::string& name) {
  uint64_t hash = 1469598103934665603ULL;  // FNV-1a
  for (char c : name) hash = (hash ^ static_cast<unsigned char>(c)) * 1099511628211ULL;
  static const char* digits = "0123456789abcdef";
  std::string out = "fh-";
  for (int shift = 60; shift >= 0; shift -= 4) out += digits[(hash >> shift) & 0xf];
  return out;
}

}  // namespace example
