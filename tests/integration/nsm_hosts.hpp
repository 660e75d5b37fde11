// SPDX-License-Identifier: Apache-2.0
#pragma once

// Test hosts for the NSM tests (TestHosts on 10.198.n.0/24): clients run nsm_client,
// nlm_client or Debian's sm-notify.

#include <cstdint>
#include <regex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "integration/test_hosts.hpp"

namespace nlockd::integration {

class NsmHosts : public TestHosts {
 public:
  explicit NsmHosts(int clients) : TestHosts(NLOCKD_BINARY, "nsm", 198, clients) {}

  static std::string ServerAddress(int client) { return "10.198." + std::to_string(client) + ".1"; }
  static std::string ClientAddress(int client) { return "10.198." + std::to_string(client) + ".2"; }

  // Runs nsm_client (`nsm_client`, the test's NSM_CLIENT_BINARY) with `operations` against the
  // status monitor on the loopback of client host `client`, or of the server host for
  // kServerHost, as that host's lock manager calls it; its output lines. A failure fails the
  // test.
  static constexpr int kServerHost = 0;
  std::vector<std::string> CallLocalMonitor(const std::string& nsm_client, int client,
                                            const std::vector<std::string>& operations) {
    std::vector<std::string> argv{nsm_client, "--server", "127.0.0.1"};
    argv.insert(argv.end(), operations.begin(), operations.end());
    auto [status, lines] = client == kServerHost ? RunOnServer(argv) : Run(client, argv);
    EXPECT_EQ(status, 0) << ::testing::PrintToString(lines);
    return lines;
  }

  // The state in nsm_client's answer to one `stat`; -1, and a test failure, for anything else.
  static int32_t StateOf(const std::vector<std::string>& stat_answer) {
    std::smatch match;
    if (stat_answer.size() != 1 ||
        !std::regex_match(stat_answer[0], match, std::regex("stat res=succ state=(\\d+)"))) {
      ADD_FAILURE() << ::testing::PrintToString(stat_answer);
      return -1;
    }
    return std::stoi(match[1].str());
  }
};

}  // namespace nlockd::integration
