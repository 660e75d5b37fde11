// SPDX-License-Identifier: Apache-2.0
#include "integration/nlockd_process.hpp"

#include <algorithm>
#include <chrono>
#include <iterator>
#include <regex>
#include <utility>

#include <gtest/gtest.h>

namespace nlockd::integration {

NlockdProcess::NlockdProcess(std::string binary, std::vector<std::string> args,
                             const testutil::NetNamespace* netns) {
  std::vector<std::string> argv{std::move(binary)};
  argv.insert(argv.end(), args.begin(), args.end());
  // A test that does not choose a store gets one that leaves nothing behind (the default,
  // sqlite:./var/nlockd.db, would carry registrations from one test into the next).
  if (std::find(args.begin(), args.end(), "--store") == args.end()) {
    argv.insert(argv.end(), {"--store", "memory:"});
  }
  // The default admin port (9464) is one per machine; tests run side by side.
  if (std::find(args.begin(), args.end(), "--admin-listen") == args.end()) {
    argv.insert(argv.end(), {"--admin-listen", "127.0.0.1:0"});
  }
  // Admin writes need a token by default; tests that do not set one drive the admin API
  // without it, as an operator who opened it would (nothing to open with the admin off).
  auto admin_listen = std::find(args.begin(), args.end(), "--admin-listen");
  const bool admin_off = admin_listen != args.end() && std::next(admin_listen) != args.end() &&
                         *std::next(admin_listen) == "off";
  if (!admin_off && std::find(args.begin(), args.end(), "--admin-token") == args.end() &&
      std::find(args.begin(), args.end(), "--admin-open-writes") == args.end()) {
    argv.insert(argv.end(), {"--admin-open-writes", "true"});
  }
  process_ = std::make_unique<testutil::Subprocess>(netns ? netns->Wrap(argv) : argv);
  auto match = process_->WaitForLine(std::regex(R"(nlockd listening" address=\S+ port=(\d+))"),
                                     std::chrono::seconds(20));
  if (!match) {
    ADD_FAILURE() << "nlockd did not start:\n" << process_->output();
    return;
  }
  port_ = static_cast<uint16_t>(std::stoi((*match)[1]));
  if (admin_off) return;
  // Logged after the line above (before it with ha, whose standby answers first).
  const std::regex admin_line(R"(nlockd admin listening" address=\S+ port=(\d+))");
  std::smatch admin;
  if (!std::regex_search(process_->output(), admin, admin_line)) {
    auto later = process_->PeekForLine(admin_line, std::chrono::seconds(20));
    if (!later) {
      ADD_FAILURE() << "nlockd did not start its admin server:\n" << process_->output();
      return;
    }
    admin = *later;
  }
  admin_port_ = static_cast<uint16_t>(std::stoi(admin[1]));
}

}  // namespace nlockd::integration
