// SPDX-License-Identifier: Apache-2.0
// The real nlockd binary: configuration checks, --version, systemd notifications, SIGHUP.
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <httplib.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "nlockd_build_info.hpp"
#include "testutil/notify_socket.hpp"
#include "testutil/subprocess.hpp"

namespace {

using nlockd::testutil::RunCommand;
using nlockd::testutil::Subprocess;
using std::chrono::seconds;

// A scratch directory removed at the end of the test.
class TempDir {
 public:
  TempDir() {
    char path[] = "/tmp/nlockd-daemon-test-XXXXXX";
    path_ = mkdtemp(path);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string File(const std::string& name, const std::string& text, mode_t mode = 0600) const {
    std::string path = path_ + "/" + name;
    std::ofstream(path) << text;
    chmod(path.c_str(), mode);
    return path;
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::vector<std::string> Daemon(std::vector<std::string> args) {
  std::vector<std::string> argv{
      NLOCKD_BINARY, "--store",        "memory:",     "--listen",
      "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--rpcbind-register",
      "false"};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

TEST(NlockdDaemon, VersionNamesRevisionAndBuildType) {
  auto [status, output] = RunCommand({NLOCKD_BINARY, "--version"});
  EXPECT_EQ(status, 0);
  EXPECT_EQ(output, std::string("nlockd ") + NLOCKD_BUILD_VERSION + " (revision " +
                        NLOCKD_BUILD_REVISION + ", " + NLOCKD_BUILD_TYPE + " build)\n");
}

TEST(NlockdDaemon, BadFlagValuesAreRefusedBeforeStarting) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {{"--max-connections", "0"}, "rpc.max_connections = 0 is out of range 1..1048576"},
           {{"--max-record-size", "0"}, "rpc.max_record_size = 0 is out of range"},
           {{"--idle-timeout", "-5"}, "rpc.idle_timeout = -5 is out of range 1..86400"},
           {{"--store", "memory:extra"}, "memory: takes nothing after the colon"},
           {{"--rpcbind-host", "not-an-ip"}, "rpcbind host 'not-an-ip' is not an IP address"}}) {
    std::vector<std::string> argv{NLOCKD_BINARY};
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    auto [status, output] = RunCommand(argv);
    EXPECT_EQ(status, 1) << c.args[0] << ": " << output;
    EXPECT_NE(output.find(c.message), std::string::npos) << output;
    EXPECT_EQ(output.find("listening"), std::string::npos) << output;

    argv.push_back("--check-config");
    auto [check_status, check_output] = RunCommand(argv);
    EXPECT_EQ(check_status, 1) << check_output;
    EXPECT_NE(check_output.find(c.message), std::string::npos) << check_output;
  }
}

TEST(NlockdDaemon, CheckConfigPrintsTheEffectiveConfigurationRedacted) {
  TempDir dir;
  std::string config = dir.File("nlockd.toml",
                                "store = \"postgresql://nlockd:hunter2@db.example/nlockd\"\n"
                                "[admin]\ntoken = \"t0ps3cret\"\n[rpc]\nidle_timeout = 30\n");
  auto [status, output] =
      RunCommand({NLOCKD_BINARY, "--config", config, "--check-config", "--max-connections", "7"});
  EXPECT_EQ(status, 0) << output;
  EXPECT_NE(output.find("store = \"postgresql://nlockd:REDACTED@db.example/nlockd\"\n"),
            std::string::npos)
      << output;
  EXPECT_NE(output.find("token = \"REDACTED\"\n"), std::string::npos) << output;
  EXPECT_NE(output.find("idle_timeout = 30\n"), std::string::npos) << output;
  EXPECT_NE(output.find("max_connections = 7\n"), std::string::npos) << output;
  EXPECT_EQ(output.find("hunter2"), std::string::npos) << output;
  EXPECT_EQ(output.find("t0ps3cret"), std::string::npos) << output;

  std::string bad = dir.File("bad.toml", "grace = 1\nnotify = 5\n");
  auto [bad_status, bad_output] = RunCommand({NLOCKD_BINARY, "--config", bad, "--check-config"});
  EXPECT_EQ(bad_status, 1);
  EXPECT_NE(bad_output.find("bad.toml:2: config key notify must be a table ([notify]), not an "
                            "integer"),
            std::string::npos)
      << bad_output;
  std::string syntax = dir.File("syntax.toml", "grace = 1\n\n[rpc\n");
  auto [syntax_status, syntax_output] =
      RunCommand({NLOCKD_BINARY, "--config", syntax, "--check-config"});
  EXPECT_EQ(syntax_status, 1);
  EXPECT_NE(syntax_output.find("syntax.toml:3:"), std::string::npos) << syntax_output;
}

TEST(NlockdDaemon, StorePasswordIsNotLogged) {
  Subprocess daemon({NLOCKD_BINARY, "--store", "postgresql://nlockd:hunter2@127.0.0.1:1/none",
                     "--listen", "127.0.0.1:0", "--admin-listen", "off", "--rpcbind-register",
                     "false"});
  EXPECT_TRUE(daemon.Wait(seconds(30)).has_value());
  EXPECT_EQ(daemon.output().find("hunter2"), std::string::npos) << daemon.output();
  EXPECT_NE(daemon.output().find("nlockd:REDACTED@"), std::string::npos) << daemon.output();
}

TEST(NlockdDaemon, TokenFileReadableByOthersIsRefused) {
  TempDir dir;
  std::string token = dir.File("token", "s3cret\n", 0644);
  auto [status, output] = RunCommand(Daemon({"--admin-token-file", token}));
  EXPECT_EQ(status, 1);
  EXPECT_NE(output.find("may be read by group or others"), std::string::npos) << output;
}

TEST(NlockdDaemon, TellsSystemdReadyStatusWatchdogAndStopping) {
  TempDir dir;
  std::string socket_path = dir.path() + "/notify";
  nlockd::testutil::NotifySocket notify(socket_path);
  std::vector<std::string> argv{"/usr/bin/env", "NOTIFY_SOCKET=" + socket_path,
                                "WATCHDOG_USEC=400000"};
  for (auto& arg : Daemon({"--grace", "60"})) argv.push_back(arg);
  Subprocess daemon(argv);
  ASSERT_TRUE(daemon.WaitForLine(std::regex("nlockd listening"), seconds(20))) << daemon.output();

  std::string ready = notify.WaitFor("READY=1", seconds(10));
  ASSERT_FALSE(ready.empty()) << daemon.output();
  // A memory store restarts into a classic grace period; STATUS= says so.
  EXPECT_NE(ready.find("STATUS=grace classic"), std::string::npos) << ready;
  // Pings at half the watchdog interval, each after a status read on the lock executor.
  EXPECT_FALSE(notify.WaitFor("WATCHDOG=1", seconds(5)).empty());
  EXPECT_FALSE(notify.WaitFor("WATCHDOG=1", seconds(5)).empty());

  EXPECT_EQ(daemon.Stop(SIGTERM, seconds(20)), 0) << daemon.output();
  std::string stopping = notify.WaitFor("STOPPING=1", seconds(5));
  EXPECT_FALSE(stopping.empty());
}

TEST(NlockdDaemon, SighupReloadsLogLevelAndTokenAndNamesKeysNeedingARestart) {
  TempDir dir;
  std::string token = dir.File("token", "first-token\n");
  std::string config_text =
      "log_level = \"info\"\ngrace = 0\n[admin]\ntoken_file = \"" + token + "\"\n";
  std::string config = dir.File("nlockd.toml", config_text);
  Subprocess daemon(Daemon({"--config", config}));
  auto admin = daemon.WaitForLine(std::regex(R"(nlockd admin listening address=\S+ port=(\d+))"),
                                  seconds(20));
  ASSERT_TRUE(admin) << daemon.output();
  int port = std::stoi((*admin)[1]);
  ASSERT_TRUE(daemon.WaitForLine(std::regex("nlockd listening"), seconds(20)));
  httplib::Client client("127.0.0.1", port);
  auto status_with = [&](const std::string& bearer) {
    httplib::Headers headers{{"Authorization", "Bearer " + bearer}};
    auto result = client.Get("/api/v1/status", headers);
    return result ? result->status : -1;
  };
  EXPECT_EQ(status_with("first-token"), 200);

  dir.File("token", "second-token\n");
  dir.File("nlockd.toml",
           "log_level = \"debug\"\ngrace = 5\n[admin]\ntoken_file = \"" + token + "\"\n");
  ASSERT_EQ(kill(daemon.pid(), SIGHUP), 0);
  auto reloaded = daemon.WaitForLine(
      std::regex(R"(nlockd reloaded config=\S+ applied=(\S+) needs_restart=(\S+))"), seconds(10));
  ASSERT_TRUE(reloaded) << daemon.output();
  EXPECT_EQ((*reloaded)[1], "log_level,admin.token");
  EXPECT_EQ((*reloaded)[2], "grace");
  EXPECT_EQ(status_with("first-token"), 401);
  EXPECT_EQ(status_with("second-token"), 200);

  // A file that no longer loads changes nothing, and the daemon runs on.
  dir.File("nlockd.toml", "log_level = \"loud\"\n");
  ASSERT_EQ(kill(daemon.pid(), SIGHUP), 0);
  ASSERT_TRUE(daemon.WaitForLine(std::regex("nlockd reload failed"), seconds(10)))
      << daemon.output();
  EXPECT_EQ(status_with("second-token"), 200);
  EXPECT_EQ(daemon.Stop(SIGTERM, seconds(20)), 0) << daemon.output();
}

TEST(NlockdDaemon, AdminWritesNeedATokenUnlessOpened) {
  struct Case {
    std::vector<std::string> args;
    std::string bearer;
    int grace_end_status;
  };
  // 409: allowed, and there is no grace period to end.
  for (const Case& c : std::vector<Case>{{{}, "", 403},
                                         {{"--admin-open-writes", "false"}, "", 403},
                                         {{"--admin-open-writes", "true"}, "", 409},
                                         {{"--admin-token", "tok"}, "tok", 409},
                                         {{"--admin-token", "tok"}, "", 401}}) {
    std::vector<std::string> args{"--grace", "0"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    Subprocess daemon(Daemon(args));
    auto admin = daemon.WaitForLine(std::regex(R"(nlockd admin listening address=\S+ port=(\d+))"),
                                    seconds(20));
    ASSERT_TRUE(admin) << daemon.output();
    int port = std::stoi((*admin)[1]);  // Before the output (which the match points into) grows.
    ASSERT_TRUE(daemon.WaitForLine(std::regex("nlockd listening"), seconds(20)));
    httplib::Client client("127.0.0.1", port);
    httplib::Headers headers;
    if (!c.bearer.empty()) headers.emplace("Authorization", "Bearer " + c.bearer);
    auto ended = client.Post("/api/v1/grace/end", headers, "", "application/json");
    ASSERT_TRUE(ended);
    EXPECT_EQ(ended->status, c.grace_end_status) << ended->body;
    // Reads stay open without a token; /healthz always.
    auto metrics = client.Get("/metrics", headers);
    ASSERT_TRUE(metrics);
    EXPECT_EQ(metrics->status, c.grace_end_status == 401 ? 401 : 200);
    auto health = client.Get("/healthz");
    ASSERT_TRUE(health);
    EXPECT_EQ(health->status, 200);
  }
}

}  // namespace
