// SPDX-License-Identifier: Apache-2.0
#include "base/host_name.hpp"

#include <algorithm>

namespace nlockd {

namespace {

char FoldAscii(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

}  // namespace

std::string FoldHostName(std::string_view name) {
  std::string out(name);
  std::transform(out.begin(), out.end(), out.begin(), FoldAscii);
  return out;
}

bool SameHostName(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return FoldAscii(x) == FoldAscii(y);
         });
}

}  // namespace nlockd
