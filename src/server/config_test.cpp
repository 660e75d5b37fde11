// SPDX-License-Identifier: Apache-2.0
#include "server/config.hpp"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <string>

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/error.hpp"
#include "testutil/temp_dir.hpp"

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
max_locks_per_host = 1000
max_owner_bytes_per_host = 65536
max_waiters_per_host = 20
max_waiters = 200
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
  EXPECT_EQ(config.max_locks_per_host, 1000u);
  EXPECT_EQ(config.max_owner_bytes_per_host, 65536u);
  EXPECT_EQ(config.max_waiters_per_host, 20u);
  EXPECT_EQ(config.max_waiters, 200u);
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
  const std::string path = WriteTemp("bogus = 1");
  try {
    LoadConfigFile(path, config);
    ADD_FAILURE() << "an unknown key was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bogus"), std::string::npos);
  }
  std::remove(path.c_str());
  EXPECT_THROW(LoadConfigFile("/nonexistent/nlockd.toml", config), Error);
}

}  // namespace
}  // namespace nlockd::server

namespace nlockd::server {
namespace {

TEST(LoadConfigFile, ServeNsmListenAndCallbackSourcePortAreReadAndChecked) {
  Config config;
  std::string path =
      WriteTemp("serve = \"nsm\"\nnsm_listen = \"127.0.0.1:662\"\ncallback_source_port = 700\n");
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
  for (const char* bad :
       {"serve = [\"nlm\"]\n", "nsm_listen = \"nope\"\n", "callback_source_port = 70000\n"}) {
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
  EXPECT_EQ(from_file.max_locks_per_host, defaults.max_locks_per_host);
  EXPECT_EQ(from_file.max_owner_bytes_per_host, defaults.max_owner_bytes_per_host);
  EXPECT_EQ(from_file.max_waiters_per_host, defaults.max_waiters_per_host);
  EXPECT_EQ(from_file.max_waiters, defaults.max_waiters);
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

  for (const char* bad : {"[notify]\nbackoff = 0\n", "[notify]\nbudgt = 3\n", "grace_floor = -1\n",
                          "persist_locks = \"yes\"\n"}) {
    path = WriteTemp(bad);
    EXPECT_THROW(LoadConfigFile(path, config), Error) << bad;
    std::remove(path.c_str());
  }
}

}  // namespace
}  // namespace nlockd::server

#include <sstream>

#include "server/config_table.hpp"

namespace nlockd::server {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// With NLOCKD_UPDATE_DOCS=1 the test rewrites the file from the settings table instead.
void ExpectFileMatches(const std::string& path, const std::string& expected,
                       const std::string& begin_marker = "", const std::string& end_marker = "") {
  std::string text = ReadFile(path);
  size_t begin = 0;
  size_t end = text.size();
  if (!begin_marker.empty()) {
    begin = text.find(begin_marker);
    ASSERT_NE(begin, std::string::npos) << path << " lacks " << begin_marker;
    begin = text.find('\n', begin) + 1;
    end = text.find(end_marker, begin);
    ASSERT_NE(end, std::string::npos) << path << " lacks " << end_marker;
  }
  if (std::getenv("NLOCKD_UPDATE_DOCS") != nullptr) {
    text.replace(begin, end - begin, expected);
    std::ofstream(path) << text;
    return;
  }
  EXPECT_EQ(text.substr(begin, end - begin), expected)
      << path << " differs from the settings table: run NLOCKD_UPDATE_DOCS=1 "
      << "build-test/src/server/server_test --gtest_filter='SettingsTable.*' to regenerate it";
}

TEST(LoadConfigFile, HaKeysAreReadAndChecked) {
  Config config;
  EXPECT_FALSE(config.ha);
  EXPECT_EQ(config.ha_lease, std::chrono::seconds(5));
  std::string path = WriteTemp(
      "ha = true\nha_lease = 3\nha_on_active = \"ip addr add 10.0.0.9/24 dev eth0\"\n"
      "ha_on_standby = \"true\"\n");
  LoadConfigFile(path, config);
  std::remove(path.c_str());
  EXPECT_TRUE(config.ha);
  EXPECT_EQ(config.ha_lease, std::chrono::seconds(3));
  EXPECT_EQ(config.ha_on_active, "ip addr add 10.0.0.9/24 dev eth0");
  EXPECT_EQ(config.ha_on_standby, "true");
  for (const char* bad : {"ha_lease = 0\n", "ha = \"yes\"\n", "ha_lease = 3601\n"}) {
    path = WriteTemp(bad);
    EXPECT_THROW(LoadConfigFile(path, config), Error) << bad;
    std::remove(path.c_str());
  }
}

TEST(SettingsTable, ShippedConfigFileIsTheRenderedTable) {
  ExpectFileMatches(NLOCKD_SOURCE_DIR "/config/nlockd.toml", RenderConfigTemplate());
}

TEST(SettingsTable, ManPageListsEveryKey) {
  ExpectFileMatches(NLOCKD_SOURCE_DIR "/man/nlockd.toml.5", RenderManKeys(), ".\\\" BEGIN KEYS",
                    ".\\\" END KEYS");
}

TEST(SettingsTable, DaemonManPageListsEveryFlag) {
  ExpectFileMatches(NLOCKD_SOURCE_DIR "/man/nlockd.8", RenderManFlags(), ".\\\" BEGIN FLAGS",
                    ".\\\" END FLAGS");
}

TEST(SettingsTable, ReadmeSynopsisNamesEveryFlag) {
  ExpectFileMatches(NLOCKD_SOURCE_DIR "/README.md", "```\n" + RenderSynopsis() + "```\n",
                    "<!-- BEGIN SYNOPSIS", "<!-- END SYNOPSIS");
}

TEST(SettingsTable, EveryKeyIsUniqueAndRoundTripsThroughTheFile) {
  std::set<std::string_view> keys;
  std::set<std::string_view> flags;
  for (const Setting& setting : Settings()) {
    EXPECT_TRUE(keys.insert(setting.key).second) << setting.key;
    EXPECT_TRUE(flags.insert(setting.flag).second) << setting.flag;
    EXPECT_FALSE(setting.help.empty()) << setting.key;
  }
  // The effective configuration --check-config prints reads back to the same values.
  Config config;
  config.name = "server \"a\"";
  config.nsm_allowlist = {"192.0.2.1"};
  config.listen = ParseListenAddress("[::1]:4000");
  config.log_level = spdlog::level::warn;
  std::string path = WriteTemp(RenderEffectiveConfig(config));
  Config read;
  LoadConfigFile(path, read);
  std::remove(path.c_str());
  for (const Setting& setting : Settings()) {
    EXPECT_EQ(FormatValue(setting.get(read)), FormatValue(setting.get(config))) << setting.key;
  }
}

TEST(SettingsTable, FlagsAreCheckedLikeTheFile) {
  for (auto [flag, text] :
       std::vector<std::pair<std::string, std::string>>{{"--max-connections", "0"},
                                                        {"--max-record-size", "0"},
                                                        {"--idle-timeout", "-5"},
                                                        {"--grace", "3601"},
                                                        {"--store", "memory:extra"},
                                                        {"--store", "redis://x"},
                                                        {"--store", "postgresql://h/db?bogus=1"},
                                                        {"--rpcbind-host", "not-an-ip"},
                                                        {"--persist-locks", "maybe"},
                                                        {"--notify-timeout", "5s"}}) {
    const Setting* setting = nullptr;
    for (const Setting& s : Settings()) {
      if (s.flag == flag) setting = &s;
    }
    ASSERT_NE(setting, nullptr) << flag;
    Config config;
    EXPECT_THROW(ApplySetting(*setting, ParseFlagValue(*setting, {text}), "flag " + flag, config),
                 Error)
        << flag << " " << text;
  }
  Config config;
  const Setting* idle = FindSetting("rpc.idle_timeout");
  ApplySetting(*idle, ParseFlagValue(*idle, {"7"}), "flag", config);
  EXPECT_EQ(config.idle_timeout, std::chrono::seconds(7));
}

TEST(LoadConfigFile, ErrorsNameTheLineAndTheWrongType) {
  auto error_of = [](const std::string& text) {
    std::string path = WriteTemp(text);
    Config config;
    std::string message;
    try {
      LoadConfigFile(path, config);
    } catch (const Error& e) {
      message = e.what();
    }
    std::remove(path.c_str());
    return message.substr(message.find(':') + 1);  // Without the temporary path.
  };
  EXPECT_EQ(error_of("notify = 5\n"),
            "1: config key notify must be a table ([notify]), not an integer");
  EXPECT_EQ(error_of("grace = 1\n\n[rpc]\nidle_timeout = \"x\"\n"),
            "4: config key rpc.idle_timeout must be an integer, not a string");
  EXPECT_EQ(error_of("grace = 1\ngrace_floor = \n"), error_of("grace = 1\ngrace_floor = \n"));
  EXPECT_EQ(error_of("grace = 1\ngrace_floor = \n").substr(0, 2), "2:");
  EXPECT_NE(error_of("grace = 1\ngrace_floor = \n").find("syntax error"), std::string::npos);
  EXPECT_EQ(error_of("[rpc]\nmax_connections = 0\n"),
            "2: rpc.max_connections = 0 is out of range 1..1048576");
  EXPECT_EQ(error_of("bogus = 1\n"), "1: unknown config key bogus");
}

TEST(CheckConfig, RedactsSecrets) {
  Config config;
  config.store = "postgresql://nlockd:pw@db/nlockd";
  config.admin_token = "t0ken";
  std::string text = RenderEffectiveConfig(config);
  EXPECT_EQ(text.find("pw@"), std::string::npos) << text;
  EXPECT_EQ(text.find("t0ken"), std::string::npos) << text;
  EXPECT_NE(text.find("postgresql://nlockd:REDACTED@db/nlockd"), std::string::npos) << text;
}

TEST(ReadSecretFile, RefusesFilesOthersMayRead) {
  std::string path = WriteTemp("s3cret\n");
  chmod(path.c_str(), 0644);
  EXPECT_THROW(ReadSecretFile(path), Error);
  chmod(path.c_str(), 0600);
  EXPECT_EQ(ReadSecretFile(path), "s3cret");
  Config config;
  config.admin_token_file = path;
  ResolveSecrets(config);
  EXPECT_EQ(config.admin_token, "s3cret");
  std::remove(path.c_str());

  // Relative to systemd's credentials directory (LoadCredential=).
  testutil::TempDir credentials("creds");
  std::string credential = credentials.path() + "/admin-token";
  std::ofstream(credential) << "from-systemd\n";
  chmod(credential.c_str(), 0400);
  setenv("CREDENTIALS_DIRECTORY", credentials.path().c_str(), 1);
  config.admin_token_file = "admin-token";
  ResolveSecrets(config);
  unsetenv("CREDENTIALS_DIRECTORY");
  EXPECT_EQ(config.admin_token, "from-systemd");
}

TEST(Environment, EveryKeyHasAVariableOfItsOwn) {
  EXPECT_EQ(EnvironmentName("rpc.max_connections"), "NLOCKD_RPC_MAX_CONNECTIONS");
  EXPECT_EQ(EnvironmentName("admin.token_file"), "NLOCKD_ADMIN_TOKEN_FILE");
  std::set<std::string> names;
  for (const Setting& setting : Settings()) {
    EXPECT_TRUE(names.insert(EnvironmentName(setting.key)).second) << setting.key;
  }
}

TEST(Environment, AppliesSettingsCheckedLikeTheFile) {
  Config config;
  const char* environment[] = {"PATH=/usr/bin",
                               "NLOCKD_GRACE=7",
                               "NLOCKD_RPC_MAX_CONNECTIONS=12",
                               "NLOCKD_NSM_ALLOWLIST=192.0.2.1,::ffff:192.0.2.2",
                               "NLOCKD_PERSIST_LOCKS=false",
                               "NLOCKD_STORE=memory:",
                               "NLOCKD_TEST_PG_URI=postgresql://elsewhere/x",  // not a setting
                               "NLOCKD_GRACE_FLOOR",                           // no '=': ignored
                               nullptr};
  std::vector<std::string> applied = ApplyEnvironment(environment, config);
  EXPECT_EQ(config.grace, std::chrono::seconds(7));
  EXPECT_EQ(config.max_connections, 12u);
  EXPECT_EQ(config.nsm_allowlist, (std::vector<std::string>{"192.0.2.1", "192.0.2.2"}));
  EXPECT_FALSE(config.persist_locks);
  EXPECT_EQ(config.store, "memory:");
  EXPECT_EQ(config.grace_floor, Config{}.grace_floor);
  std::set<std::string> names(applied.begin(), applied.end());
  EXPECT_EQ(names, (std::set<std::string>{"NLOCKD_GRACE", "NLOCKD_RPC_MAX_CONNECTIONS",
                                          "NLOCKD_NSM_ALLOWLIST", "NLOCKD_PERSIST_LOCKS",
                                          "NLOCKD_STORE"}));

  for (const char* bad :
       {"NLOCKD_GRACE=3601", "NLOCKD_GRACE=soon", "NLOCKD_HA=maybe", "NLOCKD_LISTEN=nowhere"}) {
    const char* one[] = {bad, nullptr};
    Config other;
    try {
      ApplyEnvironment(one, other);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const Error& e) {
      std::string name(bad, std::string_view(bad).find('='));
      EXPECT_NE(std::string(e.what()).find("environment " + name), std::string::npos) << e.what();
    }
  }
}

TEST(ListenAddresses, TakeIpLiteralsOnly) {
  EXPECT_THROW(ParseListenAddress("localhost:4045"), Error);
  EXPECT_THROW(ParseListenAddress("[nohost]:4045"), Error);
  Config config;
  EXPECT_THROW(ApplyAdminListen("nlockd.example:9464", config), Error);
  EXPECT_EQ(ParseListenAddress("[::]:1").host, "::");
}

TEST(IsLoopbackHost, KnowsV4V6AndMappedLoopback) {
  for (const char* host : {"127.0.0.1", "127.1.2.3", "::1", "::ffff:127.0.0.1"}) {
    EXPECT_TRUE(IsLoopbackHost(host)) << host;
  }
  for (const char* host : {"0.0.0.0", "::", "10.0.0.1", "::ffff:10.0.0.1", "fe80::1", "name"}) {
    EXPECT_FALSE(IsLoopbackHost(host)) << host;
  }
}

// The refusals that involve several settings. (The daemon's test runs the same cases through
// --check-config and a start: src/cmd/nlockd/daemon_test.cpp.)
TEST(CheckConfig, RefusesCombinationsThatCannotRun) {
  struct Case {
    std::string name;
    void (*change)(Config&);
    std::string message;  // empty: accepted
  };
  const std::vector<Case> cases = {
      {"defaults", [](Config&) {}, ""},
      {"ha on sqlite", [](Config& c) { c.ha = true; },
       "ha needs a PostgreSQL store (postgresql://...), not 'sqlite:./var/nlockd.db'"},
      {"ha on memory",
       [](Config& c) {
         c.ha = true;
         c.store = "memory:";
       },
       "ha needs a PostgreSQL store"},
      {"ha on postgresql",
       [](Config& c) {
         c.ha = true;
         c.store = "postgresql://nlockd@db/nlockd";
         c.name = "nfs.example";
       },
       ""},
      {"bad node id",
       [](Config& c) {
         c.store = "postgresql://nlockd@db/nlockd";
         c.name = "two words";
       },
       "invalid store node id 'two words'"},
      {"name with a space on sqlite", [](Config& c) { c.name = "two words"; }, ""},
      {"listen and admin on one port",
       [](Config& c) { c.admin_listen = ParseListenAddress("127.0.0.1:4045"); },
       "listen (0.0.0.0:4045) and admin_listen (127.0.0.1:4045) would listen on the same port"},
      {"listen and nsm_listen on one port",
       [](Config& c) {
         c.listen = ParseListenAddress("[::]:700");
         c.nsm_listen = ParseListenAddress("192.0.2.1:700");
       },
       "listen ([::]:700) and nsm_listen (192.0.2.1:700) would listen on the same port"},
      {"same port, different addresses",
       [](Config& c) {
         c.listen = ParseListenAddress("192.0.2.1:9464");
         c.admin_listen = ParseListenAddress("127.0.0.1:9464");
       },
       ""},
      {"port 0 twice",
       [](Config& c) {
         c.listen = ParseListenAddress("127.0.0.1:0");
         c.admin_listen = ParseListenAddress("127.0.0.1:0");
       },
       ""},
      {"nsm_listen unused with serve nlm",
       [](Config& c) {
         c.serve_nsm = false;
         c.nsm_listen = ParseListenAddress("0.0.0.0:4045");
       },
       ""},
      {"admin off on the same port", [](Config& c) { ApplyAdminListen("off", c); }, ""},
      {"public admin without a token",
       [](Config& c) { c.admin_listen = ParseListenAddress("0.0.0.0:9464"); },
       "admin_listen 0.0.0.0:9464 is not a loopback address and the admin API has no token"},
      {"public admin with open writes",
       [](Config& c) {
         c.admin_listen = ParseListenAddress("[::]:9464");
         c.admin_open_writes = true;
       },
       "with admin.open_writes, drop them"},
      {"public admin with a token",
       [](Config& c) {
         c.admin_listen = ParseListenAddress("0.0.0.0:9464");
         c.admin_token = "t";
       },
       ""},
      {"public admin acknowledged",
       [](Config& c) {
         c.admin_listen = ParseListenAddress("192.0.2.1:9464");
         c.admin_allow_unauthenticated_remote = true;
       },
       ""},
      {"loopback admin without a token",
       [](Config& c) { c.admin_listen = ParseListenAddress("[::1]:9464"); }, ""},
  };
  for (const Case& c : cases) {
    Config config;
    c.change(config);
    std::string message;
    try {
      CheckConfig(config);
    } catch (const Error& e) {
      message = e.what();
    }
    if (c.message.empty()) {
      EXPECT_EQ(message, "") << c.name;
    } else {
      EXPECT_NE(message.find(c.message), std::string::npos) << c.name << ": " << message;
    }
  }
}

TEST(CheckStoreUri, RefusesWhatLibpqCannotParseWithoutShowingThePassword) {
  EXPECT_EQ(CheckStoreUri("postgresql://nlockd@db/nlockd?sslmode=require"),
            "postgresql://nlockd@db/nlockd?sslmode=require");
  try {
    CheckStoreUri("postgresql://nlockd:hunter2@[::1/nlockd");
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    std::string message = e.what();
    EXPECT_NE(message.find("is not a valid PostgreSQL connection URI"), std::string::npos)
        << message;
    EXPECT_EQ(message.find("hunter2"), std::string::npos) << message;
  }
}

TEST(LoadConfigFile, AMissingFileIsUnreadableNotInvalid) {
  Config config;
  EXPECT_THROW(LoadConfigFile("/nonexistent/nlockd.toml", config), ConfigFileUnreadable);
  std::string path = WriteTemp("bogus = 1\n");
  try {
    LoadConfigFile(path, config);
    ADD_FAILURE() << "accepted";
  } catch (const ConfigFileUnreadable&) {
    ADD_FAILURE() << "an invalid file is not an unreadable one";
  } catch (const Error&) {
  }
  std::remove(path.c_str());
}

}  // namespace
}  // namespace nlockd::server
