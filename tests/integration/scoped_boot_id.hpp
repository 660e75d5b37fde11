// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdlib>
#include <string>

namespace nlockd::integration {

// NLOCKD_BOOT_ID for the nlockd processes started in its scope: a different value between two
// runs is what a reboot of the host looks like to nlockd.
class ScopedBootId {
 public:
  explicit ScopedBootId(const std::string& id) { Set(id); }
  ~ScopedBootId() { unsetenv("NLOCKD_BOOT_ID"); }
  ScopedBootId(const ScopedBootId&) = delete;
  ScopedBootId& operator=(const ScopedBootId&) = delete;
  void Set(const std::string& id) { setenv("NLOCKD_BOOT_ID", id.c_str(), 1); }
};

}  // namespace nlockd::integration
