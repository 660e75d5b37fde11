// SPDX-License-Identifier: Apache-2.0
// The real nlockd binary: configuration checks, --version, systemd notifications, SIGHUP.
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "nlockd_build_info.hpp"
#include "testutil/loopback_socket.hpp"
#include "testutil/notify_socket.hpp"
#include "testutil/subprocess.hpp"
#include "testutil/temp_dir.hpp"

namespace {

using nlockd::testutil::RunCommand;
using nlockd::testutil::Subprocess;
using std::chrono::seconds;

// A test's scratch directory: the files it writes for the daemon to read.
class ScratchDir : public nlockd::testutil::TempDir {
 public:
  ScratchDir() : nlockd::testutil::TempDir("daemon-test") {}
  // Writes `text` to the file `name` with `mode`; returns its path.
  std::string File(const std::string& name, const std::string& text, mode_t mode = 0600) const {
    std::string file = path() + "/" + name;
    std::ofstream(file) << text;
    chmod(file.c_str(), mode);
    return file;
  }
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
    EXPECT_EQ(status, 78) << c.args[0] << ": " << output;
    EXPECT_NE(output.find(c.message), std::string::npos) << output;
    EXPECT_EQ(output.find("listening"), std::string::npos) << output;

    argv.push_back("--check-config");
    auto [check_status, check_output] = RunCommand(argv);
    EXPECT_EQ(check_status, 78) << check_output;
    EXPECT_NE(check_output.find(c.message), std::string::npos) << check_output;
  }
}

TEST(NlockdDaemon, CheckConfigPrintsTheEffectiveConfigurationRedacted) {
  ScratchDir dir;
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
  EXPECT_EQ(bad_status, 78);
  EXPECT_NE(bad_output.find("bad.toml:2: config key notify must be a table ([notify]), not an "
                            "integer"),
            std::string::npos)
      << bad_output;
  std::string syntax = dir.File("syntax.toml", "grace = 1\n\n[rpc\n");
  auto [syntax_status, syntax_output] =
      RunCommand({NLOCKD_BINARY, "--config", syntax, "--check-config"});
  EXPECT_EQ(syntax_status, 78);
  EXPECT_NE(syntax_output.find("syntax.toml:3:"), std::string::npos) << syntax_output;
}

// nfs.conf lies beneath nlockd.toml and the flags, and --check-config says what it decided.
TEST(NlockdDaemon, NfsConfValuesApplyBeneathTheConfigFileAndTheFlags) {
  ScratchDir dir;
  std::string nfs_conf = dir.File("nfs.conf",
                                  "[statd]\n"
                                  "port = 662\n"
                                  "outgoing-port = 2020\n"
                                  "state-directory-path = /var/lib/nfs\n"
                                  "name = from-nfs-conf\n"
                                  "[lockd]\n"
                                  "port = 32803\n");
  std::string config = dir.File("nlockd.toml", "nfs_conf = \"" + nfs_conf +
                                                   "\"\nname = \"from-toml\"\n"
                                                   "admin_listen = \"off\"\n");
  auto [status, output] = RunCommand(
      {NLOCKD_BINARY, "--config", config, "--check-config", "--callback-source-port", "3030"});
  ASSERT_EQ(status, 0) << output;
  EXPECT_NE(output.find("# from nfs.conf: nsm_listen (" + nfs_conf + ":2)"), std::string::npos)
      << output;
  EXPECT_NE(output.find("nsm_listen = \"0.0.0.0:662\"\n"), std::string::npos) << output;
  EXPECT_NE(output.find("# from nfs.conf: statd.state_directory (" + nfs_conf + ":4)"),
            std::string::npos)
      << output;
  // The file and the flags win, and nfs.conf is not named for what they decided.
  EXPECT_NE(output.find("name = \"from-toml\"\n"), std::string::npos) << output;
  EXPECT_NE(output.find("callback_source_port = 3030\n"), std::string::npos) << output;
  EXPECT_EQ(output.find("# from nfs.conf: name"), std::string::npos) << output;
  EXPECT_EQ(output.find("# from nfs.conf: callback_source_port"), std::string::npos) << output;
  // Serving NSM, [lockd] is the kernel's.
  EXPECT_NE(output.find("listen = \"0.0.0.0:4045\"\n"), std::string::npos) << output;

  auto [nlm_status, nlm_output] =
      RunCommand({NLOCKD_BINARY, "--config", config, "--check-config", "--serve", "nlm"});
  ASSERT_EQ(nlm_status, 0) << nlm_output;
  EXPECT_NE(nlm_output.find("# from nfs.conf: listen (" + nfs_conf + ":7)"), std::string::npos)
      << nlm_output;
  EXPECT_NE(nlm_output.find("listen = \"0.0.0.0:32803\"\n"), std::string::npos) << nlm_output;
  EXPECT_EQ(nlm_output.find("# from nfs.conf: nsm_listen"), std::string::npos) << nlm_output;

  std::string bad = dir.File("bad-nfs.conf", "[statd]\noutgoing-port = 99999\n");
  auto [bad_status, bad_output] = RunCommand({NLOCKD_BINARY, "--nfs-conf", bad, "--check-config"});
  EXPECT_EQ(bad_status, 78) << bad_output;
  EXPECT_NE(bad_output.find(bad + ":2: [statd] outgoing-port"), std::string::npos) << bad_output;
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
  ScratchDir dir;
  std::string token = dir.File("token", "s3cret\n", 0644);
  auto [status, output] = RunCommand(Daemon({"--admin-token-file", token}));
  EXPECT_EQ(status, 78);
  EXPECT_NE(output.find("may be read by group or others"), std::string::npos) << output;
}

