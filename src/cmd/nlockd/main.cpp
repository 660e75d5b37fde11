// SPDX-License-Identifier: Apache-2.0
// nlockd: the NFS network lock manager (NLM) and status monitor (NSM) daemon.
// Parses the config file and flags (both through the settings table, server/config_table.hpp),
// then runs one nlockd::LockService (the public library API, the same one an embedding NFS
// server uses) on its own listener, with the admin HTTP server in front of its admin views.
// No lock logic here.
//
// Exit status (nlockd(8), EXIT STATUS), sysexits(3) where one fits: 0 after a clean stop or a
// valid --check-config; EX_USAGE (64) for a command line that does not parse; EX_NOINPUT (66)
// when the --config file cannot be read; EX_CONFIG (78) for a configuration refused (the same
// refusals for --check-config and for a start); 1 when the daemon failed while starting or
// running; 75 (EX_TEMPFAIL) when an HA node lost its lease (server/ha_lease_keeper.hpp).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <pthread.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sysexits.h>
#include <unistd.h>

#include "admin/admin_http.hpp"
#include "admin/process_metrics.hpp"
#include "admin/router.hpp"
#include "base/error.hpp"
#include "base/logging.hpp"
#include "base/redact.hpp"
#include "cmd/nlockd/admin_module.hpp"
#include "cmd/nlockd/log_file.hpp"
#include "cmd/nlockd/pid_file.hpp"
#include "cmd/nlockd/systemd_notifier.hpp"
#include "nlockd/lock_service.hpp"
#include "nlockd_build_info.hpp"
#include "server/config.hpp"
#include "server/config_table.hpp"
#include "server/nfs_conf.hpp"
#include "server/statd_handover.hpp"

namespace {

using nlockd::server::Config;
using nlockd::server::Setting;
using nlockd::server::SettingType;

// One flag per setting of the table; the config file is read after parsing, then the flags that
// were given are applied over it (flags override the file), with the file's checks.
class Flags {
 public:
  explicit Flags(CLI::App& app) {
    Config defaults;
    for (const Setting& setting : nlockd::server::Settings()) {
      auto& texts = values_.emplace_back(std::make_unique<std::vector<std::string>>());
      std::string help =
          fmt::format("{} (config key {}; environment {}; default {})", setting.help, setting.key,
                      nlockd::server::EnvironmentName(setting.key),
                      setting.secret ? std::string("none")
                                     : nlockd::server::FormatValue(setting.get(defaults)));
      CLI::Option* option = app.add_option(std::string(setting.flag), *texts, help);
      bool list =
          setting.type == SettingType::kStringList || setting.type == SettingType::kIntegerList;
      if (!list) option->expected(1)->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
      option->type_name(nlockd::server::FlagValueName(setting));
      options_.push_back({&setting, option, texts.get()});
    }
  }

  // REQUIRES: the command line was parsed.
  void ApplyTo(Config& config) const {
    for (const auto& [setting, option, texts] : options_) {
      if (option->count() == 0) continue;
      nlockd::server::ApplySetting(*setting, nlockd::server::ParseFlagValue(*setting, *texts),
                                   "flag " + std::string(setting->flag), config);
    }
  }

