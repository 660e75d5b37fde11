// nlockd: the NFS network lock manager (NLM) and status monitor (NSM) daemon.
// Parses the config file and flags, then runs one nlockd::LockService (the public library API,
// the same one an embedding NFS server uses) on its own listener, with the admin HTTP server in
// front of its admin views. No lock logic here.
#include <chrono>
#include <cstdlib>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <pthread.h>
#include <signal.h>
#include <spdlog/spdlog.h>

#include "admin/admin_server.hpp"
#include "base/error.hpp"
#include "base/logging.hpp"
#include "nlockd/lock_service.hpp"
#include "server/config.hpp"

namespace {

using nlockd::server::Config;
using std::chrono::seconds;

// Flags override the config file, which is read after parsing: each flag keeps its value and
// an applier that writes it into the Config only when the flag was given.
class Flags {
 public:
  explicit Flags(CLI::App& app) : app_(app) {}

  template <typename T>
  CLI::Option* Add(const std::string& name, const std::string& help,
                   std::function<void(Config&, const T&)> apply) {
    auto value = std::make_shared<T>();
    CLI::Option* option = app_.add_option(name, *value, help);
    appliers_.push_back([option, value, apply = std::move(apply)](Config& config) {
      if (*option) apply(config, *value);
    });
    return option;
  }

  void ApplyTo(Config& config) const {
    for (const auto& apply : appliers_) apply(config);
  }

