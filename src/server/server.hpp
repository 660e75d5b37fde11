#pragma once

#include <memory>

#include <asio/awaitable.hpp>
#include <asio/io_context.hpp>
#include <asio/signal_set.hpp>

#include <asio/thread_pool.hpp>

#include "admin/admin_server.hpp"
#include "admin/metrics.hpp"
#include "base/clock.hpp"
#include "lock/lock_manager.hpp"
#include "nlm/client_caller.hpp"
#include "nlm/service.hpp"
#include "nsm/name_resolver.hpp"
#include "nsm/notifier.hpp"
#include "nsm/rpc_status_caller.hpp"
#include "nsm/service.hpp"
#include "rpc/client.hpp"
#include "rpc/dispatcher.hpp"
#include "rpc/reply_cache.hpp"
#include "rpc/rpcbind.hpp"
#include "rpc/server.hpp"
#include "server/admin_backend.hpp"
#include "server/call_metrics.hpp"
#include "server/config.hpp"
#include "server/grace_controller.hpp"
#include "server/lock_journal_store.hpp"
#include "server/nsm_bridge.hpp"
#include "store/store.hpp"

namespace nlockd::server {

// Builds nlockd's object graph from a Config and runs it: one io_context on the calling
// thread owns the RPC server and every service (the store has its own writer thread);
// SIGINT/SIGTERM start a graceful shutdown. The admin HTTP server (when enabled) runs on its own
// threads from before the store loads until the shutdown begins.
//
// Start-up (DESIGN.md §1, "Restart and notification"; issue 8): open the store, move the NSM
// state to the next odd number durably, load the registrations and the lock table, open the
// grace period the table allows (GraceController: restored locks await their reclaims), serve,
// then start the restart notification round (StartNotificationRound) to every monitored host.
class Server final : public nsm::RestartHook {
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

  // SM_SIMU_CRASH moved the state: announce it like a restart.
  void Restarted(int32_t state) override;

 private:
  // The hook where the restart notification round starts: after the state bump and the load
  // (and on SM_SIMU_CRASH), SM_NOTIFY(config name, state) to every distinct monitored host and
  // every host still owed one from an earlier run (`owed`).
  void StartNotificationRound(int32_t state, std::vector<nsm::NotifyTarget> owed);
  void RegisterPrograms();
  asio::awaitable<void> RegisterWithRpcbind();
  asio::awaitable<void> ShutDown();
  // Binds the admin HTTP server (config admin_listen) and logs its port.
  void StartAdmin();
  // Runs on admin_stopper_: the HTTP threads may be waiting for work posted to io_, so they
  // are joined off the io thread while it keeps running.
  asio::awaitable<void> StopAdmin();

  Config config_;
  asio::io_context io_;
  SteadyClock clock_;
  rpc::Dispatcher dispatcher_;
  rpc::ReplyCache reply_cache_;
  rpc::Client client_;
  rpc::RpcbindRegistration rpcbind_;
  std::unique_ptr<store::Store> store_;
  lock::LockManager locks_;
  NsmBridge bridge_;
  nsm::RpcStatusCaller status_caller_;
  nsm::AsioNameResolver name_resolver_;
  nsm::NsmService nsm_;
  nsm::Notifier notifier_;
  nlm::RpcClientCaller nlm_caller_;
  nlm::NlmService nlm_;
  // Set when locks are persisted (config persist_locks, on a persistent store).
  std::optional<StoreLockJournal> journal_;
  GraceController grace_;
  admin::Metrics metrics_;
  CallMetrics call_metrics_;
  // Store commits and SM_NOTIFY attempts, reported as they happen.
  EventMetrics event_metrics_{*store_, notifier_, metrics_};
  AdminBackend admin_backend_;
  std::unique_ptr<rpc::Server> rpc_server_;
  asio::signal_set signals_;
  bool stopping_ = false;
  asio::thread_pool admin_stopper_{1};
  // Last: stopped (its threads joined) before anything it reads is destroyed.
  std::unique_ptr<admin::AdminServer> admin_server_;
};

}  // namespace nlockd::server