 private:
  struct Entry {
    const Setting* setting;
    CLI::Option* option;
    std::vector<std::string>* texts;
  };
  std::vector<std::unique_ptr<std::vector<std::string>>> values_;
  std::vector<Entry> options_;
};

// Where values came from besides the file and the flags, for --check-config.
struct ConfigSources {
  std::vector<std::string> environment;                  // NLOCKD_* variables applied
  std::vector<nlockd::server::NfsConfSetting> nfs_conf;  // settings nfs.conf decided
  std::vector<std::string> nfs_conf_warnings;
};

// The config file (if any), the NLOCKD_* environment variables and the flags on top of `base`,
// in that order.
Config LoadLayers(Config base, const std::string& config_file, const Flags& flags,
                  std::vector<std::string>& from_environment) {
  if (!config_file.empty()) nlockd::server::LoadConfigFile(config_file, base);
  from_environment = nlockd::server::ApplyEnvironment(environ, base);
  flags.ApplyTo(base);
  return base;
}

// The configuration: nfs.conf's values for the roles served when `nfs_conf` names it, then the
// file, the NLOCKD_* environment variables and the flags (each overrides the one before),
// secrets read and checked as a whole: the one path of --check-config, start-up and SIGHUP.
// Which file to read and which roles apply come from the layers above nfs.conf, so they are
// read twice when it is used.
Config LoadConfig(const std::string& config_file, const Flags& flags,
                  ConfigSources* sources = nullptr) {
  ConfigSources found;
  Config config = LoadLayers(Config{}, config_file, flags, found.environment);
  if (!config.nfs_conf.empty()) {
    nlockd::server::NfsConf conf =
        nlockd::server::NfsConf::Load(config.nfs_conf, found.nfs_conf_warnings);
    const bool statd_role = config.serve_nsm;
    const bool lockd_role = config.serve_nlm && !config.serve_nsm;
    Config base;
    std::vector<nlockd::server::NfsConfSetting> taken =
        nlockd::server::ApplyNfsConf(conf, statd_role, lockd_role, base, found.nfs_conf_warnings);
    Config layered = LoadLayers(std::move(base), config_file, flags, found.environment);
    // nfs.conf decided a setting when the layers above it alone would have given another value.
    for (auto& setting : taken) {
      const Setting* entry = nlockd::server::FindSetting(setting.key);
      if (entry->get(layered) != entry->get(config)) found.nfs_conf.push_back(std::move(setting));
    }
    config = std::move(layered);
  }
  nlockd::server::ResolveSecrets(config);
  nlockd::server::CheckConfig(config);
  if (sources != nullptr) *sources = std::move(found);
  return config;
}

// EX_NOINPUT for a --config file that cannot be read, EX_CONFIG for any other refusal.
int ConfigExitStatus(const std::exception& e) {
  return dynamic_cast<const nlockd::server::ConfigFileUnreadable*>(&e) != nullptr ? EX_NOINPUT
                                                                                  : EX_CONFIG;
}

// Who may use the admin server: the token and whether writes need one, which SIGHUP may change
// while HTTP threads check requests against them.
class AdminPolicy {
 public:
  AdminPolicy(std::string token, bool open_writes)
      : token_(std::move(token)), open_writes_(open_writes) {}
  void Set(std::string token, bool open_writes) {
    std::lock_guard lock(mutex_);
    token_ = std::move(token);
    open_writes_ = open_writes;
  }
  // nullopt when the request may go on; otherwise the refusal.
  std::optional<nlockd::admin::HttpResponse> Check(const nlockd::admin::HttpRequest& request,
                                                   std::string_view path) const {
    std::lock_guard lock(mutex_);
    if (path == "/healthz") return std::nullopt;
    if (!nlockd::admin::BearerTokenMatches(request.authorization, token_)) {
      return nlockd::admin::UnauthorizedResponse();
    }
    bool write = request.method != "GET" && request.method != "HEAD";
    if (write && token_.empty() && !open_writes_) {
      return nlockd::admin::ErrorResponse(
          403, "forbidden",
          "admin requests that change state need admin.token (or admin.token_file); "
          "admin.open_writes = true serves them without one");
    }
    return std::nullopt;
  }

 private:
  mutable std::mutex mutex_;
  std::string token_;
  bool open_writes_;
};

// The running service, if any, as the admin server's HTTP threads see it. An HA node replaces
// it after a planned release; Set() waits for the requests using the old one.
class ServiceSlot {
 public:
  void Set(nlockd::LockService* service) {
    std::unique_lock lock(mutex_);
    service_ = service;
  }
  // Calls use(service or null) with the service kept from being replaced meanwhile.
  template <typename Use>
  auto With(Use use) const {
    std::shared_lock lock(mutex_);
    return use(service_);
  }

