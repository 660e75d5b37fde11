#include "server/config.hpp"

#include <cstdio>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <unistd.h>

#include "base/error.hpp"

namespace nlockd::server {
namespace {

std::string WriteTemp(const std::string& text) {
  char path[] = "/tmp/nlockd-config-XXXXXX";
  int fd = mkstemp(path);
  EXPECT_GE(fd, 0);
  close(fd);
  std::ofstream(path) << text;
  return path;
}

TEST(ParseListenAddress, AcceptsV4V6AndPortOnly) {
  auto v4 = ParseListenAddress("127.0.0.1:4045");
  EXPECT_EQ(v4.host, "127.0.0.1");
  EXPECT_EQ(v4.port, 4045);
  auto v6 = ParseListenAddress("[::1]:0");
  EXPECT_EQ(v6.host, "::1");
  EXPECT_EQ(v6.port, 0);
  EXPECT_EQ(ParseListenAddress(":99").host, "0.0.0.0");
}

TEST(ParseListenAddress, RejectsGarbage) {
  EXPECT_THROW(ParseListenAddress("127.0.0.1"), Error);
  EXPECT_THROW(ParseListenAddress("127.0.0.1:65536"), Error);
  EXPECT_THROW(ParseListenAddress("127.0.0.1:x"), Error);
  EXPECT_THROW(ParseListenAddress("[::1:80"), Error);
}

TEST(LoadConfigFile, ReadsEveryKey) {
  std::string path = WriteTemp(R"(
store = "memory:"
listen = "127.0.0.1:5000"
grace = 0
name = "server-a"
log_level = "debug"
[rpcbind]
register = false
host = "127.0.0.2"
port = 1111
[rpc]
max_connections = 10
max_record_size = 4096
idle_timeout = 7
[nlm]
host_key = "caller_name"
granted_callback = "sync"
max_hosts = 5
[nsm]
max_registrations = 7
allowlist = ["::ffff:192.0.2.1", "2001:db8::1"]
callback_programs = [100021, 300000]
check_notifier_address = false
callback_timeout = 2
)");
  Config config;
  LoadConfigFile(path, config);
  std::remove(path.c_str());
  EXPECT_EQ(config.listen.port, 5000);
  EXPECT_EQ(config.name, "server-a");
  EXPECT_EQ(config.log_level, spdlog::level::debug);
  EXPECT_FALSE(config.rpcbind_register);
  EXPECT_EQ(config.rpcbind_host, "127.0.0.2");
  EXPECT_EQ(config.rpcbind_port, 1111);
  EXPECT_EQ(config.max_connections, 10u);
  EXPECT_EQ(config.max_record_size, 4096u);
  EXPECT_EQ(config.idle_timeout, std::chrono::seconds(7));
  EXPECT_EQ(config.grace, std::chrono::seconds(0));
  EXPECT_TRUE(config.nlm_key_by_caller_name);
  EXPECT_FALSE(config.nlm_granted_msg);
  EXPECT_EQ(config.max_hosts, 5u);
  EXPECT_EQ(config.store, "memory:");
  EXPECT_EQ(config.nsm_max_registrations, 7u);
  EXPECT_EQ(config.nsm_allowlist, (std::vector<std::string>{"192.0.2.1", "2001:db8::1"}));
  EXPECT_EQ(config.nsm_callback_programs, (std::vector<int32_t>{100021, 300000}));
  EXPECT_FALSE(config.nsm_check_notifier_address);
  EXPECT_EQ(config.nsm_callback_timeout, std::chrono::seconds(2));
}

TEST(LoadConfigFile, NsmValuesAreChecked) {
  Config config;
  for (const char* text :
       {"[nsm]\nallowlist = [\"not-an-address\"]", "[nsm]\nallowlist = \"127.0.0.1\"",
        "[nsm]\ncallback_programs = [0]", "[nsm]\nmax_registrations = 0", "[nsm]\nbogus = 1"}) {
    std::string path = WriteTemp(text);
    EXPECT_THROW(LoadConfigFile(path, config), Error) << text;
    std::remove(path.c_str());
  }
}

TEST(LoadConfigFile, UnknownKeysWrongTypesAndBadSyntaxAreErrorsNamingTheKey) {
  Config config;
  for (const char* text : {"listne = \"1.2.3.4:5\"", "[rpc]\nmax_connections = \"ten\"",
                           "[rpc]\nmax_record_size = 10", "listen = ", "[rpcbind]\nportt = 1"}) {
    std::string path = WriteTemp(text);
    EXPECT_THROW(LoadConfigFile(path, config), Error) << text;
    std::remove(path.c_str());
  }
  try {
    std::string path = WriteTemp("bogus = 1");
    LoadConfigFile(path, config);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bogus"), std::string::npos);
  }
  EXPECT_THROW(LoadConfigFile("/nonexistent/nlockd.toml", config), Error);
}

}  // namespace
}  // namespace nlockd::server

