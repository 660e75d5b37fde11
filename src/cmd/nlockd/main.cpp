// nlockd: the NFS network lock manager (NLM) and status monitor (NSM) daemon.
// Parses the config file and flags (DESIGN.md §5) and runs server::Server; no logic here.
#include <cstdlib>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include "base/error.hpp"
#include "base/logging.hpp"
#include "server/config.hpp"
#include "server/server.hpp"

namespace {

using nlockd::server::Config;

// Flags override the config file: each is applied only when given.
struct Flags {
  std::string config_file;
  std::string listen;
  std::string name;
  std::string log_level;
  std::string rpcbind_host;
  uint16_t rpcbind_port = 0;
  bool rpcbind_register = true;
  size_t max_connections = 0;
  size_t max_record_size = 0;
  int64_t idle_timeout = 0;
  int64_t grace = 0;
  int64_t grace_floor = 0;
  bool grace_end_early = true;
  bool persist_locks = true;
  uint16_t notify_statd_port = 0;
  uint16_t notify_rpcbind_port = 0;
  int64_t notify_timeout = 0;
  int64_t notify_backoff = 0;
  int64_t notify_budget = 0;
  bool notify_drop_unreachable = true;
  std::string nlm_host_key;
  std::string granted_callback;
  size_t max_hosts = 0;
  std::string store;
  size_t nsm_max_registrations = 0;
  std::vector<std::string> nsm_allow;
  std::vector<int64_t> nsm_callback_programs;
  bool nsm_check_notifier_address = true;
  int64_t nsm_callback_timeout = 0;
  std::string admin_listen;
  std::string admin_token;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"nlockd: NFS network lock manager (NLM 1/3/4) and status monitor (NSM 1)"};
  Flags flags;
  app.add_option("--config", flags.config_file, "TOML config file (flags override it)")
      ->check(CLI::ExistingFile);
  auto* listen = app.add_option("--listen", flags.listen,
                                "ADDR:PORT for NLM and NSM, TCP and UDP (default 0.0.0.0:4045; "
                                "port 0 picks a free one)");
  auto* name = app.add_option("--name", flags.name,
                              "name sent as mon_name in SM_NOTIFY (default: host name)");
  auto* log_level = app.add_option("--log-level", flags.log_level,
                                   "trace, debug, info, warn, error, critical or off "
                                   "(default info)");
  auto* rpcbind_register =
      app.add_option("--rpcbind-register", flags.rpcbind_register,
                     "register with the portmapper at start, unregister at exit (default true)");
  auto* rpcbind_host = app.add_option("--rpcbind-host", flags.rpcbind_host,
                                      "portmapper address (default 127.0.0.1)");
  auto* rpcbind_port =
      app.add_option("--rpcbind-port", flags.rpcbind_port, "portmapper port (default 111)");
  auto* max_connections = app.add_option("--max-connections", flags.max_connections,
                                         "TCP connections served at once (default 1024)");
  auto* max_record_size =
      app.add_option("--max-record-size", flags.max_record_size,
                     "largest RPC record in bytes; larger ones close the connection "
                     "(default 1048576)");
  auto* idle_timeout = app.add_option("--idle-timeout", flags.idle_timeout,
                                      "seconds before an idle TCP connection is closed "
                                      "(default 300)");
  auto* grace = app.add_option("--grace", flags.grace,
                               "seconds of grace period after a start, for lock reclaims; 0 for "
                               "none (default 90)");
  auto* grace_floor =
      app.add_option("--grace-floor", flags.grace_floor,
                     "seconds after the last SM_NOTIFY answer before a classic grace may end "
                     "early (default 10)")
          ->check(CLI::Range(0, 3600));
  auto* grace_end_early =
      app.add_option("--grace-end-early", flags.grace_end_early,
                     "end grace once every restored lock is reclaimed or dropped (default true)");
  auto* persist_locks =
      app.add_option("--persist-locks", flags.persist_locks,
                     "write the lock table to the store so that restarts restore it (default true)");
  auto* notify_statd_port =
      app.add_option("--notify-statd-port", flags.notify_statd_port,
                     "peers' statd UDP port for SM_NOTIFY; 0 asks their rpcbind (default 0)");
  auto* notify_rpcbind_port = app.add_option("--notify-rpcbind-port", flags.notify_rpcbind_port,
                                             "peers' portmapper port (default 111)")
                                  ->check(CLI::Range(1, 65535));
  auto* notify_timeout = app.add_option("--notify-timeout", flags.notify_timeout,
                                        "seconds, each SM_NOTIFY attempt's deadline (default 5)")
                             ->check(CLI::Range(1, 300));
  auto* notify_backoff =
      app.add_option("--notify-backoff", flags.notify_backoff,
                     "seconds before retrying an unanswered host; doubles to 120 (default 2)")
          ->check(CLI::Range(1, 120));
  auto* notify_budget =
      app.add_option("--notify-budget", flags.notify_budget,
                     "seconds before an unanswered host is given up (default 900)")
          ->check(CLI::Range(1, 86400));
  auto* notify_drop_unreachable =
      app.add_option("--notify-drop-unreachable", flags.notify_drop_unreachable,
                     "drop the restored locks of a host given up on (default true)");
  auto* nlm_host_key = app.add_option("--nlm-host-key", flags.nlm_host_key,
                                      "what identifies an NLM client host: address (default) or "
                                      "caller_name");
  auto* granted_callback =
      app.add_option("--granted-callback", flags.granted_callback,
                     "how a blocked lock is granted: msg (GRANTED_MSG, default) or sync (GRANTED)");
  auto* max_hosts = app.add_option("--max-hosts", flags.max_hosts,
                                   "client hosts monitored and holding state at once "
                                   "(default 10000)");
  auto* store = app.add_option("--store", flags.store,
                               "memory:, sqlite:PATH or postgresql://user@host/db "
                               "(default sqlite:./var/nlockd.db)");
  auto* nsm_max_registrations =
      app.add_option("--nsm-max-registrations", flags.nsm_max_registrations,
                     "monitor registrations held at most (default 10000)");
  auto* nsm_allow = app.add_option("--nsm-allowlist", flags.nsm_allow,
                                   "address besides loopback allowed SM_MON, SM_UNMON, "
                                   "SM_UNMON_ALL and SM_SIMU_CRASH (repeatable; default none)");
  auto* nsm_callback_programs =
      app.add_option("--nsm-callback-programs", flags.nsm_callback_programs,
                     "program an SM_MON may name as its callback (repeatable; default 100021)");
  auto* nsm_check_notifier_address =
      app.add_option("--nsm-check-notifier-address", flags.nsm_check_notifier_address,
                     "act on SM_NOTIFY only from a known address of the host (default true)");
  auto* nsm_callback_timeout =
      app.add_option("--nsm-callback-timeout", flags.nsm_callback_timeout,
                     "seconds, each status callback attempt's total deadline (default 5)");
  auto* admin_listen =
      app.add_option("--admin-listen", flags.admin_listen,
                     "ADDR:PORT of the admin HTTP server (metrics, REST API, nlockctl), or off "
                     "(default 127.0.0.1:9464; port 0 picks a free one)");
  auto* admin_token = app.add_option("--admin-token", flags.admin_token,
                                     "bearer token the admin server requires on every endpoint "
                                     "but /healthz (default none)");
  CLI11_PARSE(app, argc, argv);