 private:
  mutable std::shared_mutex mutex_;
  nlockd::LockService* service_ = nullptr;  // guarded by mutex_
};

// The admin HTTP server over the service's admin views (the same JSON as the library gives).
// The daemon checks the token itself (the service gets none) so that SIGHUP can change it.
// While `service` holds no running service, an HA node answers from `ha` (its role as a
// standby); `service` and `ha` must outlive the server.
// /metrics also carries the process's own metrics (process_*), which the daemon adds: the
// library leaves them to its host.
// The server comes from a module (cmd/nlockd/admin_module.hpp), loaded at the first call.
std::unique_ptr<nlockd::admin::AdminHttpServer> StartAdmin(const Config& config,
                                                           const ServiceSlot& service,
                                                           const nlockd::HaStatus* ha,
                                                           const AdminPolicy& policy) {
  if (!config.admin_enabled) {
    spdlog::info("nlockd admin server off");
    return nullptr;
  }
  auto handler = [&service, ha, &policy](const nlockd::admin::HttpRequest& request) {
    static const nlockd::admin::ProcessMetrics process_metrics;
    std::string_view path = std::string_view(request.target).substr(0, request.target.find('?'));
    if (auto refusal = policy.Check(request, path)) return *std::move(refusal);
    const nlockd::AdminRequest call{request.method, request.target, request.authorization,
                                    request.body};
    return service.With([&](nlockd::LockService* running) {
      if (running == nullptr && ha == nullptr) {
        return nlockd::admin::ErrorResponse(503, "unavailable", "starting");
      }
      nlockd::AdminResponse answer =
          running != nullptr ? running->HandleAdminRequest(call) : ha->HandleAdminRequest(call);
      if (path == "/metrics" && request.method == "GET" && answer.status == 200) {
        answer.body += process_metrics.Serialize();
      }
      return nlockd::admin::HttpResponse{answer.status, std::move(answer.content_type),
                                         std::move(answer.body), std::move(answer.headers)};
    });
  };
  std::unique_ptr<nlockd::admin::AdminHttpServer> server =
      nlockd::cmd::LoadAdminHttpServer(handler);
  server->Start(config.admin_listen.host, config.admin_listen.port);
  // Tests and scripts wait for this line to learn the port (with --admin-listen ADDR:0).
  spdlog::info("nlockd admin listening address={} port={} token={} writes={}",
               config.admin_listen.host, server->port(), config.admin_token.empty() ? "off" : "on",
               !config.admin_token.empty() ? "token"
               : config.admin_open_writes  ? "open"
                                           : "refused");
  return server;
}

// SIGHUP: reads the file (and the flags over it) again, applies what can change while running
// (the settings marked reloadable: the daemon's own here, the service's through
// LockService::Reload) and logs the rest as needing a restart. A file that no longer loads
// changes nothing.
void Reload(const std::string& config_file, const Flags& flags, Config& current,
            AdminPolicy& policy, nlockd::LockService& service) {
  Config next;
  try {
    next = LoadConfig(config_file, flags);
  } catch (const std::exception& e) {
    spdlog::error("nlockd reload failed, configuration unchanged error={}",
                  nlockd::LogValue(e.what()));
    return;
  }
  if (next.name.empty()) next.name = current.name;
  // What would run: the current configuration with the reloadable values of the new one. It
  // must pass the same checks as a start (a token removed while the admin server listens on a
  // public address must not slip in through a reload).
  Config merged = current;
  for (const Setting& setting : nlockd::server::Settings()) {
    if (setting.reloadable) setting.apply(setting.get(next), merged);  // the token among them
  }
  try {
    nlockd::server::CheckConfig(merged);
  } catch (const std::exception& e) {
    spdlog::error("nlockd reload refused, configuration unchanged error={}",
                  nlockd::LogValue(e.what()));
    return;
  }
  std::vector<std::string> applied;
  std::vector<std::string> need_restart;
  for (const Setting& setting : nlockd::server::Settings()) {
    if (setting.get(current) == setting.get(next)) continue;
    (setting.reloadable ? applied : need_restart).emplace_back(setting.key);
  }
  // The token may come from a file whose contents changed while the key did not.
  bool token_changed = next.admin_token != current.admin_token;
  if (token_changed && std::find(applied.begin(), applied.end(), "admin.token") == applied.end()) {
    applied.emplace_back("admin.token");
  }
  if (next.log_level != current.log_level) spdlog::set_level(next.log_level);
  if (token_changed || next.admin_open_writes != current.admin_open_writes) {
    policy.Set(next.admin_token, next.admin_open_writes);
  }
  // The running configuration takes the reloadable values (already checked; the token among
  // them); the keys that need a restart keep theirs. The service applies its part.
  current = std::move(merged);
  service.Reload(current);
  spdlog::info("nlockd reloaded config={} applied={} needs_restart={}",
               nlockd::LogValue(config_file),
               nlockd::LogValue(fmt::format("{}", fmt::join(applied, ","))),
               nlockd::LogValue(fmt::format("{}", fmt::join(need_restart, ","))));
  if (!need_restart.empty()) {
    spdlog::warn("nlockd reload: changed keys take effect only after a restart keys={}",
                 nlockd::LogValue(fmt::format("{}", fmt::join(need_restart, ","))));
  }
}

// The service's options: the configuration without the admin token, which StartAdmin's handler
// checks itself so that SIGHUP can change it.
nlockd::Options ServiceOptions(const Config& config) {
  nlockd::Options options = config;
  options.admin_token.clear();
  return options;
}

// Listens as the configuration says and starts the service.
void ListenAndStart(const Config& config, nlockd::LockService& service) {
  // NSM on a port of its own when nsm_listen says so (rpc.statd has one); NLM stays on listen.
  const bool nsm_apart = config.nsm_listen.has_value() && config.serve_nsm;
  uint16_t port = 0;
  if (!nsm_apart) {
    port = service.Listen(config.listen.host, config.listen.port);
  } else if (config.serve_nlm) {
    port = service.Listen(config.listen.host, config.listen.port, {nlockd::kNlmProgram});
  }
  uint16_t nsm_port = 0;
  if (nsm_apart) {
    nsm_port =
        service.Listen(config.nsm_listen->host, config.nsm_listen->port, {nlockd::kNsmProgram});
  }
  service.Start();  // Returns once serving, so /readyz says ready before "listening" is logged.
  if (nsm_apart) {
    spdlog::info("nlockd nsm listening address={} port={} transports=tcp,udp",
                 config.nsm_listen->host, nsm_port);
  }
  // Tests and scripts wait for this line to learn the port (with --listen ADDR:0); with NSM
  // alone on its own port, that is the port.
  spdlog::info("nlockd listening address={} port={} transports=tcp,udp name={}",
               port != 0 ? config.listen.host : config.nsm_listen->host,
               port != 0 ? port : nsm_port, nlockd::LogValue(config.name));
}

// Runs the daemon until SIGINT or SIGTERM; SIGHUP reloads; SIGUSR1 reopens the log file
// (log_file; after logrotate moved it); SIGUSR2 sends the restart notification that notify.hold
// holds back (nlockd-statd's rpc-statd-notify.service, once nfsd runs). The signals are blocked in
// every thread (those the service and the admin server start inherit the mask) and taken here with
// sigwait. With ha, a planned release (POST /api/v1/service/release) wakes this thread with SIGUSR1
// too: it shuts the service down (releasing the lease), and builds a new one that waits as standby,
// leaving the lease to the other nodes for one lease first. `log_file` is null without log_file.
void Run(Config config, const std::string& config_file, const Flags& flags,
         nlockd::cmd::ReopenableFileSink* log_file) {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGHUP);
  sigaddset(&signals, SIGUSR1);
  sigaddset(&signals, SIGUSR2);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  if (config.name.empty()) config.name = nlockd::server::DefaultServerName();
  AdminPolicy policy(config.admin_token, config.admin_open_writes);
  ServiceSlot running;
  std::unique_ptr<nlockd::admin::AdminHttpServer> admin;
  // With ha the service's constructor waits as standby; the admin server answers meanwhile
  // from the HA status (role, holder, epoch), so that operators see the standby.
  std::shared_ptr<nlockd::HaStatus> ha_status;
  std::atomic<bool> release_requested{false};
  const pthread_t main_thread = pthread_self();
  if (config.ha) {
    ha_status = std::make_shared<nlockd::HaStatus>();
    ha_status->SetReleaseHandler([&release_requested, main_thread] {
      release_requested.store(true);
      pthread_kill(main_thread, SIGUSR1);
    });
    admin = StartAdmin(config, running, ha_status.get(), policy);
  }
  nlockd::cmd::SystemdNotifier systemd(ha_status);
  if (ha_status) systemd.Ready();  // as standby until the lease is ours

