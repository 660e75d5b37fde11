// SPDX-License-Identifier: Apache-2.0
// nlockctl, the real binary, run against an AdminServer over a FakeBackend.
#include "admin/cli.hpp"

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <nlohmann/json.hpp>
#include <sys/socket.h>
#include <unistd.h>

#include "admin/testing/test_server.hpp"
#include "nlockd_build_info.hpp"
#include "testutil/subprocess.hpp"
#include "testutil/temp_dir.hpp"

namespace nlockd::admin {
namespace {

using nlohmann::json;
using testing::TestServer;

struct CtlRun {
  int status;
  std::string output;  // stdout and stderr, merged
};

CtlRun Nlockctl(std::vector<std::string> args) {
  args.insert(args.begin(), NLOCKCTL_BINARY);
  auto [status, output] = testutil::RunCommand(args);
  return {status, output};
}

class NlockctlTest : public ::testing::Test {
 protected:
  CtlRun Ctl(std::vector<std::string> args) {
    args.insert(args.begin(), {"--server", server_.url()});
    return Nlockctl(std::move(args));
  }
  json CtlJson(std::vector<std::string> args) {
    args.insert(args.begin(), "--json");
    const CtlRun run = Ctl(std::move(args));
    EXPECT_EQ(run.status, 0) << run.output;
    return json::parse(run.output);
  }

