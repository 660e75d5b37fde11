// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <string>
#include <string_view>

namespace nlockd {

// Client host names (NLM caller_name, NSM mon_name, and the IP literals that stand in for them)
// are compared without regard to ASCII case (RFC 4343), byte for byte otherwise; the locale plays
// no part. SameHostName is the one rule that says whether two names are the same host: FREE_ALL,
// the status callback, the admin release and the library's ReleaseHost all match by it.
bool SameHostName(std::string_view a, std::string_view b);
// The form of a name that keys a table by host (the lock table's caller_name keys, the monitor
// registry's peers): FoldHostName(a) == FoldHostName(b) exactly when SameHostName(a, b).
std::string FoldHostName(std::string_view name);

}  // namespace nlockd