  for (;;) {
    // With ha, waits as standby until this node holds the lease.
    std::unique_ptr<nlockd::LockService> service =
        ha_status ? std::make_unique<nlockd::LockService>(ServiceOptions(config), ha_status)
                  : std::make_unique<nlockd::LockService>(ServiceOptions(config));
    running.Set(service.get());
    systemd.Attach(service.get());
    ListenAndStart(config, *service);
    // Without ha, up once the service serves (its restart notification round begun): loading
    // the admin module and starting its threads would otherwise delay the round, most of all
    // as the status monitor of a slow machine's boot. Before READY=1, which the resource
    // agents follow with /readyz.
    if (!admin) admin = StartAdmin(config, running, nullptr, policy);
    systemd.Ready();

    bool release = false;
    for (;;) {
      int signal = 0;
      sigwait(&signals, &signal);
      if (signal == SIGHUP) {
        systemd.Reloading();
        Reload(config_file, flags, config, policy, *service);
        systemd.Ready();
        continue;
      }
      if (signal == SIGUSR2) {
        spdlog::info("nlockd received SIGUSR2: the restart notification goes out now if held");
        service->ReleaseNotificationHold();
        continue;
      }
      if (signal == SIGUSR1) {
        if (log_file != nullptr) {
          try {
            log_file->Reopen();
            spdlog::info("nlockd log file reopened path={}", nlockd::LogValue(log_file->path()));
          } catch (const std::exception& e) {
            spdlog::error("nlockd cannot reopen the log file error={}", nlockd::LogValue(e.what()));
          }
        }
        if (!release_requested.exchange(false)) continue;  // logrotate's, not a release
        release = true;
        break;
      }
      spdlog::info("nlockd received signal {}; shutting down", signal);
      break;
    }
    if (release) {
      spdlog::info("nlockd releasing service {} for another node; this node becomes standby",
                   nlockd::LogValue(config.name));
      systemd.Attach(nullptr);
      running.Set(nullptr);
      service->Shutdown();  // releases the lease and runs ha_on_standby
      service.reset();
      ha_status->HoldOffNextTakeover(config.ha_lease);
      continue;
    }
    systemd.Stopping();
    service->Shutdown();
    if (admin) admin->Stop();
    running.Set(nullptr);
    spdlog::info("nlockd stopped");
    return;
  }
}