  TestServer server_;
};

TEST_F(NlockctlTest, Status) {
  const CtlRun run = Ctl({"status"});
  EXPECT_EQ(run.status, kCliOk) << run.output;
  EXPECT_NE(run.output.find("state_number: 7\n"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("server_name: server.example\n"), std::string::npos);
  EXPECT_NE(run.output.find("  mode: fine-grained\n"), std::string::npos);
  EXPECT_NE(run.output.find("  locks: 3\n"), std::string::npos);
  EXPECT_EQ(CtlJson({"status"})["counts"]["registrations"], 3);
}

TEST_F(NlockctlTest, ClientsListShowDelete) {
  const std::string id = MakeRegistrationId("client-a", "localhost", 100021, 1, 16);
  CtlRun run = Ctl({"clients", "list"});
  EXPECT_EQ(run.status, kCliOk) << run.output;
  EXPECT_EQ(run.output.substr(0, run.output.find('\n')),
            "ID                MON_NAME  MY_NAME      PROG    VERS  PROC  FROM");
  EXPECT_NE(run.output.find(id + "  client-a  localhost    100021  1     16    127.0.0.1\n"),
            std::string::npos)
      << run.output;

  run = Ctl({"clients", "list", "--mon-name", "client-b", "--limit", "1"});
  EXPECT_EQ(run.status, kCliOk) << run.output;
  EXPECT_NE(run.output.find("(1 of 2; next: --offset 1)"), std::string::npos) << run.output;
  const json page = CtlJson({"clients", "list", "--my-name", "other-lockd"});
  ASSERT_EQ(page["clients"].size(), 1u);
  EXPECT_EQ(page["clients"][0]["my_prog"], 200001);

  run = Ctl({"clients", "show", id});
  EXPECT_EQ(run.status, kCliOk);
  EXPECT_NE(run.output.find("mon_name: client-a\n"), std::string::npos) << run.output;
  EXPECT_EQ(CtlJson({"clients", "show", id})["id"], id);

  run = Ctl({"clients", "delete", id});
  EXPECT_EQ(run.status, kCliOk);
  EXPECT_EQ(run.output, "deleted registration " + id + "\n");
  run = Ctl({"clients", "show", id});
  EXPECT_EQ(run.status, kCliServerError);
  EXPECT_NE(run.output.find("server answered 404: no registration with id " + id + " (not_found)"),
            std::string::npos)
      << run.output;
}

TEST_F(NlockctlTest, HostsListShowRelease) {
  CtlRun run = Ctl({"hosts", "list"});
  EXPECT_EQ(run.status, kCliOk) << run.output;
  EXPECT_NE(run.output.find("client-a  client-a.example  2      1       0        yes        3"),
            std::string::npos)
      << run.output;
  EXPECT_EQ(CtlJson({"hosts", "list", "--offset", "1"})["hosts"][0]["name"], "client-b");

  run = Ctl({"hosts", "show", "client-a"});
  EXPECT_EQ(run.status, kCliOk);
  EXPECT_NE(run.output.find("name: client-a\n"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("0102ff  client-a  11    313140636c69656e742d61  0       100     yes"),
            std::string::npos)
      << run.output;
  EXPECT_NE(run.output.find("ACCESS"), std::string::npos);
  EXPECT_EQ(CtlJson({"hosts", "show", "client-b"})["waiter_list"][0]["id"], 42);

  run = Ctl({"hosts", "release", "client-a"});
  EXPECT_EQ(run.status, kCliOk);
  EXPECT_EQ(run.output,
            "released 2 locks, 1 shares, 0 waiters of client-a; granted 0 waiting requests\n");
  run = Ctl({"hosts", "show", "nobody"});
  EXPECT_EQ(run.status, kCliServerError);
}

TEST_F(NlockctlTest, HostNamesAreEncoded) {
  HostView odd;
  odd.name = "a/b c";
  server_.backend.AddHost(odd);
  EXPECT_EQ(CtlJson({"hosts", "show", "a/b c"})["name"], "a/b c");
}

TEST_F(NlockctlTest, LocksListWithFilters) {
  CtlRun run = Ctl({"locks", "list"});
  EXPECT_EQ(run.status, kCliOk) << run.output;
  EXPECT_EQ(run.output.substr(0, run.output.find('\n')),
            "FILE    HOST      SVID  OWNER                   OFFSET  LENGTH  EXCL  RECLAIM");
  EXPECT_EQ(CtlJson({"locks", "list", "--host", "client-b"})["total"], 1);
  EXPECT_EQ(CtlJson({"locks", "list", "--file", "0102ff"})["total"], 2);
  run = Ctl({"locks", "list", "--file", "nothex"});
  EXPECT_EQ(run.status, kCliServerError);
  EXPECT_NE(run.output.find("invalid_argument"), std::string::npos);
  EXPECT_EQ(CtlJson({"waiters", "list", "--host", "client-b"})["total"], 1);
}

TEST_F(NlockctlTest, LocksWaitsShowsWhoWaitsOnWhom) {
  const CtlRun run = Ctl({"locks", "waits"});
  EXPECT_EQ(run.status, kCliOk) << run.output;
  EXPECT_EQ(run.output,
            "WAITER  HOST      SVID  FILE    OFFSET  LENGTH  EXCL  WAITS_FOR  SVID  HELD_OFFSET  "
            "HELD_LENGTH  HOLDER_WAITS\n"
            "42      client-b  6     0102ff  0       50      yes   client-a   11    0            "
            "100          -\n");
  const json waiter = CtlJson({"waiters", "list"})["waiters"][0];
  EXPECT_EQ(waiter["blockers"], 1);
  EXPECT_EQ(waiter["blocked_by"][0]["host"], "client-a");
  EXPECT_EQ(waiter["blocked_by"][0]["waiting"], json::array());
}

TEST_F(NlockctlTest, JsonIsAcceptedAfterTheSubcommand) {
  const CtlRun run = Ctl({"status", "--json"});
  EXPECT_EQ(run.status, kCliOk) << run.output;
  EXPECT_EQ(json::parse(run.output)["state_number"], 7);
  const CtlRun list = Ctl({"locks", "list", "--json"});
  EXPECT_EQ(list.status, kCliOk) << list.output;
  EXPECT_TRUE(json::parse(list.output).contains("locks")) << list.output;
}

TEST_F(NlockctlTest, SharesList) {
  const CtlRun run = Ctl({"shares", "list"});
  EXPECT_EQ(run.status, kCliOk) << run.output;
  EXPECT_EQ(run.output.substr(0, run.output.find('\n')).substr(0, 4), "FILE") << run.output;
  EXPECT_TRUE(CtlJson({"shares", "list"}).contains("shares"));
}

TEST(Nlockctl, VersionNamesTheRevision) {
  const CtlRun run = Nlockctl({"--version"});
  EXPECT_EQ(run.status, 0) << run.output;
  EXPECT_EQ(run.output, std::string("nlockctl ") + NLOCKD_BUILD_VERSION + " (revision " +
                            NLOCKD_BUILD_REVISION + ", " + NLOCKD_BUILD_TYPE + " build)\n");
}

TEST_F(NlockctlTest, GraceShowEnd) {
  CtlRun run = Ctl({"grace", "show"});
  EXPECT_EQ(run.status, kCliOk);
  EXPECT_NE(run.output.find("active: yes\n"), std::string::npos) << run.output;
  run = Ctl({"grace", "end"});
  EXPECT_EQ(run.status, kCliOk);
  EXPECT_NE(run.output.find("last_end_reason: admin\n"), std::string::npos) << run.output;
  run = Ctl({"grace", "end"});
  EXPECT_EQ(run.status, kCliServerError);
  EXPECT_NE(run.output.find("409"), std::string::npos);
}

TEST_F(NlockctlTest, Notify) {
  CtlRun run = Ctl({"notify"});
  EXPECT_EQ(run.status, kCliOk);
  EXPECT_EQ(run.output, "queued SM_NOTIFY to 2 hosts\n");
  EXPECT_EQ(CtlJson({"notify", "client-a"})["queued_hosts"], 1);
  EXPECT_EQ(server_.backend.notified(), (std::vector<std::string>{"*", "client-a"}));
  run = Ctl({"notify", "stranger"});
  EXPECT_EQ(run.status, kCliServerError);
}

TEST_F(NlockctlTest, ServiceRelease) {
  CtlRun run = Ctl({"service", "release"});
  EXPECT_EQ(run.status, kCliServerError);
  EXPECT_NE(run.output.find("409"), std::string::npos) << run.output;
  server_.backend.SetHa("nfs-a", 3);
  run = Ctl({"service", "release"});
  EXPECT_EQ(run.status, kCliOk) << run.output;
  EXPECT_EQ(run.output, "releasing service nfs-a (epoch 3): a standby takes it over\n");
  EXPECT_EQ(CtlJson({"service", "release"})["releasing"], true);
  EXPECT_EQ(server_.backend.releases(), 2);
}

TEST_F(NlockctlTest, UsageErrorsExitTwo) {
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{},
                                             {"bogus"},
                                             {"clients"},
                                             {"clients", "show"},
                                             {"hosts", "frobnicate"},
                                             {"service"},
                                             {"locks", "list", "--limit", "many"},
                                             {"status", "extra"}}) {
    const CtlRun run = Ctl(args);
    EXPECT_EQ(run.status, kCliUsage) << run.output;
  }
  const CtlRun run = Nlockctl({"--server", "127.0.0.1:9464", "status"});
  EXPECT_EQ(run.status, kCliUsage);
  EXPECT_NE(run.output.find("http://"), std::string::npos);
}

TEST_F(NlockctlTest, HelpEverywhereExitsZero) {
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"--help"},
                                             {"clients", "--help"},
                                             {"clients", "list", "--help"},
                                             {"hosts", "release", "--help"},
                                             {"locks", "list", "--help"},
                                             {"grace", "--help"},
                                             {"notify", "--help"},
                                             {"service", "release", "--help"}}) {
    const CtlRun run = Nlockctl(args);
    EXPECT_EQ(run.status, kCliOk) << run.output;
    EXPECT_NE(run.output.find("Usage"), std::string::npos) << run.output;
  }
}