TEST(NlockdDaemon, TellsSystemdReadyStatusWatchdogAndStopping) {
  ScratchDir dir;
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

// systemd's notification socket in the abstract namespace, as NOTIFY_SOCKET="@name" names it:
// the name's bytes after a NUL, without one at the end.
class AbstractNotifySocket {
 public:
  AbstractNotifySocket() : fd_(socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0)) {
    name_ = fmt::format("nlockd-daemon-test-{}-{}", getpid(), reinterpret_cast<uintptr_t>(this));
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    name_.copy(address.sun_path + 1, name_.size());
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&address),
                   static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name_.size())),
              0)
        << std::strerror(errno);
  }
  ~AbstractNotifySocket() { close(fd_); }
  AbstractNotifySocket(const AbstractNotifySocket&) = delete;
  AbstractNotifySocket& operator=(const AbstractNotifySocket&) = delete;

  std::string variable() const { return "NOTIFY_SOCKET=@" + name_; }
  // The next datagram ("" when none comes within `timeout`).
  std::string Next(std::chrono::milliseconds timeout) const {
    pollfd ready{fd_, POLLIN, 0};
    if (poll(&ready, 1, static_cast<int>(timeout.count())) <= 0) return "";
    char buffer[4096];
    const ssize_t n = recv(fd_, buffer, sizeof buffer, 0);
    return n > 0 ? std::string(buffer, static_cast<size_t>(n)) : "";
  }

 private:
  const int fd_;
  std::string name_;
};

TEST(NlockdDaemon, TellsSystemdThroughAnAbstractSocket) {
  AbstractNotifySocket notify;
  std::vector<std::string> argv{"/usr/bin/env", notify.variable()};
  for (auto& arg : Daemon({"--grace", "0"})) argv.push_back(arg);
  Subprocess daemon(argv);
  std::string ready = notify.Next(std::chrono::milliseconds(20000));
  EXPECT_NE(ready.find("READY=1\nSTATUS="), std::string::npos) << ready << daemon.output();
  EXPECT_EQ(daemon.Stop(SIGTERM, seconds(20)), 0) << daemon.output();
  EXPECT_NE(notify.Next(std::chrono::milliseconds(5000)).find("STOPPING=1"), std::string::npos);
}

// WATCHDOG_PID names the process systemd watches: a daemon that inherited the variables from
// another process (a wrapper that forked it) must not ping for that one.
TEST(NlockdDaemon, PingsTheWatchdogOnlyWhenWatchdogPidNamesItself) {
  ScratchDir dir;
  {
    nlockd::testutil::NotifySocket notify(dir.path() + "/notify");
    std::vector<std::string> argv{"/usr/bin/env", "NOTIFY_SOCKET=" + dir.path() + "/notify",
                                  "WATCHDOG_USEC=200000", "WATCHDOG_PID=1"};
    for (auto& arg : Daemon({"--grace", "0"})) argv.push_back(arg);
    Subprocess daemon(argv);
    ASSERT_FALSE(notify.WaitFor("READY=1", seconds(20)).empty()) << daemon.output();
    // Ten of the pings' 100 ms intervals: none of them may come.
    EXPECT_EQ(notify.WaitFor("WATCHDOG=1", std::chrono::milliseconds(1000)), "");
    EXPECT_EQ(daemon.Stop(SIGTERM, seconds(20)), 0) << daemon.output();
  }
  {
    // The shell's pid is the daemon's after the exec.
    nlockd::testutil::NotifySocket notify(dir.path() + "/notify-own");
    std::vector<std::string> argv{"/bin/sh",
                                  "-c",
                                  "exec /usr/bin/env WATCHDOG_PID=$$ \"$@\"",
                                  "sh",
                                  "NOTIFY_SOCKET=" + dir.path() + "/notify-own",
                                  "WATCHDOG_USEC=200000"};
    for (auto& arg : Daemon({"--grace", "0"})) argv.push_back(arg);
    Subprocess daemon(argv);
    ASSERT_FALSE(notify.WaitFor("READY=1", seconds(20)).empty()) << daemon.output();
    EXPECT_FALSE(notify.WaitFor("WATCHDOG=1", seconds(5)).empty()) << daemon.output();
    EXPECT_EQ(daemon.Stop(SIGTERM, seconds(20)), 0) << daemon.output();
  }
}

