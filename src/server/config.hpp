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

// Reads a TOML config file over `config`; unknown keys are errors (a typo must not be silently
// ignored). Throws Error (kFailed) naming the file, key and problem.
void LoadConfigFile(const std::string& path, Config& config);

std::string DefaultServerName();

}  // namespace nlockd::server
