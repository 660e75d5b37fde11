#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <spdlog/common.h>

#include "store/open_store.hpp"

namespace nlockd::server {

struct ListenAddress {
  std::string host = "0.0.0.0";
  uint16_t port = 4045;
};

// Everything nlockd can be told, from the config file (TOML) and flags. Each field is one
// config key and one flag (DESIGN.md §5); config/nlockd.toml documents them.
struct Config {
  ListenAddress listen;  // listen / --listen
  std::string name;      // name / --name; empty = the host name
  spdlog::level::level_enum log_level = spdlog::level::info;  // log_level / --log-level
  bool rpcbind_register = true;            // rpcbind.register / --rpcbind-register
  std::string rpcbind_host = "127.0.0.1";  // rpcbind.host / --rpcbind-host
  uint16_t rpcbind_port = 111;             // rpcbind.port / --rpcbind-port
  // grace / --grace: seconds of the grace period after a start; 0 for none.
  std::chrono::seconds grace{90};
  // grace_floor / --grace-floor: classic grace (incomplete restored table) never ends early
  // before this long after the last SM_NOTIFY answer: a client retries a reclaim after 5 s.
  std::chrono::seconds grace_floor{10};
  // grace_end_early / --grace-end-early: end grace once every restored lock and share was
  // reclaimed or dropped, instead of at its timer.
  bool grace_end_early = true;
  // persist_locks / --persist-locks: write the lock and share table to the store, so that a
  // restart restores it (fine-grained grace). Off, every restart runs classic grace.
  bool persist_locks = true;
  // nlm.host_key / --nlm-host-key: "address" (default) or "caller_name".
  bool nlm_key_by_caller_name = false;
  // nlm.granted_callback / --granted-callback: "msg" (GRANTED_MSG, default) or "sync" (GRANTED).
  bool nlm_granted_msg = true;
  // nlm.max_hosts / --max-hosts: client hosts monitored and holding state at once.
  size_t max_hosts = 10'000;
  // rpc.* limits; see rpc::ServerOptions for what each stops.
  size_t max_connections = 1024;
  size_t max_record_size = 1 << 20;
  std::chrono::seconds idle_timeout{300};
  // store / --store: where the state number, registrations and locks persist (DESIGN.md §5).
  std::string store = nlockd::store::kDefaultStoreUri;
  // nsm.max_registrations / --nsm-max-registrations: SM_MON registrations held at most.
  size_t nsm_max_registrations = 10'000;
  // nsm.allowlist / --nsm-allowlist (repeatable): addresses besides loopback allowed SM_MON,
  // SM_UNMON, SM_UNMON_ALL and SM_SIMU_CRASH.
  std::vector<std::string> nsm_allowlist;
  // nsm.callback_programs / --nsm-callback-programs (repeatable): programs a registration may
  // name as its status callback.
  std::vector<int32_t> nsm_callback_programs{100021};
  // nsm.check_notifier_address / --nsm-check-notifier-address: act on an SM_NOTIFY only from
  // one of the monitored host's known addresses.
  bool nsm_check_notifier_address = true;
  // nsm.callback_timeout / --nsm-callback-timeout: seconds, each status callback attempt's
  // total deadline.
  std::chrono::seconds nsm_callback_timeout{5};
  // notify.* / --notify-*: the restart notification round (nsm::NotifierOptions).
  uint16_t notify_statd_port = 0;       // every peer's statd port (UDP); 0 asks its rpcbind
  uint16_t notify_rpcbind_port = 111;   // where peers' portmappers listen
  std::chrono::seconds notify_timeout{5};    // each attempt's total deadline
  std::chrono::seconds notify_backoff{2};    // first retry delay; doubles to 120 s
  std::chrono::seconds notify_budget{900};   // a host is given up this long after the round began
  // notify.drop_unreachable: a host given up on has its restored locks dropped and the waiters
  // they blocked served (DESIGN.md "Restart and notification").
  bool notify_drop_unreachable = true;
  // admin_listen / --admin-listen: the admin HTTP server (metrics, REST API); "off" disables it
  // (admin_enabled false). Port 0 picks a free one.
  bool admin_enabled = true;
  ListenAddress admin_listen{"127.0.0.1", 9464};
  // admin.token / --admin-token: when not empty, required as a bearer token by every admin
  // endpoint but /healthz.
  std::string admin_token;
};

// An allowlist entry: an IP literal, normalised ("::ffff:10.0.0.1" -> "10.0.0.1"). Throws Error.
std::string ParseAllowedAddress(const std::string& text);
// A callback program number (1..2^31-1). Throws Error.
int32_t ParseCallbackProgram(int64_t value);

// "address" -> false, "caller_name" -> true; anything else throws Error.
bool ParseHostKey(const std::string& text);
// "msg" -> true, "sync" -> false; anything else throws Error.
bool ParseGrantedCallback(const std::string& text);

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
