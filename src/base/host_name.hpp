// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <string>
#include <string_view>

namespace nlockd {

// Client host names (NLM caller_name, NSM mon_name, and the IP literals that stand in for them)
// are compared without regard to ASCII case (RFC 4343), byte for byte otherwise; the locale plays
// no part, so every module that matches a name against another matches it the same way.
std::string FoldHostName(std::string_view name);
bool SameHostName(std::string_view a, std::string_view b);

}  // namespace nlockd