TEST(Nlockctl, CannotConnectExitsThree) {
  // A port bound but not listening: nobody else can take it, and connecting is refused.
  const int sock = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(sock, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(sock, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  socklen_t length = sizeof address;
  ASSERT_EQ(::getsockname(sock, reinterpret_cast<sockaddr*>(&address), &length), 0);
  const int port = ntohs(address.sin_port);
  const CtlRun run = Nlockctl({"--server", "http://127.0.0.1:" + std::to_string(port), "status"});
  ::close(sock);
  EXPECT_EQ(run.status, kCliUnreachable) << run.output;
  EXPECT_NE(run.output.find("cannot reach"), std::string::npos) << run.output;
}

TEST(Nlockctl, ServerAndTokenComeFromTheEnvironment) {
  AdminServerOptions options;
  options.token = "tok";
  TestServer server(options);
  auto [status, output] =
      testutil::RunCommand({"/usr/bin/env", "NLOCKCTL_SERVER=" + server.url(), "NLOCKCTL_TOKEN=tok",
                            NLOCKCTL_BINARY, "--json", "grace", "show"});
  EXPECT_EQ(status, 0) << output;
  EXPECT_EQ(json::parse(output)["active"], true);

  // A flag overrides the environment: the wrong token is refused.
  std::tie(status, output) =
      testutil::RunCommand({"/usr/bin/env", "NLOCKCTL_SERVER=" + server.url(), "NLOCKCTL_TOKEN=tok",
                            NLOCKCTL_BINARY, "--token", "bad", "status"});
  EXPECT_EQ(status, kCliServerError);
  EXPECT_NE(output.find("401"), std::string::npos) << output;
}

TEST(Nlockctl, TheTokenComesFromAFileNamedByFlagOrEnvironment) {
  AdminServerOptions options;
  options.token = "file-token";
  TestServer server(options);
  testutil::TempDir temp_dir("nlockctl-token");
  const std::string& directory = temp_dir.path();
  { std::ofstream(directory + "/admin-token") << "file-token\n"; }

  auto [status, output] =
      testutil::RunCommand({NLOCKCTL_BINARY, "--server", server.url(), "--token-file",
                            directory + "/admin-token", "--json", "grace", "show"});
  EXPECT_EQ(status, kCliOk) << output;
  // A relative NLOCKCTL_TOKEN_FILE is looked up in systemd's credentials directory, and wins
  // over NLOCKCTL_TOKEN.
  std::tie(status, output) =
      testutil::RunCommand({"/usr/bin/env", "NLOCKCTL_SERVER=" + server.url(),
                            "NLOCKCTL_TOKEN=wrong", "NLOCKCTL_TOKEN_FILE=admin-token",
                            "CREDENTIALS_DIRECTORY=" + directory, NLOCKCTL_BINARY, "status"});
  EXPECT_EQ(status, kCliOk) << output;
  // A file that cannot be read is a usage error, and names the file.
  std::tie(status, output) = testutil::RunCommand(
      {NLOCKCTL_BINARY, "--server", server.url(), "--token-file", directory + "/absent", "status"});
  EXPECT_EQ(status, kCliUsage) << output;
  EXPECT_NE(output.find(directory + "/absent"), std::string::npos) << output;
  // --token and --token-file together are refused.
  std::tie(status, output) =
      testutil::RunCommand({NLOCKCTL_BINARY, "--server", server.url(), "--token", "x",
                            "--token-file", directory + "/admin-token", "status"});
  EXPECT_EQ(status, kCliUsage) << output;
  std::filesystem::remove_all(directory);
}

}  // namespace
}  // namespace nlockd::admin