// Malformed variables leave systemd untold (a relative socket path) or without a watchdog (a
// WATCHDOG_USEC that is not a positive number), and the daemon runs as usual.
TEST(NlockdDaemon, IgnoresUnusableNotifyVariables) {
  ScratchDir dir;
  nlockd::testutil::NotifySocket notify(dir.path() + "/notify");
  std::vector<std::string> argv{"/usr/bin/env", "NOTIFY_SOCKET=" + dir.path() + "/notify",
                                "WATCHDOG_USEC=-200000"};
  for (auto& arg : Daemon({"--grace", "0"})) argv.push_back(arg);
  Subprocess daemon(argv);
  ASSERT_FALSE(notify.WaitFor("READY=1", seconds(20)).empty()) << daemon.output();
  EXPECT_EQ(notify.WaitFor("WATCHDOG=1", std::chrono::milliseconds(1000)), "");
  EXPECT_EQ(daemon.Stop(SIGTERM, seconds(20)), 0) << daemon.output();

  Subprocess relative({"/usr/bin/env", "NOTIFY_SOCKET=notify", NLOCKD_BINARY, "--store",
                       "memory:", "--listen", "127.0.0.1:0", "--admin-listen", "off",
                       "--rpcbind-register", "false", "--grace", "0"});
  EXPECT_TRUE(relative.WaitForLine(std::regex("NOTIFY_SOCKET=notify is neither"), seconds(20)))
      << relative.output();
  ASSERT_TRUE(relative.LoggedOrWaitFor(std::regex("nlockd listening"))) << relative.output();
  EXPECT_EQ(relative.Stop(SIGTERM, seconds(20)), 0) << relative.output();
}

// A portmapper on 127.0.0.1 (UDP) that speaks version 2 only: it refuses rpcbind v3/v4
// (PROG_MISMATCH), answers GETPORT with 0 (nothing registered) and every SET with TRUE, the
// first SET after `first_set_delay`, so that registering takes that long.
class SlowPortmapper {
 public:
  explicit SlowPortmapper(std::chrono::milliseconds first_set_delay) : delay_(first_set_delay) {
    const nlockd::testutil::LoopbackSocket bound = nlockd::testutil::BindLoopback(SOCK_DGRAM);
    fd_ = bound.fd;
    port_ = bound.port;
    thread_ = std::thread([this] { Serve(); });
  }
  ~SlowPortmapper() {
    stop_ = true;
    thread_.join();
    close(fd_);
  }
  SlowPortmapper(const SlowPortmapper&) = delete;
  SlowPortmapper& operator=(const SlowPortmapper&) = delete;

  uint16_t port() const { return port_; }
  // Distinct SET calls answered so far.
  int sets_answered() const { return sets_answered_.load(); }

 private:
  static uint32_t Word(const uint8_t* at) {
    uint32_t word = 0;
    std::memcpy(&word, at, 4);
    return ntohl(word);
  }
  static void Put(std::vector<uint8_t>& out, uint32_t word) {
    word = htonl(word);
    const auto* bytes = reinterpret_cast<const uint8_t*>(&word);
    out.insert(out.end(), bytes, bytes + 4);
  }

  void Serve() {
    uint8_t call[8192];
    while (!stop_) {
      pollfd ready{fd_, POLLIN, 0};
      if (poll(&ready, 1, 50) <= 0) continue;
      sockaddr_in from{};
      socklen_t from_length = sizeof from;
      const ssize_t n =
          recvfrom(fd_, call, sizeof call, 0, reinterpret_cast<sockaddr*>(&from), &from_length);
      if (n < 24) continue;
      // xid, CALL, rpcvers 2, prog, vers, proc (RFC 5531).
      const uint32_t version = Word(call + 16);
      const uint32_t procedure = Word(call + 20);
      std::vector<uint8_t> reply;
      Put(reply, Word(call));  // xid
      Put(reply, 1);           // REPLY
      Put(reply, 0);           // MSG_ACCEPTED
      Put(reply, 0);           // verifier AUTH_NONE
      Put(reply, 0);
      if (version != 2) {
        Put(reply, 2);  // PROG_MISMATCH, versions 2 to 2
        Put(reply, 2);
        Put(reply, 2);
      } else {
        Put(reply, 0);  // SUCCESS
        const bool set = procedure == 1;
        if (set && !delayed_) {
          delayed_ = true;
          std::this_thread::sleep_for(delay_);
        }
        // SET, UNSET: TRUE; GETPORT: port 0; DUMP: an empty list.
        Put(reply, procedure == 1 || procedure == 2 ? 1 : 0);
        // Retransmissions of a delayed SET count once.
        if (set && set_xids_.insert(Word(call)).second) ++sets_answered_;
      }
      sendto(fd_, reply.data(), reply.size(), 0, reinterpret_cast<sockaddr*>(&from), from_length);
    }
  }

