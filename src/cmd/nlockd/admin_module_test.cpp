// SPDX-License-Identifier: Apache-2.0
#include "cmd/nlockd/admin_module.hpp"

#include <atomic>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <httplib.h>

namespace nlockd::cmd {
namespace {

TEST(AdminModule, LooksBesideTheExecutableThenRelativeToItThenInTheInstalledDirectory) {
  EXPECT_EQ(AdminModuleCandidates("/opt/nlockd/sbin/nlockd", "../lib/nlockd",
                                  "/usr/lib/x86_64-linux-gnu/nlockd"),
            (std::vector<std::string>{"/opt/nlockd/sbin/nlockd-admin-http.so",
                                      "/opt/nlockd/lib/nlockd/nlockd-admin-http.so",
                                      "/usr/lib/x86_64-linux-gnu/nlockd/nlockd-admin-http.so"}));
  // /proc/self/exe unreadable: the installed directory only.
  EXPECT_EQ(AdminModuleCandidates("", "../lib/nlockd", "/usr/lib/nlockd"),
            (std::vector<std::string>{"/usr/lib/nlockd/nlockd-admin-http.so"}));
}

// The module built beside this test (as beside the daemon) loads, and its server answers
// through the handler it was given.
TEST(AdminModule, LoadsTheModuleAndServesTheHandler) {
  std::atomic<int> calls{0};
  auto server = LoadAdminHttpServer([&calls](const admin::HttpRequest& request) {
    ++calls;
    return admin::HttpResponse{200, "text/plain", "seen " + request.target, {}};
  });
  ASSERT_NE(server, nullptr);
  server->Start("127.0.0.1", 0);
  ASSERT_NE(server->port(), 0);
  httplib::Client client("127.0.0.1", server->port());
  const auto reply = client.Get("/api/v1/status");
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 200);
  EXPECT_EQ(reply->body, "seen /api/v1/status");
  EXPECT_EQ(calls.load(), 1);
  server->Stop();
  // A second server comes from the module already loaded.
  auto again = LoadAdminHttpServer([](const admin::HttpRequest&) {
    return admin::HttpResponse{204, "text/plain", "", {}};
  });
  ASSERT_NE(again, nullptr);
}

}  // namespace
}  // namespace nlockd::cmd
