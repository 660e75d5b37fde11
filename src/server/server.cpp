#include "server/server.hpp"

#include <csignal>
#include <random>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/post.hpp>
#include <spdlog/spdlog.h>

#include "base/error.hpp"
#include "rpc/use_tuple.hpp"

namespace nlockd::server {

namespace {

// NSM (DESIGN.md §1); until nsm/ serves its procedures, the program answers NULL.
constexpr uint32_t kNsmProgram = 100024;

asio::awaitable<rpc::HandlerStatus> Null(const rpc::CallContext&, xdr::Decoder&, xdr::Encoder&) {
  co_return rpc::HandlerStatus::kSuccess;
}

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

}  // namespace

Server::Server(Config config)
    : config_(std::move(config)),
      client_(io_.get_executor()),
      rpcbind_(client_, config_.rpcbind_host, config_.rpcbind_port),
      locks_(clock_, LockOptions(config_)),
      host_records_(config_.max_hosts),
      nlm_caller_(client_),
      nlm_(io_.get_executor(), locks_, host_records_, nlm_caller_, NlmOptionsFrom(config_)),
      signals_(io_, SIGINT, SIGTERM) {
  if (config_.name.empty()) config_.name = DefaultServerName();
  dispatcher_.SetReplyCache(&reply_cache_);
  RegisterPrograms();
}

Server::~Server() = default;

void Server::RegisterPrograms() {
  nlm_.Register(dispatcher_);
  dispatcher_.Register(kNsmProgram, 1, 0, "SM_NULL", Null);
}

void Server::Run() {
  asio::error_code ec;
  auto address = asio::ip::make_address(config_.listen.host, ec);
  if (ec) {
    throw Error(ErrorKind::kFailed, "listen address '" + config_.listen.host +
                                        "' is not an IP address");
  }
  rpc_server_ = std::make_unique<rpc::Server>(io_.get_executor(), dispatcher_, RpcOptions(config_));
  rpc_server_->Listen(address, config_.listen.port);
  // With nothing persisted nlockd cannot know which locks existed before: classic grace.
  if (config_.grace.count() > 0) {
    locks_.StartGrace(lock::GraceMode::kClassic);
    spdlog::info("grace period started mode=classic seconds={}", config_.grace.count());
    asio::co_spawn(io_, GraceTimer(), asio::detached);
  }
  rpc_server_->Start();
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
  io_.run();
  spdlog::info("nlockd stopped");
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

asio::awaitable<void> Server::GraceTimer() {
  asio::steady_timer timer(io_);
  while (locks_.grace().IsActive() && !stopping_) {
    timer.expires_after(std::chrono::seconds(1));
    co_await timer.async_wait(rpc::kUseTuple);
    lock::DropOutcome dropped = locks_.Tick();
    nlm_.SendGrants(std::move(dropped.grants));
  }
  if (!stopping_) spdlog::info("grace period ended");
}

asio::awaitable<void> Server::ShutDown() {
  asio::error_code ignored;
  signals_.cancel(ignored);
  co_await rpc_server_->Shutdown();
  co_await nlm_.Shutdown();
  if (config_.rpcbind_register) co_await rpcbind_.Unregister();
  io_.stop();
}

}  // namespace nlockd::server