namespace nlockd::server {
namespace {

TEST(LoadConfigFile, ServeNsmListenAndCallbackSourcePortAreReadAndChecked) {
  Config config;
  std::string path = WriteTemp(
      "serve = \"nsm\"\nnsm_listen = \"127.0.0.1:662\"\ncallback_source_port = 700\n");
  LoadConfigFile(path, config);
  std::remove(path.c_str());
  EXPECT_FALSE(config.serve_nlm);
  EXPECT_TRUE(config.serve_nsm);
  ASSERT_TRUE(config.nsm_listen.has_value());
  EXPECT_EQ(config.nsm_listen->host, "127.0.0.1");
  EXPECT_EQ(config.nsm_listen->port, 662);
  EXPECT_EQ(config.callback_source_port, 700);

  ApplyServe("nsm,nlm", config);
  EXPECT_TRUE(config.serve_nlm && config.serve_nsm);
  ApplyServe("nlm", config);
  EXPECT_TRUE(config.serve_nlm && !config.serve_nsm);
  for (const char* bad : {"", "nfs", "nlm,nlm", "nlm,", ",nsm", "NLM"}) {
    EXPECT_THROW(ApplyServe(bad, config), Error) << bad;
  }
  for (const char* bad : {"serve = [\"nlm\"]\n", "nsm_listen = \"nope\"\n",
                          "callback_source_port = 70000\n"}) {
    std::string bad_path = WriteTemp(bad);
    EXPECT_THROW(LoadConfigFile(bad_path, config), Error) << bad;
    std::remove(bad_path.c_str());
  }
}

TEST(LoadConfigFile, ShippedConfigFileParsesToTheDefaults) {
  Config from_file;
  from_file.rpcbind_port = 1;  // Proves the file sets it back.
  LoadConfigFile(NLOCKD_SOURCE_DIR "/config/nlockd.toml", from_file);
  Config defaults;
  EXPECT_EQ(from_file.listen.host, defaults.listen.host);
  EXPECT_EQ(from_file.listen.port, defaults.listen.port);
  EXPECT_EQ(from_file.name, defaults.name);
  EXPECT_EQ(from_file.log_level, defaults.log_level);
  EXPECT_EQ(from_file.rpcbind_register, defaults.rpcbind_register);
  EXPECT_EQ(from_file.rpcbind_host, defaults.rpcbind_host);
  EXPECT_EQ(from_file.rpcbind_port, defaults.rpcbind_port);
  EXPECT_EQ(from_file.max_connections, defaults.max_connections);
  EXPECT_EQ(from_file.max_record_size, defaults.max_record_size);
  EXPECT_EQ(from_file.idle_timeout, defaults.idle_timeout);
  EXPECT_EQ(from_file.grace, defaults.grace);
  EXPECT_EQ(from_file.grace_floor, defaults.grace_floor);
  EXPECT_EQ(from_file.grace_end_early, defaults.grace_end_early);
  EXPECT_EQ(from_file.persist_locks, defaults.persist_locks);
  EXPECT_EQ(from_file.notify_statd_port, defaults.notify_statd_port);
  EXPECT_EQ(from_file.notify_rpcbind_port, defaults.notify_rpcbind_port);
  EXPECT_EQ(from_file.notify_timeout, defaults.notify_timeout);
  EXPECT_EQ(from_file.notify_backoff, defaults.notify_backoff);
  EXPECT_EQ(from_file.notify_budget, defaults.notify_budget);
  EXPECT_EQ(from_file.notify_drop_unreachable, defaults.notify_drop_unreachable);
  EXPECT_EQ(from_file.nlm_key_by_caller_name, defaults.nlm_key_by_caller_name);
  EXPECT_EQ(from_file.nlm_granted_msg, defaults.nlm_granted_msg);
  EXPECT_EQ(from_file.max_hosts, defaults.max_hosts);
  EXPECT_EQ(from_file.store, defaults.store);
  EXPECT_EQ(from_file.nsm_max_registrations, defaults.nsm_max_registrations);
  EXPECT_EQ(from_file.nsm_allowlist, defaults.nsm_allowlist);
  EXPECT_EQ(from_file.nsm_callback_programs, defaults.nsm_callback_programs);
  EXPECT_EQ(from_file.nsm_check_notifier_address, defaults.nsm_check_notifier_address);
  EXPECT_EQ(from_file.nsm_callback_timeout, defaults.nsm_callback_timeout);
  EXPECT_EQ(from_file.admin_enabled, defaults.admin_enabled);
  EXPECT_EQ(from_file.admin_listen.host, defaults.admin_listen.host);
  EXPECT_EQ(from_file.admin_listen.port, defaults.admin_listen.port);
  EXPECT_EQ(from_file.admin_token, defaults.admin_token);
}

TEST(LoadConfigFile, AdminListenOffDisablesTheAdminServerAndTheTokenIsRead) {
  Config config;
  std::string path = WriteTemp("admin_listen = \"off\"\n[admin]\ntoken = \"s3cret\"\n");
  LoadConfigFile(path, config);
  std::remove(path.c_str());
  EXPECT_FALSE(config.admin_enabled);
  EXPECT_EQ(config.admin_token, "s3cret");

  path = WriteTemp("admin_listen = \"127.0.0.2:0\"\n");
  LoadConfigFile(path, config);
  std::remove(path.c_str());
  EXPECT_TRUE(config.admin_enabled);
  EXPECT_EQ(config.admin_listen.host, "127.0.0.2");
  EXPECT_EQ(config.admin_listen.port, 0);

  path = WriteTemp("[admin]\ntokn = \"x\"\n");
  EXPECT_THROW(LoadConfigFile(path, config), Error);
  std::remove(path.c_str());
  EXPECT_THROW(ParseAdminListen("offf"), Error);
}

TEST(LoadConfigFile, RecoveryAndNotifyKeysAreReadAndChecked) {
  Config config;
  std::string path = WriteTemp(
      "grace_floor = 3\ngrace_end_early = false\npersist_locks = false\n[notify]\n"
      "statd_port = 6000\nrpcbind_port = 1111\ntimeout = 2\nbackoff = 1\nbudget = 30\n"
      "drop_unreachable = false\n");
  LoadConfigFile(path, config);
  std::remove(path.c_str());
  EXPECT_EQ(config.grace_floor, std::chrono::seconds(3));
  EXPECT_FALSE(config.grace_end_early);
  EXPECT_FALSE(config.persist_locks);
  EXPECT_EQ(config.notify_statd_port, 6000);
  EXPECT_EQ(config.notify_rpcbind_port, 1111);
  EXPECT_EQ(config.notify_timeout, std::chrono::seconds(2));
  EXPECT_EQ(config.notify_backoff, std::chrono::seconds(1));
  EXPECT_EQ(config.notify_budget, std::chrono::seconds(30));
  EXPECT_FALSE(config.notify_drop_unreachable);

  for (const char* bad : {"[notify]\nbackoff = 0\n", "[notify]\nbudgt = 3\n",
                          "grace_floor = -1\n", "persist_locks = \"yes\"\n"}) {
    path = WriteTemp(bad);
    EXPECT_THROW(LoadConfigFile(path, config), Error) << bad;
    std::remove(path.c_str());
  }
}

}  // namespace
}  // namespace nlockd::server
