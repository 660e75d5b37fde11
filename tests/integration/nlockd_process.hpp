// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <csignal>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "testutil/netns.hpp"
#include "testutil/subprocess.hpp"

namespace nlockd::integration {

// The real nlockd binary (or a host that starts and logs as it does: the embedding example),
// started for one test.
class NlockdProcess {
 public:
  // Starts `binary` (the test's NLOCKD_BINARY, set by CMake) with `args`, inside `netns` when
  // given, and waits until it listens.
  NlockdProcess(std::string binary, std::vector<std::string> args,
                const testutil::NetNamespace* netns = nullptr);

  uint16_t port() const { return port_; }
  // The admin HTTP server's port; 0 when it is off.
  uint16_t admin_port() const { return admin_port_; }
  testutil::Subprocess& process() { return *process_; }

  // SIGTERM, and the exit status (nullopt if it hung).
  std::optional<int> Stop() { return process_->Stop(SIGTERM, std::chrono::seconds(20)); }

 private:
  std::unique_ptr<testutil::Subprocess> process_;
  uint16_t port_ = 0;
  uint16_t admin_port_ = 0;
};

}  // namespace nlockd::integration