std::string VersionText() {
  return fmt::format("nlockd {} (revision {}, {} build)\n", NLOCKD_BUILD_VERSION,
                     NLOCKD_BUILD_REVISION, NLOCKD_BUILD_TYPE);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "nlockd: NFS network lock manager (NLM 1/3/4) and status monitor (NSM 1).\n"
      "Every setting is a config file key (nlockd.toml(5)), an environment variable NLOCKD_KEY "
      "and a flag; flags override the environment, which overrides the file."};
  app.get_formatter()->column_width(36);
  std::string config_file;
  app.add_option("--config", config_file, "TOML config file (flags override it)")
      ->type_name("FILE");
  bool check_config = false;
  app.add_flag("--check-config", check_config,
               "validate the file, environment and flags as a start would, print the effective "
               "configuration (secrets redacted) and exit: 0 if valid, else the status a start "
               "would exit with (78 for a refused configuration; nlockd(8))");
  bool export_statd = false;
  app.add_flag("--export-statd-files", export_statd,
               "write rpc.statd's files (statd.state_directory: sm/, sm.bak/, state) from the "
               "store and exit, for rpc.statd to take over; while nlockd is stopped (a clean stop "
               "writes them itself)");
  bool version = false;
  app.add_flag("--version", version, "print the version, git revision and build type and exit");
  Flags flags(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);  // prints the problem
    return EX_USAGE;
  }
  if (version) {
    std::cout << VersionText();
    return EXIT_SUCCESS;
  }

  if (check_config) {
    try {
      ConfigSources sources;
      Config config = LoadConfig(config_file, flags, &sources);
      std::cout << "# nlockd --check-config: valid\n";
      if (!sources.environment.empty()) {
        std::cout << "# from the environment: "
                  << fmt::format("{}", fmt::join(sources.environment, " ")) << "\n";
      }
      for (const auto& setting : sources.nfs_conf) {
        std::cout << "# from nfs.conf: " << setting.key << " (" << setting.origin << ")\n";
      }
      for (const auto& warning : sources.nfs_conf_warnings) {
        std::cout << "# nfs.conf: " << warning << "\n";
      }
      std::cout << nlockd::server::RenderEffectiveConfig(config);
      return EXIT_SUCCESS;
    } catch (const std::exception& e) {
      std::cerr << "nlockd: invalid configuration: " << e.what() << "\n";
      return ConfigExitStatus(e);
    }
  }

  if (export_statd) {
    nlockd::SetUpLogging(spdlog::level::warn);
    Config config;
    try {
      config = LoadConfig(config_file, flags);
    } catch (const std::exception& e) {
      std::cerr << "nlockd: invalid configuration: " << e.what() << "\n";
      return ConfigExitStatus(e);
    }
    if (config.name.empty()) config.name = nlockd::server::DefaultServerName();
    try {
      std::cout << "nlockd: " << nlockd::server::ExportStatdFiles(config) << "\n";
      return EXIT_SUCCESS;
    } catch (const std::exception& e) {
      std::cerr << "nlockd: cannot export rpc.statd's files: "
                << nlockd::RedactPasswordOf(config.store, e.what()) << "\n";
      return EXIT_FAILURE;
    }
  }

  nlockd::SetUpLogging(spdlog::level::info);
  Config config;
  ConfigSources sources;
  try {
    config = LoadConfig(config_file, flags, &sources);
  } catch (const std::exception& e) {
    spdlog::critical("nlockd invalid configuration error={}", nlockd::LogValue(e.what()));
    return ConfigExitStatus(e);
  }
  const std::string store = config.store;  // To keep its password out of an error message.
  bool logs_to_file = false;
  try {
    std::shared_ptr<nlockd::cmd::ReopenableFileSink> log_file;
    if (!config.log_file.empty()) {
      log_file = std::make_shared<nlockd::cmd::ReopenableFileSink>(config.log_file);
      spdlog::set_default_logger(
          nlockd::MakeLogger(log_file, config.log_level, nlockd::LogFormat::kTimestamped));
      logs_to_file = true;
    }
    spdlog::set_level(config.log_level);
    std::optional<nlockd::cmd::PidFile> pid_file;
    if (!config.pid_file.empty()) pid_file.emplace(config.pid_file);
    spdlog::info("nlockd starting version={} revision={} store={} pid={}", NLOCKD_BUILD_VERSION,
                 NLOCKD_BUILD_REVISION, nlockd::LogValue(nlockd::RedactStoreUri(config.store)),
                 getpid());
    for (const auto& setting : sources.nfs_conf) {
      spdlog::info("nlockd setting from nfs.conf key={} origin={}", setting.key,
                   nlockd::LogValue(setting.origin));
    }
    for (const auto& warning : sources.nfs_conf_warnings) {
      spdlog::warn("nlockd nfs.conf warning={}", nlockd::LogValue(warning));
    }
    Run(std::move(config), config_file, flags, log_file.get());
  } catch (const std::exception& e) {
    const std::string reason = nlockd::RedactPasswordOf(store, e.what());
    spdlog::critical("nlockd cannot run error={}", nlockd::LogValue(reason));
    // With log_file the log is elsewhere; whoever started nlockd sees why it stopped.
    if (logs_to_file) std::cerr << "nlockd: cannot run: " << reason << "\n";
    return EXIT_FAILURE;
  }
  return EXIT_SUCCESS;
}