 private:
  CLI::App& app_;
  std::vector<std::function<void(Config&)>> appliers_;
};

void AddFlags(Flags& flags) {
  namespace server = nlockd::server;
  using Text = std::string;
  flags.Add<Text>("--listen",
                  "ADDR:PORT for NLM and NSM, TCP and UDP (default 0.0.0.0:4045; port 0 picks a "
                  "free one)",
                  [](Config& c, const Text& v) { c.listen = server::ParseListenAddress(v); });
  flags.Add<Text>("--serve",
                  "programs served and registered: nlm,nsm (default), nsm (in place of "
                  "rpc.statd) or nlm (beside the system's status monitor)",
                  [](Config& c, const Text& v) { server::ApplyServe(v, c); });
  flags.Add<Text>("--nsm-listen",
                  "ADDR:PORT to serve NSM on a port of its own (default: NSM shares --listen)",
                  [](Config& c, const Text& v) { c.nsm_listen = server::ParseListenAddress(v); });
  flags.Add<uint16_t>("--callback-source-port",
                      "fixed source port for status callbacks and SM_NOTIFY; 0 any (default 0)",
                      [](Config& c, const uint16_t& v) { c.callback_source_port = v; });
  flags.Add<Text>("--name", "name sent as mon_name in SM_NOTIFY (default: host name)",
                  [](Config& c, const Text& v) { c.name = v; });
  flags.Add<Text>("--log-level", "trace, debug, info, warn, error, critical or off (default info)",
                  [](Config& c, const Text& v) {
                    auto level = nlockd::ParseLogLevel(v);
                    if (!level)
                      throw nlockd::Error(nlockd::ErrorKind::kFailed, "unknown --log-level");
                    c.log_level = *level;
                  });
  flags.Add<bool>("--rpcbind-register",
                  "register with the portmapper at start, unregister at exit (default true)",
                  [](Config& c, const bool& v) { c.rpcbind_register = v; });
  flags.Add<Text>("--rpcbind-host", "portmapper address (default 127.0.0.1)",
                  [](Config& c, const Text& v) { c.rpcbind_host = v; });
  flags.Add<uint16_t>("--rpcbind-port", "portmapper port (default 111)",
                      [](Config& c, const uint16_t& v) { c.rpcbind_port = v; });
  flags.Add<size_t>("--max-connections", "TCP connections served at once (default 1024)",
                    [](Config& c, const size_t& v) { c.max_connections = v; });
  flags.Add<size_t>("--max-record-size",
                    "largest RPC record in bytes; larger ones close the connection "
                    "(default 1048576)",
                    [](Config& c, const size_t& v) { c.max_record_size = v; });
  flags.Add<int64_t>("--idle-timeout",
                     "seconds before an idle TCP connection is closed (default 300)",
                     [](Config& c, const int64_t& v) { c.idle_timeout = seconds(v); });
  flags
      .Add<int64_t>("--grace",
                    "seconds of grace period after a start, for lock reclaims; 0 for none "
                    "(default 90)",
                    [](Config& c, const int64_t& v) { c.grace = seconds(v); })
      ->check(CLI::Range(0, 3600));
  flags
      .Add<int64_t>("--grace-floor",
                    "seconds after the last SM_NOTIFY answer before a classic grace may end "
                    "early (default 10)",
                    [](Config& c, const int64_t& v) { c.grace_floor = seconds(v); })
      ->check(CLI::Range(0, 3600));
  flags.Add<bool>("--grace-end-early",
                  "end grace once every restored lock is reclaimed or dropped (default true)",
                  [](Config& c, const bool& v) { c.grace_end_early = v; });
  flags.Add<bool>("--persist-locks",
                  "write the lock table to the store so that restarts restore it (default true)",
                  [](Config& c, const bool& v) { c.persist_locks = v; });
  flags.Add<uint16_t>("--notify-statd-port",
                      "peers' statd UDP port for SM_NOTIFY; 0 asks their rpcbind (default 0)",
                      [](Config& c, const uint16_t& v) { c.notify_statd_port = v; });
  flags
      .Add<uint16_t>("--notify-rpcbind-port", "peers' portmapper port (default 111)",
                     [](Config& c, const uint16_t& v) { c.notify_rpcbind_port = v; })
      ->check(CLI::Range(1, 65535));
  flags
      .Add<int64_t>("--notify-timeout", "seconds, each SM_NOTIFY attempt's deadline (default 5)",
                    [](Config& c, const int64_t& v) { c.notify_timeout = seconds(v); })
      ->check(CLI::Range(1, 300));
  flags
      .Add<int64_t>("--notify-backoff",
                    "seconds before retrying an unanswered host; doubles to 120 (default 2)",
                    [](Config& c, const int64_t& v) { c.notify_backoff = seconds(v); })
      ->check(CLI::Range(1, 120));
  flags
      .Add<int64_t>("--notify-budget",
                    "seconds before an unanswered host is given up (default 900)",
                    [](Config& c, const int64_t& v) { c.notify_budget = seconds(v); })
      ->check(CLI::Range(1, 86400));
  flags.Add<bool>("--notify-drop-unreachable",
                  "drop the restored locks of a host given up on (default true)",
                  [](Config& c, const bool& v) { c.notify_drop_unreachable = v; });
  flags.Add<Text>(
      "--nlm-host-key", "what identifies an NLM client host: address (default) or caller_name",
      [](Config& c, const Text& v) { c.nlm_key_by_caller_name = server::ParseHostKey(v); });
  flags.Add<Text>(
      "--granted-callback",
      "how a blocked lock is granted: msg (GRANTED_MSG, default) or sync (GRANTED)",
      [](Config& c, const Text& v) { c.nlm_granted_msg = server::ParseGrantedCallback(v); });
  flags.Add<size_t>("--max-hosts",
                    "client hosts monitored and holding state at once (default 10000)",
                    [](Config& c, const size_t& v) { c.max_hosts = v; });
  flags.Add<Text>("--store",
                  "memory:, sqlite:PATH or postgresql://user@host/db "
                  "(default sqlite:./var/nlockd.db)",
                  [](Config& c, const Text& v) { c.store = v; });
  flags.Add<size_t>("--nsm-max-registrations", "monitor registrations held at most (default 10000)",
                    [](Config& c, const size_t& v) { c.nsm_max_registrations = v; });
  flags.Add<std::vector<Text>>(
      "--nsm-allowlist",
      "address besides loopback allowed SM_MON, SM_UNMON, SM_UNMON_ALL and SM_SIMU_CRASH "
      "(repeatable; default none)",
      [](Config& c, const std::vector<Text>& v) {
        c.nsm_allowlist.clear();
        for (const auto& text : v) c.nsm_allowlist.push_back(server::ParseAllowedAddress(text));
      });
  flags.Add<std::vector<int64_t>>(
      "--nsm-callback-programs",
      "program an SM_MON may name as its callback (repeatable; default 100021)",
      [](Config& c, const std::vector<int64_t>& v) {
        c.nsm_callback_programs.clear();
        for (int64_t program : v) {
          c.nsm_callback_programs.push_back(server::ParseCallbackProgram(program));
        }
      });
  flags.Add<bool>("--nsm-check-notifier-address",
                  "act on SM_NOTIFY only from a known address of the host (default true)",
                  [](Config& c, const bool& v) { c.nsm_check_notifier_address = v; });
  flags
      .Add<int64_t>("--nsm-callback-timeout",
                    "seconds, each status callback attempt's total deadline (default 5)",
                    [](Config& c, const int64_t& v) { c.nsm_callback_timeout = seconds(v); })
      ->check(CLI::Range(1, 300));
  flags.Add<Text>("--admin-listen",
                  "ADDR:PORT of the admin HTTP server (metrics, REST API, nlockctl), or off "
                  "(default 127.0.0.1:9464; port 0 picks a free one)",
                  [](Config& c, const Text& v) { server::ApplyAdminListen(v, c); });
  flags.Add<Text>("--admin-token",
                  "bearer token the admin server requires on every endpoint but /healthz "
                  "(default none)",
                  [](Config& c, const Text& v) { c.admin_token = v; });
}

// The admin HTTP server over the service's admin views (the same JSON as the library gives).
std::unique_ptr<nlockd::admin::AdminServer> StartAdmin(const Config& config,
                                                       nlockd::LockService& service) {
  if (!config.admin_enabled) {
    spdlog::info("nlockd admin server off");
    return nullptr;
  }
  nlockd::admin::AdminServerOptions options;
  options.token = config.admin_token;
  auto handler = [&service](const nlockd::admin::HttpRequest& request) {
    nlockd::AdminResponse answer = service.HandleAdminRequest(
        {request.method, request.target, request.authorization, request.body});
    return nlockd::admin::HttpResponse{answer.status, std::move(answer.content_type),
                                       std::move(answer.body), std::move(answer.headers)};
  };
  auto server = std::make_unique<nlockd::admin::AdminServer>(handler, options);
  server->Start(config.admin_listen.host, config.admin_listen.port);
  // Tests and scripts wait for this line to learn the port (with --admin-listen ADDR:0).
  spdlog::info("nlockd admin listening address={} port={} token={}", config.admin_listen.host,
               server->port(), config.admin_token.empty() ? "off" : "on");
  return server;
}

// Runs the daemon until SIGINT or SIGTERM. The signals are blocked in every thread (those the
// service and the admin server start inherit the mask) and taken here with sigwait.
void Run(Config config) {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  if (config.name.empty()) config.name = nlockd::server::DefaultServerName();
  nlockd::LockService service(config);
  // Up before the store loads, so that /healthz answers and /readyz says "not ready" meanwhile.
  std::unique_ptr<nlockd::admin::AdminServer> admin = StartAdmin(config, service);
  uint16_t port = service.Listen(config.listen.host, config.listen.port);
  service.Start();  // Returns once serving, so /readyz says ready before "listening" is logged.
  // Tests and scripts wait for this line to learn the port (with --listen ADDR:0).
  spdlog::info("nlockd listening address={} port={} transports=tcp,udp name={}", config.listen.host,
               port, config.name);

  int signal = 0;
  sigwait(&signals, &signal);
  spdlog::info("nlockd received signal {}; shutting down", signal);
  service.Shutdown();
  if (admin) admin->Stop();
  spdlog::info("nlockd stopped");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"nlockd: NFS network lock manager (NLM 1/3/4) and status monitor (NSM 1)"};
  std::string config_file;
  app.add_option("--config", config_file, "TOML config file (flags override it)")
      ->check(CLI::ExistingFile);
  Flags flags(app);
  AddFlags(flags);
  CLI11_PARSE(app, argc, argv);

  nlockd::SetUpLogging(spdlog::level::info);
  try {
    Config config;
    if (!config_file.empty()) nlockd::server::LoadConfigFile(config_file, config);
    flags.ApplyTo(config);
    spdlog::set_level(config.log_level);

    Run(std::move(config));
  } catch (const std::exception& e) {
    spdlog::critical("nlockd cannot run: {}", e.what());
    return EXIT_FAILURE;
  }
  return EXIT_SUCCESS;
}
