#include "server/server.hpp"

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <random>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/post.hpp>
#include <asio/use_awaitable.hpp>
#include <spdlog/spdlog.h>

#include "base/error.hpp"
#include "rpc/use_tuple.hpp"
#include "server/recovery.hpp"
#include "store/open_store.hpp"

namespace nlockd::server {

namespace {

// How long an SM_NOTIFY from a host registered by name waits for that name's addresses.
constexpr std::chrono::milliseconds kNameLookupDeadline{5000};

rpc::ServerOptions RpcOptions(const Config& config) {
  rpc::ServerOptions options;
  options.max_connections = config.max_connections;
  options.max_record_size = config.max_record_size;
  options.idle_timeout = config.idle_timeout;
  return options;
}

lock::LockManagerOptions LockOptions(const Config& config) {
  lock::LockManagerOptions options;
  options.max_hosts = config.max_hosts;
  if (config.grace.count() > 0) options.grace_duration = config.grace;
  options.seed = std::random_device{}();
  return options;
}

nlm::NlmOptions NlmOptionsFrom(const Config& config) {
  nlm::NlmOptions options;
  options.host_key = config.nlm_key_by_caller_name ? nlm::NlmOptions::HostKey::kCallerName
                                                   : nlm::NlmOptions::HostKey::kAddress;
  options.granted_msg = config.nlm_granted_msg;
  return options;
}

std::unique_ptr<store::Store> OpenConfiguredStore(const Config& config) {
  store::StoreOptions options;
  options.keeps_lock_table = config.persist_locks;
  // Tests fake a reboot of the host by changing it (DESIGN.md §5: the store records it).
  if (const char* boot_id = std::getenv("NLOCKD_BOOT_ID"); boot_id != nullptr) {
    options.boot_id = boot_id;
  }
  auto store = store::OpenStore(config.store, options);
  spdlog::info("store {} opened (previous run {})", config.store,
               store->startup().first_run            ? "none"
               : store->startup().previous_run_clean ? "clean"
                                                     : "unclean");
  return store;
}

nsm::RpcStatusCallerOptions StatusCallerOptions(const Config& config) {
  nsm::RpcStatusCallerOptions options;
  options.rpcbind_host = config.rpcbind_host;
  options.rpcbind_port = config.rpcbind_port;
  options.deadline = config.nsm_callback_timeout;
  return options;
}

nsm::NsmOptions NsmOptionsFrom(const Config& config) {
  nsm::NsmOptions options;
  options.max_registrations = config.nsm_max_registrations;
  options.allowlist.insert(config.nsm_allowlist.begin(), config.nsm_allowlist.end());
  options.callback_programs = {config.nsm_callback_programs.begin(),
                               config.nsm_callback_programs.end()};
  options.check_notifier_address = config.nsm_check_notifier_address;
  return options;
}

nsm::NotifierOptions NotifierOptionsFrom(const Config& config) {
  nsm::NotifierOptions options;
  options.statd_port = config.notify_statd_port;
  options.rpcbind_port = config.notify_rpcbind_port;
  options.attempt_deadline = config.notify_timeout;
  options.initial_backoff = config.notify_backoff;
  options.max_backoff = std::max<std::chrono::milliseconds>(options.max_backoff,
                                                            config.notify_backoff);
  options.total_budget = config.notify_budget;
  return options;
}

GraceControllerOptions GraceOptionsFrom(const Config& config) {
  GraceControllerOptions options;
  options.duration = config.grace;
  options.floor = config.grace_floor;
  options.end_early = config.grace_end_early;
  options.persist_locks = config.persist_locks;
  options.drop_unreachable = config.notify_drop_unreachable;
  return options;
}

Config Completed(Config config) {
  if (config.name.empty()) config.name = DefaultServerName();
  return config;
}

}  // namespace

Server::Server(Config config)
    : config_(Completed(std::move(config))),
      client_(io_.get_executor()),
      rpcbind_(client_, config_.rpcbind_host, config_.rpcbind_port),
      store_(OpenConfiguredStore(config_)),
      locks_(clock_, LockOptions(config_)),
      status_caller_(client_, StatusCallerOptions(config_)),
      name_resolver_(io_.get_executor(), kNameLookupDeadline),
      nsm_(io_.get_executor(), *store_, status_caller_, bridge_, NsmOptionsFrom(config_),
           &name_resolver_),
      notifier_(io_.get_executor(), client_, *store_, clock_, NotifierOptionsFrom(config_)),
      nlm_caller_(client_),
      nlm_(io_.get_executor(), locks_, bridge_, nlm_caller_, NlmOptionsFrom(config_)),
      grace_(io_.get_executor(), clock_, locks_, *store_,
             GraceHooks{[this](lock::Grants grants) { nlm_.SendGrants(std::move(grants)); },
                        [this] { return notifier_.RoundActive(); }},
             GraceOptionsFrom(config_)),
      call_metrics_(metrics_),
      admin_backend_(AdminBackendParts{io_.get_executor(), clock_, locks_, nsm_, notifier_, nlm_,
                                       bridge_, metrics_, config_.name, config_.nlm_granted_msg,
                                       &grace_}),
      signals_(io_, SIGINT, SIGTERM) {
  bridge_.Attach(nsm_, nlm_);
  nsm_.SetRestartHook(this);
  if (config_.persist_locks && store_->startup().persistent) {
    journal_.emplace(locks_, *store_);
    nlm_.set_journal(&*journal_);
    grace_.set_journal(&*journal_);
  }
  notifier_.set_on_answered([this](const std::string& mon_name) {
    spdlog::info("nsm {} acknowledged our SM_NOTIFY", mon_name);
    grace_.NotificationAnswered(mon_name);
  });
  // Treated as crashed (DESIGN.md §1): only its locks known from before the restart go.
  notifier_.set_on_given_up([this](const std::string& mon_name) {
    spdlog::warn("nsm gave up notifying {}", mon_name);
    grace_.HostUnreachable(mon_name);
  });
  dispatcher_.SetReplyCache(&reply_cache_);
  dispatcher_.SetObserver([this](const rpc::CallRecord& record) { call_metrics_.Observe(record); });
  RegisterPrograms();
}

Server::~Server() = default;

void Server::RegisterPrograms() {
  nlm_.Register(dispatcher_);
  nsm_.Register(dispatcher_);
}

void Server::Run() {
  asio::error_code ec;
  auto address = asio::ip::make_address(config_.listen.host, ec);
  if (ec) {
    throw Error(ErrorKind::kFailed,
                "listen address '" + config_.listen.host + "' is not an IP address");
  }
  // Up first, so that /healthz answers and /readyz says "not ready" while the store loads.
  StartAdmin();
  // The new state is durable before anything is served or sent (DESIGN.md §1).
  int32_t state = store_->BumpState();
  store::LoadedState loaded = store_->LoadAll();
  nsm_.Load(state, loaded.registrations);
  admin_backend_.MarkStoreLoaded();
  std::vector<nsm::NotifyTarget> owed;
  for (const auto& row : loaded.notify_owed) owed.push_back({row.mon_name, row.address});

  rpc_server_ = std::make_unique<rpc::Server>(io_.get_executor(), dispatcher_, RpcOptions(config_));
  rpc_server_->Listen(address, config_.listen.port);
  // Restored locks are in place and the window open before the first request is read.
  grace_.Begin(DecideGrace(store_->startup(), loaded, config_.grace), loaded);
  loaded = {};
  rpc_server_->Start();
  admin_backend_.MarkListening(*rpc_server_);
  // Tests and scripts wait for this line to learn the port (with --listen ADDR:0).
  spdlog::info("nlockd listening address={} port={} transports=tcp,udp name={}",
               config_.listen.host, rpc_server_->port(), config_.name);

  signals_.async_wait([this](const asio::error_code& error, int signal) {
    if (error) return;
    spdlog::info("nlockd received signal {}; shutting down", signal);
    Stop();
  });
  if (config_.rpcbind_register) {
    asio::co_spawn(io_, RegisterWithRpcbind(), asio::detached);
  }
  StartNotificationRound(state, std::move(owed));
  io_.run();
  if (stopping_) {
    // Even state: down (DESIGN.md §1). A crash leaves it odd; the next start moves on anyway.
    store_->MarkCleanShutdown();
  }
  spdlog::info("nlockd stopped");
}

void Server::StartAdmin() {
  if (!config_.admin_enabled) {
    spdlog::info("nlockd admin server off");
    return;
  }
  admin::AdminServerOptions options;
  options.token = config_.admin_token;
  admin_server_ = std::make_unique<admin::AdminServer>(admin_backend_, metrics_, options);
  admin_server_->Start(config_.admin_listen.host, config_.admin_listen.port);
  // Tests and scripts wait for this line to learn the port (with --admin-listen ADDR:0).
  spdlog::info("nlockd admin listening address={} port={} token={}", config_.admin_listen.host,
               admin_server_->port(), config_.admin_token.empty() ? "off" : "on");
}

asio::awaitable<void> Server::StopAdmin() {
  if (admin_server_) admin_server_->Stop();
  co_return;
}

void Server::Restarted(int32_t state) { StartNotificationRound(state, {}); }

void Server::StartNotificationRound(int32_t state, std::vector<nsm::NotifyTarget> owed) {
  std::vector<nsm::NotifyTarget> targets =
      nsm::MergeTargets(std::move(owed), nsm::MonitoredTargets(nsm_.registry()));
  spdlog::info("nsm notifying {} hosts of state {} as {}", targets.size(), state, config_.name);
  if (targets.empty()) return;
  notifier_.StartRound(config_.name, state, std::move(targets));
}

void Server::Stop() {
  asio::post(io_, [this] {
    if (stopping_) return;
    stopping_ = true;
    asio::co_spawn(io_, ShutDown(), asio::detached);
  });
}

asio::awaitable<void> Server::RegisterWithRpcbind() {
  co_await rpcbind_.Register(dispatcher_.ProgramVersions(), rpc_server_->port());
}

asio::awaitable<void> Server::ShutDown() {
  asio::error_code ignored;
  signals_.cancel(ignored);
  // Before the io_context stops: admin calls in flight are answered (or refused) first.
  admin_backend_.Close();
  grace_.Stop();
  co_await asio::co_spawn(admin_stopper_, StopAdmin(), asio::use_awaitable);
  co_await rpc_server_->Shutdown();
  co_await nlm_.Shutdown();
  co_await nsm_.Shutdown();
  co_await notifier_.Shutdown();
  if (config_.rpcbind_register) co_await rpcbind_.Unregister();
  io_.stop();
}

}  // namespace nlockd::server
