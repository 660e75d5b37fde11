#pragma once

#include <memory>

#include <asio/awaitable.hpp>
#include <asio/io_context.hpp>
#include <asio/signal_set.hpp>

#include "base/clock.hpp"
#include "lock/lock_manager.hpp"
#include "nlm/client_caller.hpp"
#include "nlm/service.hpp"
#include "rpc/client.hpp"
#include "rpc/dispatcher.hpp"
#include "rpc/rpcbind.hpp"
#include "rpc/server.hpp"
#include "rpc/reply_cache.hpp"
#include "server/config.hpp"
#include "server/host_records.hpp"

namespace nlockd::server {

// Builds nlockd's object graph from a Config and runs it: one io_context on the calling
// thread owns the RPC server and every service; SIGINT/SIGTERM start a graceful shutdown.
class Server {
 public:
  explicit Server(Config config);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Listens (throws Error if it cannot), registers with rpcbind, and serves until a signal or
  // Stop(). Returns once everything is shut down.
  void Run();
  // Starts a graceful shutdown; safe from any thread.
  void Stop();

 private:
  void RegisterPrograms();
  asio::awaitable<void> RegisterWithRpcbind();
  // Ends grace at its timer even when no request arrives to notice.
  asio::awaitable<void> GraceTimer();
  asio::awaitable<void> ShutDown();

  Config config_;
  asio::io_context io_;
  SteadyClock clock_;
  rpc::Dispatcher dispatcher_;
  rpc::ReplyCache reply_cache_;
  rpc::Client client_;
  rpc::RpcbindRegistration rpcbind_;
  lock::LockManager locks_;
  HostRecords host_records_;
  nlm::RpcClientCaller nlm_caller_;
  nlm::NlmService nlm_;
  std::unique_ptr<rpc::Server> rpc_server_;
  asio::signal_set signals_;
  bool stopping_ = false;
};

}  // namespace nlockd::server
