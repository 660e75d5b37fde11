// SPDX-License-Identifier: Apache-2.0
#include "lock/range.hpp"

#include "base/error.hpp"

namespace nlockd::lock {

ByteRange ByteRange::FromFirstLast(uint64_t first, uint64_t last) {
  NLOCKD_REQUIRE(first <= last, "a byte range needs first <= last");
  return ByteRange(first, last);
}

std::string ByteRange::ToString() const {
  std::string out = "[" + std::to_string(first_) + ",";
  out += ToEnd() ? "end" : std::to_string(last_);
  out += "]";
  return out;
}

}  // namespace nlockd::lock
