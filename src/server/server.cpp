#include "server/server.hpp"

#include <csignal>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/post.hpp>
#include <spdlog/spdlog.h>

#include "base/error.hpp"

namespace nlockd::server {

namespace {

// Program numbers (DESIGN.md §1). The services that serve their procedures live in nlm/ and
// nsm/; until they register more, each program answers NULL.
constexpr uint32_t kNlmProgram = 100021;
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

}  // namespace

Server::Server(Config config)
    : config_(std::move(config)),
      client_(io_.get_executor()),
      rpcbind_(client_, config_.rpcbind_host, config_.rpcbind_port),
      signals_(io_, SIGINT, SIGTERM) {
  if (config_.name.empty()) config_.name = DefaultServerName();
  RegisterPrograms();
}

Server::~Server() = default;

void Server::RegisterPrograms() {
  for (uint32_t version : {1u, 3u, 4u}) {
    dispatcher_.Register(kNlmProgram, version, 0, "NULL", Null);
  }
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

asio::awaitable<void> Server::ShutDown() {
  asio::error_code ignored;
  signals_.cancel(ignored);
  co_await rpc_server_->Shutdown();
  if (config_.rpcbind_register) co_await rpcbind_.Unregister();
  io_.stop();
}

}  // namespace nlockd::server