  const std::chrono::milliseconds delay_;
  int fd_ = -1;
  uint16_t port_ = 0;
  bool delayed_ = false;
  std::set<uint32_t> set_xids_;
  std::atomic<bool> stop_{false};
  std::atomic<int> sets_answered_{0};
  std::thread thread_;
};

TEST(NlockdDaemon, TellsSystemdReadyOnlyOnceRpcbindHoldsItsRegistrations) {
  // Registering takes a second (within the 2 s that readiness waits at most).
  SlowPortmapper portmapper(std::chrono::milliseconds(1000));
  ScratchDir dir;
  std::string socket_path = dir.path() + "/notify";
  nlockd::testutil::NotifySocket notify(socket_path);
  Subprocess daemon({"/usr/bin/env", "NOTIFY_SOCKET=" + socket_path, NLOCKD_BINARY, "--store",
                     "memory:", "--listen", "127.0.0.1:0", "--admin-listen", "off",
                     "--rpcbind-host", "127.0.0.1", "--rpcbind-port",
                     std::to_string(portmapper.port())});
  std::string ready = notify.WaitFor("READY=1", seconds(20));
  ASSERT_FALSE(ready.empty()) << daemon.output();
  // NLM versions 1, 3, 4 and NSM version 1, over TCP and UDP: all eight held when READY=1 came.
  EXPECT_EQ(portmapper.sets_answered(), 8) << daemon.output();
  EXPECT_TRUE(
      daemon.WaitForLine(std::regex("registered 4 programs with rpcbind at 127.0.0.1"), seconds(5)))
      << daemon.output();
  EXPECT_EQ(daemon.Stop(SIGTERM, seconds(20)), 0) << daemon.output();
}

TEST(NlockdDaemon, SighupReloadsLogLevelAndTokenAndNamesKeysNeedingARestart) {
  ScratchDir dir;
  std::string token = dir.File("token", "first-token\n");
  std::string config_text =
      "log_level = \"info\"\ngrace = 0\n[admin]\ntoken_file = \"" + token + "\"\n";
  std::string config = dir.File("nlockd.toml", config_text);
  Subprocess daemon(Daemon({"--config", config}));
  auto admin = daemon.WaitForLine(std::regex(R"(nlockd admin listening" address=\S+ port=(\d+))"),
                                  seconds(20));
  ASSERT_TRUE(admin) << daemon.output();
  int port = std::stoi((*admin)[1]);
  ASSERT_TRUE(daemon.LoggedOrWaitFor(std::regex("nlockd listening"), seconds(20)));
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
      std::regex(R"(nlockd reloaded" config=\S+ applied=(\S+) needs_restart=(\S+))"), seconds(10));
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
    auto admin = daemon.WaitForLine(std::regex(R"(nlockd admin listening" address=\S+ port=(\d+))"),
                                    seconds(20));
    ASSERT_TRUE(admin) << daemon.output();
    int port = std::stoi((*admin)[1]);  // Before the output (which the match points into) grows.
    ASSERT_TRUE(daemon.LoggedOrWaitFor(std::regex("nlockd listening"), seconds(20)));
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

// A TCP port free on loopback a moment ago.
uint16_t FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address);
  socklen_t length = sizeof address;
  getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  close(fd);
  return ntohs(address.sin_port);
}

