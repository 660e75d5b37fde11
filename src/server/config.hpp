// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <spdlog/common.h>

#include "base/error.hpp"
#include "nlockd/options.hpp"
#include "store/open_store.hpp"

namespace nlockd::server {

struct ListenAddress {
  std::string host = "0.0.0.0";
  uint16_t port = 4045;
};

// Everything the daemon can be told, from the config file (TOML) and flags: the library's
// nlockd::Options (each field one config key and one flag) and what only the daemon has, its
// listener, log level and admin HTTP server. config/nlockd.toml documents every key; a flag
// overrides the file.
struct Config : nlockd::Options {
  ListenAddress listen;                                       // listen / --listen
  spdlog::level::level_enum log_level = spdlog::level::info;  // log_level / --log-level
  // admin_listen / --admin-listen: the admin HTTP server (metrics, REST API); "off" disables it
  // (admin_enabled false). Port 0 picks a free one. admin.token (Options::admin_token) guards
  // it.
  bool admin_enabled = true;
  ListenAddress admin_listen{"127.0.0.1", 9464};
  // nsm_listen / --nsm-listen: serve NSM on a port of its own (statd traditionally has one);
  // unset, NSM shares `listen` with NLM.
  std::optional<ListenAddress> nsm_listen;
  // store_password_file, admin.token_file: read by ResolveSecrets() (the token again on
  // SIGHUP); relative paths are looked up in $CREDENTIALS_DIRECTORY when it is set.
  std::string store_password_file;
  std::string admin_token_file;
  // admin.open_writes: admin requests that change state (POST, DELETE) are served without a
  // token. Off (the default), they need admin.token; without one they are refused.
  bool admin_open_writes = false;
  // admin.allow_unauthenticated_remote: serve the admin API on an address other than loopback
  // without a token. Off (the default), CheckConfig refuses such a configuration.
  bool admin_allow_unauthenticated_remote = false;
  // pid_file / --pid-file: the daemon writes its process id there and holds a lock on it while
  // it runs (a second nlockd with the same file refuses to start); empty: none.
  std::string pid_file;
  // log_file / --log-file: log lines go to this file (appended; reopened on SIGUSR1, for
  // logrotate) instead of standard error; empty: standard error.
  std::string log_file;
  // nfs_conf / --nfs-conf: nfs-utils' configuration file, read beneath nlockd's own
  // (ApplyNfsConf); empty: not read.
  std::string nfs_conf;
};

class NfsConf;

// A setting taken from nfs.conf, and the line it came from ("FILE:LINE").
struct NfsConfSetting {
  std::string key;
  std::string origin;
};

// Applies what nfs-utils' configuration says to the daemons nlockd stands in for, with
// nfs-utils' meaning, into `config`: as the status monitor (`statd_role`), [statd] port (NSM on
// a port of its own on every address, as rpc.statd listens), outgoing-port, name,
// state-directory-path (rpc.statd's default, /var/lib/nfs, when unset) and ha-callout; as the
// lock manager alone (`lockd_role`), [lockd] port
// (udp-port when port is not set; one port serves both). Values are checked as the same
// settings in nlockd.toml are; a bad one throws Error naming its line. Keys nlockd has no
// equivalent for are reported in `warnings`. Returns the settings applied.
std::vector<NfsConfSetting> ApplyNfsConf(const NfsConf& conf, bool statd_role, bool lockd_role,
                                         Config& config, std::vector<std::string>& warnings);

// An allowlist entry: an IP literal, normalised ("::ffff:10.0.0.1" -> "10.0.0.1"). Throws Error.
std::string ParseAllowedAddress(const std::string& text);
// A callback program number (1..2^31-1). Throws Error.
int32_t ParseCallbackProgram(int64_t value);

// "address" -> false, "caller_name" -> true; anything else throws Error.
bool ParseHostKey(const std::string& text);
// "msg" -> true, "sync" -> false; anything else throws Error.
bool ParseGrantedCallback(const std::string& text);

// serve: "nlm,nsm", "nlm" or "nsm" (any order, no repeats) -> serve_nlm, serve_nsm. Throws Error.
void ApplyServe(const std::string& text, Config& config);

// "ADDR:PORT", "[V6ADDR]:PORT" or ":PORT". Throws Error (kFailed) with the reason.
ListenAddress ParseListenAddress(const std::string& text);

// admin_listen: "off" -> nullopt (no admin server), otherwise ParseListenAddress.
std::optional<ListenAddress> ParseAdminListen(const std::string& text);
// Sets admin_enabled and admin_listen from an admin_listen value. Throws Error.
void ApplyAdminListen(const std::string& text, Config& config);

// "ADDR:PORT", or "[V6ADDR]:PORT" for an IPv6 host.
std::string FormatListenAddress(const ListenAddress& address);
// An IP literal, as given; throws Error naming `what` otherwise.
std::string ParseIpLiteral(const std::string& text, const std::string& what);
// The store URI if its form is one nlockd opens ("memory:", "sqlite:PATH",
// "postgresql://..."); throws Error saying what is wrong (the message redacts a password).
std::string CheckStoreUri(const std::string& uri);

// The environment variable of a setting: NLOCKD_ and the key in capitals, '.' as '_'
// ("rpc.max_connections" -> NLOCKD_RPC_MAX_CONNECTIONS).
std::string EnvironmentName(std::string_view key);
// Applies the settings that `environment` (NAME=VALUE strings, as environ holds them) names by
// their EnvironmentName over `config`, checked as the file's values are; a list is
// comma-separated. Other variables, NLOCKD_ ones included, are left alone. Returns the names
// applied. Throws Error (kFailed) naming the variable.
std::vector<std::string> ApplyEnvironment(const char* const* environment, Config& config);

// The --config file could not be opened (missing, or no permission): told apart from an
// invalid configuration because its remedy (and nlockd's exit status) differs.
class ConfigFileUnreadable : public Error {
 public:
  using Error::Error;
};

// Reads a TOML config file over `config` through the settings table (server/config_table.hpp);
// unknown keys are errors (a typo must not be silently ignored), and so are wrong types. Throws
// Error (kFailed) naming the file, line, key and problem; ConfigFileUnreadable when the file
// cannot be opened.
void LoadConfigFile(const std::string& path, Config& config);

// Reads admin.token_file into admin_token (refusing a file that group or others may read) and
// store_password_file into the PostgreSQL password libpq uses (PGPASSWORD in this process's
// environment, never on a command line). Throws Error (kFailed).
void ResolveSecrets(Config& config);
// The secret in a file: its first line. Throws Error if the file cannot be read, is empty or
// is readable by group or others.
std::string ReadSecretFile(const std::string& path);

// The refusals that depend on several settings, made after ResolveSecrets() (the token may come
// from a file) by every path that starts or checks a configuration: --check-config, start-up
// and SIGHUP. Throws Error (kFailed) naming the settings:
// - ha without a postgresql:// store;
// - with a postgresql:// store, a service name (`name`, else the host name) that the store
//   refuses as its node id;
// - two of listen, nsm_listen and admin_listen on one port of overlapping addresses;
// - the admin server on an address other than loopback without admin.token (or token_file),
//   unless admin.allow_unauthenticated_remote says so.
void CheckConfig(const Config& config);

// Whether `host` (an IP literal) is a loopback address: 127.0.0.0/8, ::1, ::ffff:127.x.
bool IsLoopbackHost(const std::string& host);

// The effective configuration as TOML (every key, secrets redacted): --check-config prints it.
std::string RenderEffectiveConfig(const Config& config);
// config/nlockd.toml as shipped: every key at its default, its help as a comment.
std::string RenderConfigTemplate();
// The key list of nlockd.toml(5), in roff.
std::string RenderManKeys();
// The flag list of nlockd(8), in roff: each setting's flag, key, environment variable, default
// and help.
std::string RenderManFlags();
// The synopsis of the README: nlockd with its own flags and one per setting, 100 columns wide.
std::string RenderSynopsis();

std::string DefaultServerName();

}  // namespace nlockd::server
