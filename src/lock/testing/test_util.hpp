// SPDX-License-Identifier: Apache-2.0
#pragma once

// Helpers for lock/ tests only.

#include <cstdint>
#include <string>

#include <gtest/gtest.h>

#include "base/clock.hpp"
#include "lock/lock_manager.hpp"

namespace nlockd::lock::testing {

// An owner as a Linux client names it: oh = "<svid>@<host>".
inline LockOwner Owner(const std::string& host, int32_t svid = 1) {
  return LockOwner{HostId(host), svid, OwnerHandle(std::to_string(svid) + "@" + host)};
}

inline FileKey File(const std::string& name) { return FileKey(name); }

// What most LockManager tests start from: a manager on a manual clock, one file, four owners.
class LockManagerFixture : public ::testing::Test {
 protected:
  ManualClock clock_;
  LockManager manager_{clock_};
  const FileKey f_ = File("fh1");
  const LockOwner a_ = Owner("a");
  const LockOwner b_ = Owner("b");
  const LockOwner c_ = Owner("c");
  const LockOwner d_ = Owner("d");
};

inline LockRequest Req(const FileKey& file, const LockOwner& owner, uint64_t offset,
                       uint64_t length, LockType type = LockType::kExclusive, bool block = false,
                       bool reclaim = false) {
  LockRequest request;
  request.file = file;
  request.owner = owner;
  request.offset = offset;
  request.length = length;
  request.type = type;
  request.block = block;
  request.reclaim = reclaim;
  return request;
}

inline LockRequest Blocking(const FileKey& file, const LockOwner& owner, uint64_t offset,
                            uint64_t length, LockType type = LockType::kExclusive) {
  return Req(file, owner, offset, length, type, /*block=*/true);
}

inline LockRequest Reclaim(const FileKey& file, const LockOwner& owner, uint64_t offset,
                           uint64_t length, LockType type = LockType::kExclusive) {
  return Req(file, owner, offset, length, type, /*block=*/false, /*reclaim=*/true);
}

inline constexpr LockType kS = LockType::kShared;
inline constexpr LockType kX = LockType::kExclusive;

// The locks of one file as "1@a X [0,9], 2@b S [10,end]*" (oh, type, range, * if awaiting
// reclaim), in (first, owner) order.
inline std::string Locks(const LockManager& manager, const FileKey& file) {
  std::string out;
  manager.ForEachLock(
      [&](const LockView& v) {
        if (!out.empty()) out += ", ";
        out += v.owner.oh.value() + (v.type == LockType::kExclusive ? " X " : " S ") +
               v.range.ToString() + (v.awaiting_reclaim ? "*" : "");
      },
      StateFilter{std::nullopt, file});
  return out;
}

// Grants as "id:oh X [range]" joined by ", ".
inline std::string Describe(const Grants& grants) {
  std::string out;
  for (const WaiterGrant& g : grants) {
    if (!out.empty()) out += ", ";
    out += std::to_string(g.id.value()) + ":" + g.owner.oh.value() +
           (g.type == LockType::kExclusive ? " X " : " S ") + g.range.ToString();
  }
  return out;
}

}  // namespace nlockd::lock::testing