// Every refusal the daemon makes from its settings alone is made by --check-config too, with
// the same exit status and message: each case runs once with --check-config and once as a
// start, which must stop before listening. (Settings only: a port another process holds or an
// unreachable database fail the start alone, with status 1.)
TEST(NlockdDaemon, CheckConfigRefusesWhatAStartRefuses) {
  ScratchDir dir;
  std::string open_token = dir.File("open-token", "t0ken\n", 0644);
  std::string open_password = dir.File("open-password", "pw\n", 0640);
  std::string bad_config = dir.File("bad.toml", "grace = 1\nbogus = 2\n");
  const std::string port = std::to_string(FreePort());
  struct Case {
    std::vector<std::string> env;  // NAME=VALUE
    std::vector<std::string> args;
    int status;
    std::string message;
  };
  const std::vector<Case> cases = {
      // Settings that contradict each other.
      {{}, {"--ha", "true"}, 78, "ha needs a PostgreSQL store (postgresql://...), not 'memory:'"},
      {{},
       {"--store", "postgresql://nlockd@127.0.0.1:1/none", "--name", "two words"},
       78,
       "invalid store node id 'two words'"},
      {{},
       {"--listen", "127.0.0.1:" + port, "--admin-listen", "127.0.0.1:" + port},
       78,
       "listen (127.0.0.1:" + port + ") and admin_listen (127.0.0.1:" + port +
           ") would listen on the same port"},
      {{},
       {"--listen", "127.0.0.1:" + port, "--nsm-listen", "0.0.0.0:" + port},
       78,
       "would listen on the same port"},
      // The admin API exposed without a token.
      {{}, {"--admin-listen", "0.0.0.0:0"}, 78, "is not a loopback address and the admin API"},
      {{},
       {"--admin-listen", "0.0.0.0:0", "--admin-open-writes", "true"},
       78,
       "with admin.open_writes, drop them"},
      // Secret files.
      {{}, {"--admin-token-file", open_token}, 78, "may be read by group or others (mode 644)"},
      {{},
       {"--store", "postgresql://nlockd@127.0.0.1:1/none", "--store-password-file", open_password},
       78,
       "may be read by group or others (mode 640)"},
      {{}, {"--admin-token-file", dir.path() + "/none"}, 78, "cannot read secret file"},
      // Single values: flags, environment and file.
      {{}, {"--max-connections", "0"}, 78, "rpc.max_connections = 0 is out of range"},
      {{}, {"--listen", "localhost:4045"}, 78, "'localhost' is not an IP address"},
      {{},
       {"--store", "postgresql://nlockd:pw@[::1/none"},
       78,
       "store 'postgresql://nlockd:REDACTED@[::1/none' is not a valid PostgreSQL connection "
       "URI"},
      {{}, {"--grace", "soon"}, 78, "'soon' is not an integer"},
      {{"NLOCKD_GRACE=3601"}, {}, 78, "environment NLOCKD_GRACE: grace = 3601 is out of range"},
      {{"NLOCKD_HA=true"}, {}, 78, "ha needs a PostgreSQL store"},
      {{}, {"--config", bad_config}, 78, "bad.toml:2: unknown config key bogus"},
      // The command line and the file itself.
      {{}, {"--config", dir.path() + "/missing.toml"}, 66, "cannot read config file"},
      {{}, {"--no-such-flag", "1"}, 64, "--no-such-flag"},
      {{}, {"--grace"}, 64, "--grace"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> argv{"/usr/bin/env"};
    argv.insert(argv.end(), c.env.begin(), c.env.end());
    // The cases' flags come after the defaults of Daemon(), which they override.
    for (auto& arg : Daemon(c.args)) argv.push_back(arg);
    const std::string name = fmt::format("{} {}", fmt::join(c.env, " "), fmt::join(c.args, " "));

    // --check-config right after the binary, so that a case's flag left without its value
    // ("--grace") stays without one rather than taking --check-config as its value.
    std::vector<std::string> check = argv;
    check.insert(check.begin() + static_cast<std::ptrdiff_t>(1 + c.env.size() + 1),
                 "--check-config");
    auto [check_status, check_output] = RunCommand(check);
    EXPECT_EQ(check_status, c.status) << name << "\n" << check_output;
    EXPECT_NE(check_output.find(c.message), std::string::npos) << name << "\n" << check_output;

    Subprocess start(argv);
    std::optional<int> status = start.Wait(seconds(20));
    if (!status) status = start.Stop(SIGTERM, seconds(20));  // it started: the bug
    EXPECT_EQ(status, c.status) << name << "\n" << start.output();
    EXPECT_NE(start.output().find(c.message), std::string::npos) << name << "\n" << start.output();
    EXPECT_EQ(start.output().find("listening"), std::string::npos) << name << "\n"
                                                                   << start.output();
  }
  // And a configuration --check-config accepts starts.
  auto [status, output] = RunCommand([] {
    auto argv = Daemon({"--admin-listen", "0.0.0.0:0", "--admin-allow-unauthenticated-remote",
                        "true", "--check-config"});
    return argv;
  }());
  EXPECT_EQ(status, 0) << output;
  Subprocess daemon(
      Daemon({"--admin-listen", "0.0.0.0:0", "--admin-allow-unauthenticated-remote", "true"}));
  EXPECT_TRUE(daemon.WaitForLine(std::regex("nlockd listening"), seconds(20))) << daemon.output();
  EXPECT_EQ(daemon.Stop(SIGTERM, seconds(20)), 0) << daemon.output();
}

// A reload applies the token at once but the address only at a restart: a file that moves the
// admin server to loopback and drops the token must not leave a public one without a token.
TEST(NlockdDaemon, SighupKeepsTheTokenOfAPublicAdminServer) {
  ScratchDir dir;
  std::string token = dir.File("token", "s3cret\n");
  std::string config = dir.File(
      "nlockd.toml", "admin_listen = \"0.0.0.0:0\"\n[admin]\ntoken_file = \"" + token + "\"\n");
  std::vector<std::string> argv{NLOCKD_BINARY, "--config", config,        "--store",
                                "memory:",     "--listen", "127.0.0.1:0", "--rpcbind-register",
                                "false"};
  Subprocess daemon(argv);
  auto admin = daemon.WaitForLine(std::regex(R"(nlockd admin listening" address=\S+ port=(\d+))"),
                                  seconds(20));
  ASSERT_TRUE(admin) << daemon.output();
  int port = std::stoi((*admin)[1]);
  ASSERT_TRUE(daemon.LoggedOrWaitFor(std::regex("nlockd listening"), seconds(20)));
  dir.File("nlockd.toml", "admin_listen = \"127.0.0.1:0\"\n");
  ASSERT_EQ(kill(daemon.pid(), SIGHUP), 0);
  ASSERT_TRUE(daemon.WaitForLine(std::regex("nlockd reload refused"), seconds(10)))
      << daemon.output();
  EXPECT_NE(daemon.output().find("is not a loopback address and the admin API has no token"),
            std::string::npos)
      << daemon.output();
  httplib::Client client("127.0.0.1", port);
  auto status = client.Get("/api/v1/status");
  ASSERT_TRUE(status);
  EXPECT_EQ(status->status, 401);  // still guarded
  EXPECT_EQ(daemon.Stop(SIGTERM, seconds(20)), 0) << daemon.output();
}

TEST(NlockdDaemon, FlagsOverrideTheEnvironmentWhichOverridesTheFile) {
  ScratchDir dir;
  std::string config = dir.File("nlockd.toml", "grace = 11\ngrace_floor = 12\nname = \"file\"\n");
  auto [status, output] =
      RunCommand({"/usr/bin/env", "NLOCKD_GRACE=21", "NLOCKD_GRACE_FLOOR=22",
                  "NLOCKD_RPC_IDLE_TIMEOUT=23", "NLOCKD_NSM_ALLOWLIST=192.0.2.1,192.0.2.2",
                  NLOCKD_BINARY, "--config", config, "--grace", "31", "--check-config"});
  ASSERT_EQ(status, 0) << output;
  EXPECT_NE(output.find("\ngrace = 31\n"), std::string::npos) << output;        // flag
  EXPECT_NE(output.find("\ngrace_floor = 22\n"), std::string::npos) << output;  // environment
  EXPECT_NE(output.find("\nname = \"file\"\n"), std::string::npos) << output;   // file
  EXPECT_NE(output.find("\nidle_timeout = 23\n"), std::string::npos) << output;
  EXPECT_NE(output.find("\nallowlist = [\"192.0.2.1\", \"192.0.2.2\"]\n"), std::string::npos)
      << output;
  EXPECT_NE(output.find("# from the environment: NLOCKD_GRACE NLOCKD_GRACE_FLOOR"),
            std::string::npos)
      << output;
}

TEST(NlockdDaemon, PidFileHoldsThePidRefusesASecondDaemonAndGoesAtExit) {
  ScratchDir dir;
  const std::string pid_file = dir.path() + "/nlockd.pid";
  Subprocess first(Daemon({"--pid-file", pid_file}));
  ASSERT_TRUE(first.WaitForLine(std::regex("nlockd listening"), seconds(20))) << first.output();
  std::ifstream in(pid_file);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, std::to_string(first.pid()) + "\n");

  Subprocess second(Daemon({"--pid-file", pid_file}));
  EXPECT_EQ(second.Wait(seconds(20)), 1) << second.output();
  EXPECT_NE(second.output().find("held by another running nlockd (pid " +
                                 std::to_string(first.pid()) + ")"),
            std::string::npos)
      << second.output();

  EXPECT_EQ(first.Stop(SIGTERM, seconds(20)), 0) << first.output();
  EXPECT_FALSE(std::filesystem::exists(pid_file));
}

