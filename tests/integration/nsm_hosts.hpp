// SPDX-License-Identifier: Apache-2.0
#pragma once

// Test hosts for the NSM tests (TestHosts on 10.198.n.0/24): clients run nsm_client,
// nlm_client or Debian's sm-notify.

#include <string>

#include "integration/test_hosts.hpp"

namespace nlockd::integration {

class NsmHosts : public TestHosts {
 public:
  explicit NsmHosts(int clients) : TestHosts("nsm", 198, clients) {}

  static std::string ServerAddress(int client) { return "10.198." + std::to_string(client) + ".1"; }
  static std::string ClientAddress(int client) { return "10.198." + std::to_string(client) + ".2"; }
};

}  // namespace nlockd::integration
