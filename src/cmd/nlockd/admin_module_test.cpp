// SPDX-License-Identifier: Apache-2.0
#include "cmd/nlockd/admin_module.hpp"

#include <atomic>
#include <string>
#include <vector>

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

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

// One HTTP/1.0 request over a plain socket: the reply's whole text.
std::string Get(uint16_t port, const std::string& target) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string reply;
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0) {
    const std::string request = "GET " + target + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    if (write(fd, request.data(), request.size()) == static_cast<ssize_t>(request.size())) {
      char buffer[4096];
      for (ssize_t n; (n = read(fd, buffer, sizeof buffer)) > 0;) {
        reply.append(buffer, static_cast<size_t>(n));
      }
    }
  }
  close(fd);
  return reply;
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
  const std::string reply = Get(server->port(), "/api/v1/status");
  EXPECT_NE(reply.find(" 200 "), std::string::npos) << reply;
  EXPECT_NE(reply.find("seen /api/v1/status"), std::string::npos) << reply;
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