TEST(NlockdDaemon, LogFileIsReopenedOnSigusr1) {
  ScratchDir dir;
  const std::string log = dir.path() + "/nlockd.log";
  Subprocess daemon(Daemon({"--log-file", log}));
  auto read = [](const std::string& path) {
    std::ifstream in(path);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  // Nothing on standard error: the log is in the file. Wait for it there.
  for (int i = 0; i < 200 && read(log).find("nlockd listening") == std::string::npos; ++i) {
    ASSERT_FALSE(daemon.Wait(std::chrono::milliseconds(100)).has_value()) << daemon.output();
  }
  ASSERT_NE(read(log).find("nlockd listening"), std::string::npos) << read(log);
  EXPECT_EQ(daemon.output().find("nlockd listening"), std::string::npos) << daemon.output();

  std::filesystem::rename(log, log + ".1");  // as logrotate does
  ASSERT_EQ(kill(daemon.pid(), SIGUSR1), 0);
  for (int i = 0; i < 100 && read(log).find("nlockd log file reopened") == std::string::npos; ++i) {
    ASSERT_FALSE(daemon.Wait(std::chrono::milliseconds(100)).has_value()) << daemon.output();
  }
  EXPECT_NE(read(log).find("nlockd log file reopened\" path=" + log), std::string::npos)
      << read(log);
  EXPECT_EQ(daemon.Stop(SIGTERM, seconds(20)), 0) << daemon.output();
  EXPECT_NE(read(log).find("nlockd stopped"), std::string::npos) << read(log);
  EXPECT_EQ(read(log + ".1").find("nlockd stopped"), std::string::npos);
}

// /metrics before any call: the process's metrics, the build, and the request series at 0.
TEST(NlockdDaemon, MetricsArePresentFromTheStart) {
  Subprocess daemon(Daemon({}));
  auto admin = daemon.WaitForLine(std::regex(R"(nlockd admin listening" address=\S+ port=(\d+))"),
                                  seconds(20));
  ASSERT_TRUE(admin) << daemon.output();
  int port = std::stoi((*admin)[1]);
  ASSERT_TRUE(daemon.LoggedOrWaitFor(std::regex("nlockd listening"), seconds(20)));
  httplib::Client client("127.0.0.1", port);
  auto metrics = client.Get("/metrics");
  ASSERT_TRUE(metrics);
  ASSERT_EQ(metrics->status, 200);
  const std::string& text = metrics->body;
  for (const char* family :
       {"process_cpu_seconds_total counter", "process_resident_memory_bytes gauge",
        "process_virtual_memory_bytes gauge", "process_open_fds gauge", "process_max_fds gauge",
        "process_start_time_seconds gauge", "nlockd_build_info gauge"}) {
    EXPECT_NE(text.find(std::string("\n# TYPE ") + family + "\n"), std::string::npos) << family;
  }
  EXPECT_NE(text.find("nlockd_build_info{build_type=\"" NLOCKD_BUILD_TYPE
                      "\",revision=\"" NLOCKD_BUILD_REVISION "\",version=\"" NLOCKD_BUILD_VERSION
                      "\"} 1\n"),
            std::string::npos)
      << text;
  EXPECT_NE(
      text.find("\nnlm_requests_total{procedure=\"LOCK\",result=\"granted\",version=\"4\"} 0\n"),
      std::string::npos)
      << text;
  EXPECT_NE(text.find("\nnsm_requests_total{procedure=\"SM_MON\",result=\"stat_succ\"} 0\n"),
            std::string::npos)
      << text;
  // The process is this daemon: its start time is its own, within the last minutes.
  std::smatch start;
  ASSERT_TRUE(
      std::regex_search(text, start, std::regex(R"(\nprocess_start_time_seconds (\S+)\n)")));
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  EXPECT_NEAR(std::stod(start[1]), now, 120);
  EXPECT_EQ(daemon.Stop(SIGTERM, seconds(20)), 0);
}

// --- The documentation against the binary ---------------------------------------------------
// nlockd --help comes from the settings table at run time; README.md, nlockd(8) and
// nlockd.toml(5) are files (their lists are generated from the same table: server_test's
// SettingsTable tests). These tests read the files as a reader would and hold them to what the
// binary says, so that none of the four drifts.

std::string ReadSource(const std::string& relative) {
  std::ifstream in(std::string(NLOCKD_SOURCE_DIR) + "/" + relative);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// "--flag VALUE" (or "--flag" alone) for every match of `pattern`, whose group 1 is the flag
// and group 2 its value name; roff's "\-" read as "-".
std::set<std::string> FlagsIn(std::string text, const std::regex& pattern) {
  text = std::regex_replace(text, std::regex(R"(\\-)"), "-");
  std::set<std::string> out;
  for (std::sregex_iterator it(text.begin(), text.end(), pattern), end; it != end; ++it) {
    std::string value = (*it)[2];
    out.insert(value.empty() ? std::string((*it)[1]) : std::string((*it)[1]) + " " + value);
  }
  return out;
}

// Group 1 of every match of `pattern` in `text`.
std::vector<std::string> Groups(const std::string& text, const std::regex& pattern) {
  std::vector<std::string> out;
  for (std::sregex_iterator it(text.begin(), text.end(), pattern), end; it != end; ++it) {
    out.push_back((*it)[1]);
  }
  return out;
}

std::string Section(const std::string& text, const std::string& begin, const std::string& end) {
  size_t from = text.find(begin);
  if (from == std::string::npos) return "";
  size_t to = text.find(end, from);
  return text.substr(from, to == std::string::npos ? std::string::npos : to - from);
}

TEST(NlockdDocs, HelpReadmeAndManPagesNameTheSameFlags) {
  auto [status, help] = RunCommand({NLOCKD_BINARY, "--help"});
  ASSERT_EQ(status, 0) << help;
  // CLI11 lists each option at the start of a line: "  --listen ADDR:PORT   help".
  std::set<std::string> from_help =
      FlagsIn(help, std::regex(R"(\n  (--[a-z-]+)(?: ([A-Z][A-Z:|]*))?)"));
  from_help.erase("--help");  // spelled "-h,--help" by CLI11
  from_help.insert("--help");
  ASSERT_GT(from_help.size(), 40u) << help;

  const std::string readme = ReadSource("README.md");
  std::set<std::string> from_readme =
      FlagsIn(Section(readme, "<!-- BEGIN SYNOPSIS", "<!-- END SYNOPSIS"),
              std::regex(R"(\[(--[a-z-]+)(?: ([A-Z][A-Z:|]*))?\])"));
  EXPECT_EQ(from_readme, from_help) << "README.md's synopsis differs from nlockd --help";

  const std::string man8 = ReadSource("man/nlockd.8");
  std::set<std::string> from_man8 =
      FlagsIn(Section(man8, ".SH OPTIONS", ".SH ENVIRONMENT"),
              std::regex(R"(\n\.BI? (--[a-z-]+)(?: " ([A-Z][A-Z:|]*)\")?)"));
  EXPECT_EQ(from_man8, from_help) << "nlockd(8)'s OPTIONS differ from nlockd --help";

  // nlockd.toml(5) names each key's flag and environment variable; every flag of --help but
  // nlockd's own four is one of them, and each variable is the one --help names.
  const std::string man5 = ReadSource("man/nlockd.toml.5");
  std::set<std::string> from_man5 = FlagsIn(Section(man5, ".SH KEYS", ".SH SECRETS"),
                                            std::regex(R"(flag \\fB(--[a-z-]+)\\fR())"));
  std::set<std::string> help_names;
  for (const std::string& flag : from_help) help_names.insert(flag.substr(0, flag.find(' ')));
  for (const char* own :
       {"--config", "--check-config", "--export-statd-files", "--version", "--help"}) {
    help_names.erase(own);
  }
  EXPECT_EQ(from_man5, help_names) << "nlockd.toml(5)'s keys differ from nlockd --help";
  const std::regex help_variable(R"(environment (NLOCKD_[A-Z_]+))");
  const std::vector<std::string> help_variables = Groups(help, help_variable);
  std::set<std::string> env_help(help_variables.begin(), help_variables.end());
  const std::regex man5_variable(R"(environment (NLOCKD_[A-Z_]+)\))");
  const std::vector<std::string> man5_variables =
      Groups(std::regex_replace(man5, std::regex(R"(\\fB|\\fR)"), ""), man5_variable);
  std::set<std::string> env_man5(man5_variables.begin(), man5_variables.end());
  EXPECT_EQ(env_man5, env_help);
  EXPECT_EQ(env_help.size(), help_names.size());
}

// The README's set-up: exactly two commands, the first of which builds every binary that
// `cmake --install` installs (cmake/NlockdInstall.cmake) rather than only some targets.
TEST(NlockdDocs, ReadmeSetUpBuildsWhatInstallInstalls) {
  const std::string readme = ReadSource("README.md");
  const std::string setup = Section(readme, "## Set-up", "\n## Running");
  const std::vector<std::string> commands = Groups(setup, std::regex(R"(```sh\n([^`]*)```)"));
  ASSERT_EQ(commands.size(), 2u) << setup;
  const std::string install = ReadSource("cmake/NlockdInstall.cmake");
  std::smatch build;
  ASSERT_TRUE(std::regex_search(commands[0], build, std::regex(R"(cmake --build build([^&\n]*))")))
      << commands[0];
  const std::string build_args = build[1];
  if (build_args.find("--target") != std::string::npos) {
    const std::regex installed(R"(install\(TARGETS ([a-z_ ]+) (?:EXPORT|DESTINATION))");
    for (const std::string& line : Groups(install, installed)) {
      std::istringstream targets(line);
      for (std::string target; targets >> target;) {
        EXPECT_NE(build_args.find(" " + target), std::string::npos)
            << "the README's first command does not build " << target << ", which cmake --install "
            << "installs: " << commands[0];
      }
    }
  }
  // It starts what it built.
  EXPECT_NE(commands[0].find("./build/src/cmd/nlockd/nlockd"), std::string::npos) << commands[0];
}

}  // namespace