  nlockd::SetUpLogging(spdlog::level::info);
  try {
    Config config;
    if (!flags.config_file.empty()) nlockd::server::LoadConfigFile(flags.config_file, config);
    if (*listen) config.listen = nlockd::server::ParseListenAddress(flags.listen);
    if (*name) config.name = flags.name;
    if (*log_level) {
      auto level = nlockd::ParseLogLevel(flags.log_level);
      if (!level) throw nlockd::Error(nlockd::ErrorKind::kFailed, "unknown --log-level");
      config.log_level = *level;
    }
    if (*rpcbind_register) config.rpcbind_register = flags.rpcbind_register;
    if (*rpcbind_host) config.rpcbind_host = flags.rpcbind_host;
    if (*rpcbind_port) config.rpcbind_port = flags.rpcbind_port;
    if (*max_connections) config.max_connections = flags.max_connections;
    if (*max_record_size) config.max_record_size = flags.max_record_size;
    if (*idle_timeout) config.idle_timeout = std::chrono::seconds(flags.idle_timeout);
    if (*grace) config.grace = std::chrono::seconds(flags.grace);
    if (*grace_floor) config.grace_floor = std::chrono::seconds(flags.grace_floor);
    if (*grace_end_early) config.grace_end_early = flags.grace_end_early;
    if (*persist_locks) config.persist_locks = flags.persist_locks;
    if (*notify_statd_port) config.notify_statd_port = flags.notify_statd_port;
    if (*notify_rpcbind_port) config.notify_rpcbind_port = flags.notify_rpcbind_port;
    if (*notify_timeout) config.notify_timeout = std::chrono::seconds(flags.notify_timeout);
    if (*notify_backoff) config.notify_backoff = std::chrono::seconds(flags.notify_backoff);
    if (*notify_budget) config.notify_budget = std::chrono::seconds(flags.notify_budget);
    if (*notify_drop_unreachable) config.notify_drop_unreachable = flags.notify_drop_unreachable;
    if (*nlm_host_key) {
      config.nlm_key_by_caller_name = nlockd::server::ParseHostKey(flags.nlm_host_key);
    }
    if (*granted_callback) {
      config.nlm_granted_msg = nlockd::server::ParseGrantedCallback(flags.granted_callback);
    }
    if (*max_hosts) config.max_hosts = flags.max_hosts;
    if (*store) config.store = flags.store;
    if (*nsm_max_registrations) config.nsm_max_registrations = flags.nsm_max_registrations;
    if (*nsm_allow) {
      config.nsm_allowlist.clear();
      for (const auto& text : flags.nsm_allow) {
        config.nsm_allowlist.push_back(nlockd::server::ParseAllowedAddress(text));
      }
    }
    if (*nsm_callback_programs) {
      config.nsm_callback_programs.clear();
      for (int64_t program : flags.nsm_callback_programs) {
        config.nsm_callback_programs.push_back(nlockd::server::ParseCallbackProgram(program));
      }
    }
    if (*nsm_check_notifier_address) {
      config.nsm_check_notifier_address = flags.nsm_check_notifier_address;
    }
    if (*nsm_callback_timeout) {
      if (flags.nsm_callback_timeout < 1 || flags.nsm_callback_timeout > 300) {
        throw nlockd::Error(nlockd::ErrorKind::kFailed, "--nsm-callback-timeout: 1..300");
      }
      config.nsm_callback_timeout = std::chrono::seconds(flags.nsm_callback_timeout);
    }
    if (*admin_listen) nlockd::server::ApplyAdminListen(flags.admin_listen, config);
    if (*admin_token) config.admin_token = flags.admin_token;
    spdlog::set_level(config.log_level);

    nlockd::server::Server server(std::move(config));
    server.Run();
  } catch (const std::exception& e) {
    spdlog::critical("nlockd cannot run: {}", e.what());
    return EXIT_FAILURE;
  }
  return EXIT_SUCCESS;
}
