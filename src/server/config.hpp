// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <spdlog/common.h>

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
};

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

// Reads a TOML config file over `config` through the settings table (server/config_table.hpp);
// unknown keys are errors (a typo must not be silently ignored), and so are wrong types. Throws
// Error (kFailed) naming the file, line, key and problem.
void LoadConfigFile(const std::string& path, Config& config);

// Reads admin.token_file into admin_token (refusing a file that group or others may read) and
// store_password_file into the PostgreSQL password libpq uses (PGPASSWORD in this process's
// environment, never on a command line). Throws Error (kFailed).
void ResolveSecrets(Config& config);
// The secret in a file: its first line. Throws Error if the file cannot be read, is empty or
// is readable by group or others.
std::string ReadSecretFile(const std::string& path);

// The effective configuration as TOML (every key, secrets redacted): --check-config prints it.
std::string RenderEffectiveConfig(const Config& config);
// config/nlockd.toml as shipped: every key at its default, its help as a comment.
std::string RenderConfigTemplate();
// The key list of nlockd.toml(5), in roff.
std::string RenderManKeys();

std::string DefaultServerName();

}  // namespace nlockd::server
