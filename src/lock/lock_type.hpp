// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <string_view>

namespace nlockd::lock {

// The two POSIX byte-range lock types (fcntl F_RDLCK / F_WRLCK; NLM's `exclusive` flag).
enum class LockType : uint8_t { kShared, kExclusive };

// Locks of different owners conflict unless both are shared.
constexpr bool TypesConflict(LockType a, LockType b) {
  return a == LockType::kExclusive || b == LockType::kExclusive;
}

constexpr std::string_view ToString(LockType type) {
  return type == LockType::kExclusive ? "exclusive" : "shared";
}

}  // namespace nlockd::lock
