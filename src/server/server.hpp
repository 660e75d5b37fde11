// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <asio/any_io_executor.hpp>
#include <asio/awaitable.hpp>
#include <asio/steady_timer.hpp>

#include "admin/metrics.hpp"
#include "base/clock.hpp"
#include "lock/lock_manager.hpp"
#include "nlm/client_caller.hpp"
#include "nlm/service.hpp"
#include "nlm/statd_monitor.hpp"
#include "nlockd/options.hpp"
#include "nlockd/types.hpp"
#include "nsm/name_resolver.hpp"
#include "nsm/notifier.hpp"
#include "nsm/rpc_status_caller.hpp"
#include "nsm/service.hpp"
#include "rpc/call_context.hpp"
#include "rpc/client.hpp"
#include "rpc/dispatcher.hpp"
#include "rpc/event.hpp"
#include "rpc/reply_cache.hpp"
#include "rpc/rpcbind.hpp"
#include "rpc/server.hpp"
#include "rpc/task_gate.hpp"
#include "server/admin_backend.hpp"
#include "server/call_metrics.hpp"
#include "server/early_notify_file.hpp"
#include "server/early_round.hpp"
#include "server/grace_controller.hpp"
#include "server/ha_callout.hpp"
#include "server/ha_lease_keeper.hpp"
#include "server/lock_journal_store.hpp"
#include "server/nsm_bridge.hpp"
#include "server/statd_handover.hpp"
#include "store/open_store.hpp"
#include "store/store.hpp"

namespace nlockd::server {

// nlockd's object graph on one executor: lock manager, NLM, NSM, the notifier, grace, store,
// metrics and the admin backend. It has no thread, signal or HTTP server of its own; the public
// nlockd::LockService runs it (and the daemon runs that).
//
// Start-up (Start): open the store, move the NSM state to the next odd number durably, load the
// registrations and the lock table, open the grace period the table allows (GraceController:
// restored locks await their reclaims), serve, then send SM_NOTIFY to every monitored host
// (StartNotificationRound). A state number is odd while the server is up and even after a
// clean stop, so that peers can tell a restart from a retransmission.
//
// Threading: everything but the constructor, Listen and Start runs on `executor`, which must be
// a strand or a single-threaded io_context's executor. Start reads the store on the caller's
// thread and posts the rest; until that ran, the executor refuses every call.
// What the program running a Core with Options::ha adds to the options (every part may be
// empty).
struct HaLink {
  // Hears each change of role (called on the lease keeper's threads).
  std::function<void(const HaReport&)> on_report;
  // A planned release asked through the admin API (`nlockctl service release`): the program
  // stops this Core, which releases the lease, and waits as standby. Returns false if it
  // cannot. Called on an admin thread; must not wait for the Core.
  std::function<bool()> request_release;
  // As standby, leave a free lease to the other nodes this long before taking it (after a
  // planned release, so that the release moves the service instead of bouncing it back).
  std::chrono::milliseconds hold_off{0};
};

class Core final : public nsm::RestartHook,
                   public nsm::LocalStatusReceiver,
                   public nsm::MonitorEvents {
 public:
  // With Options::ha the constructor waits as standby until this node holds the lease.
  Core(asio::any_io_executor executor, nlockd::Options options, HaLink ha_link = {});
  ~Core() override;
  Core(const Core&) = delete;
  Core& operator=(const Core&) = delete;

  void set_events(nlockd::EventHandlers events);

  // Binds a listener (TCP and UDP on one port) for `programs` (empty: every program served);
  // returns the port. Throws Error, also when it would serve none of the programs served.
  // REQUIRES: before Start(). Each call adds a listener (NSM on a port of its own, say).
  uint16_t Listen(const std::string& address, uint16_t port, std::vector<uint32_t> programs = {});
  uint16_t ListenOnSockets(int tcp_listen_fd, int udp_fd);
  // The first listener's port.
  uint16_t port() const { return rpc_servers_.empty() ? 0 : rpc_servers_.front()->port(); }

  // Loads the store (on the caller's thread; throws Error if it cannot be read), then posts
  // the rest to the executor: grace, the listener (if any), rpcbind and the notification round.
  // Calls handed in before that ran are refused; calls posted after Start() returned are not.
  void Start();
  bool serving() const { return started_ && !stopping_; }
  // Whether this process serves `program` (Options::serve_nlm, serve_nsm).
  bool Serves(uint32_t program) const;

  // Graceful shutdown on the executor: listener, calls, callbacks, notifier, rpcbind; then the
  // clean stop is recorded in the store. Idempotent (a second call returns at once).
  asio::awaitable<void> ShutDown();

  // Admits one call from the host's transport, to be served by dispatcher(): nullopt before
  // Start and once shutdown began (the call is then dropped, as a listener would). Shutdown
  // waits for the calls whose pass is alive. A pass and not a coroutine of its own, because
  // this is on every embedded call's path.
  std::optional<rpc::TaskGate::Pass> AdmitHostCall() {
    if (!started_) return std::nullopt;
    return calls_.TryEnter();
  }
  rpc::Dispatcher& dispatcher() { return dispatcher_; }

  std::vector<std::pair<uint32_t, uint32_t>> ProgramVersions() const {
    return dispatcher_.ProgramVersions();
  }

  // The lock table for the NFS server (on the executor).
  std::vector<nlockd::HeldLock> FindConflicts(const nlockd::ConflictQuery& query) const;
  asio::awaitable<nlockd::FileRelease> ReleaseFile(std::string file);
  asio::awaitable<nlockd::LockAnswer> LocalLock(nlockd::LocalLockRequest request);
  nlockd::LockAnswer LocalTest(const nlockd::LocalLockRequest& request);
  asio::awaitable<nlockd::LockResult> LocalUnlock(std::string file, nlockd::LockOwner owner,
                                                  nlockd::ByteRange range);
  size_t ReleaseHost(const std::string& host);

  // A configuration reload (nlockd::LockService::Reload): applies, on the executor, the NSM
  // caller rules and the notification timing of `next`; its other fields are ignored.
  void Reload(const nlockd::Options& next);

  AdminBackend& admin_backend() { return admin_backend_; }
  admin::Metrics& metrics() { return metrics_; }

  // Completes once rpcbind holds our registrations (or none is made), at most
  // rpc::kRegistrationWait: the wait the restart round makes too. True if they are done.
  // Readiness (the daemon's READY=1) follows it. On the executor, after Start().
  asio::awaitable<bool> WaitForRegistrations();

  // Sends the restart notification that Options::notify_hold holds back, now (posted to the
  // executor; any thread; before the round reached its hold, it will not hold). Does nothing
  // once it went out.
  void ReleaseNotificationHold();

  // nsm::RestartHook: SM_SIMU_CRASH moved the state; announce it like a restart.
  void Restarted(int32_t state) override;
  // nsm::RestartHook: SM_SIMU_CRASH is about to move the state (the early-notify file first).
  void BeforeStateBump(int32_t next_state) override;
  // nsm::MonitorEvents: to the ha_callout program, and the early-notify file's hosts.
  void ClientAdded(const std::string& mon_name, const std::string& my_name) override;
  void ClientRemoved(const std::string& mon_name, const std::string& my_name) override;
  void NotifyReceived(const std::string& mon_name, const std::string& address,
                      int32_t state) override;
  // nsm::LocalStatusReceiver: a host our NLM monitors rebooted; releases it through the bridge
  // and tells the host program.
  void HostRebooted(const std::string& mon_name, int32_t state) override;

 private:
  // serve = nsm restarted on the boot its store last ran on: keep the state, notify no one.
  static bool IsMonitorRestartOnSameBoot(const nlockd::Options& options,
                                         const store::StartupInfo& startup, int32_t stored_state);
  // Moves the store's state on from `from`, the store's current state (a new boot, a catch-up),
  // the early-notify file first: to the newest of the next odd state, `at_least` (odd) and the
  // state the file reserved (the early round announced it, or may have on another boot), in
  // one write. Returns the state.
  int32_t BumpStoreState(int32_t from, std::optional<int32_t> at_least = std::nullopt);
  // Whether this configuration keeps the early-notify file (others only read it).
  bool KeepsEarlyFile() const { return early_file_ && early_file_->keeps(); }
  // The early-notify file's hosts, from the registry, once a burst of SM_MON or SM_UNMON
  // settled (WriteEarlyHostsAfterBurst, one task at a time).
  void WriteEarlyHostsSoon();
  asio::awaitable<void> WriteEarlyHostsAfterBurst();
  // The state number the previous run served, from the stored one.
  static int32_t LastServedState(int32_t stored_state);
  // Moves the state past rpc.statd's last one (`statd`, from its state file), so that peers
  // take our notifications as news; on a restart on the same boot (`same_boot`) only up to it,
  // since nothing new is announced. Returns the state.
  int32_t ContinueStatdState(int32_t state, std::optional<int32_t> statd, bool same_boot);
  // With statd_directory: takes rpc.statd's files over unless nlockd holds them already.
  // Returns whether it took them over from a statd that ran on this boot (a restart on the
  // same boot, for the state and the notification round), and statd's state number.
  std::pair<bool, std::optional<int32_t>> TakeOverStatdFiles();
  // With statd_directory: gives rpc.statd's files back at a clean stop (logs a failure).
  void GiveBackStatdFiles();
  // What status and readiness report as the HA role; empty without ha.
  std::function<admin::HaView()> HaViewSource();
  // Records every host a new boot's round will tell (StartNotificationRound's) as owed, before
  // the round can be held (notify.hold) or cut short: a restart on the same boot announces only
  // what is owed, and would otherwise tell no one of this boot. Blocks until durable.
  // REQUIRES: nsm_ loaded.
  void RecordRoundAsOwed(const std::vector<store::NotifyOwed>& owed);
  // The part of Start() that runs on the executor.
  void Serve(int32_t state, store::LoadedState loaded);
  // SM_NOTIFY(our name, state) to every distinct monitored host and every host still owed one
  // from an earlier run (`owed`), but those in `told` (the early round's answers).
  void StartNotificationRound(int32_t state, std::vector<nsm::NotifyTarget> owed,
                              const std::vector<std::string>& told = {});
  // The restart round (Serve), once rpcbind holds our registrations (bounded) and, when `held`
  // (a new boot, or a restart on the same boot whose round never began) with
  // Options::notify_hold, once ReleaseNotificationHold() said so or the hold passed. On the same
  // boot only `owed` is notified.
  asio::awaitable<void> NotifyWhenReady(int32_t state, std::vector<nsm::NotifyTarget> owed,
                                        bool held);
  asio::awaitable<void> RegisterWithRpcbind(std::vector<std::pair<uint32_t, uint32_t>> programs,
                                            rpc::RpcbindListener listener);
  // The (program, version) pairs `server` serves (every served pair when it names none).
  std::vector<std::pair<uint32_t, uint32_t>> ServedBy(const std::vector<uint32_t>& programs) const;
  void AddListener(std::unique_ptr<rpc::Server> server);
  // A context for calls made on behalf of `host` by the host program (no wire).
  rpc::CallContext LocalContext(const std::string& host) const;

  nlockd::Options options_;
  // rpc.statd's state directory (Options::statd_state_directory), when NSM is served here.
  std::optional<StatdDirectory> statd_directory_;
  asio::any_io_executor executor_;
  SteadyClock clock_;
  rpc::Dispatcher dispatcher_;
  rpc::ReplyCache reply_cache_;
  rpc::Client client_;
  rpc::RpcbindRegistration rpcbind_;
  // With Options::ha: what the keeper last reported (guarded by ha_mutex_), for the admin
  // views; set before ha_ is built.
  HaLink ha_link_;
  mutable std::mutex ha_mutex_;
  admin::HaView ha_view_;
  // With Options::ha: the service's lease, taken (waiting as standby) before the store opens.
  std::unique_ptr<HaLeaseKeeper> ha_;
  // The kernel's boot id, read once for the early round and the store.
  std::string boot_id_;
  // A SQLite store's lock, taken before the early-notify file is read; the store adopts it.
  std::shared_ptr<store::SqliteStoreLock> sqlite_lock_;
  // A SQLite store's early-notify file: what a status monitor alone's next start may announce
  // before the store opens (kept only by such a configuration; others read it for its floor and
  // remove it), and this start's early round, if it had one. Before store_, which they precede.
  std::unique_ptr<EarlyNotifyFile> early_file_;
  std::unique_ptr<EarlyRound> early_round_;
  std::unique_ptr<store::Store> store_;
  lock::LockManager locks_;
  NsmBridge bridge_;
  nsm::RpcStatusCaller status_caller_;
  nsm::AsioNameResolver name_resolver_;
  // rpc.statd's --ha-callout (Options::statd_ha_callout, NSM served here).
  std::unique_ptr<HaCallout> ha_callout_;
  nsm::NsmService nsm_;
  nsm::Notifier notifier_;
  nlm::RpcClientCaller nlm_caller_;
  // NLM alone (serve_nsm off): client hosts are monitored through the system's statd, and
  // recorded through the bridge for the restart round.
  nlm::StatdMonitor statd_monitor_;
  nlm::NlmService nlm_;
  // Set when locks are persisted (persist_locks, on a persistent store).
  std::optional<StoreLockJournal> journal_;
  GraceController grace_;
  admin::Metrics metrics_;
  CallMetrics call_metrics_;
  // Store commits and SM_NOTIFY attempts, reported as they happen.
  EventMetrics event_metrics_{*store_, notifier_, metrics_};
  AdminBackend admin_backend_;
  std::vector<std::unique_ptr<rpc::Server>> rpc_servers_;
  // Calls handed in through Handle(), so that shutdown waits for them.
  rpc::TaskGate calls_;
  nlockd::EventHandlers events_;
  // Coroutines of the Core's own (the restart round while it waits), stopped by ShutDown.
  rpc::TaskGate tasks_;
  bool registered_ = false;
  // rpcbind registrations not yet finished; registrations_done_ is set when none is.
  int registrations_pending_ = 0;
  rpc::Event registrations_done_;
  // Options::notify_hold: set by ReleaseNotificationHold().
  rpc::Event notify_hold_;
  // Set once every host of early_round_ answered or failed its attempt (shared: see the
  // constructor).
  std::shared_ptr<rpc::Event> early_round_done_;
  bool early_hosts_pending_ = false;   // WriteEarlyHostsSoon() waits to run
  bool restart_on_same_boot_ = false;  // see IsMonitorRestartOnSameBoot()
  // Written by Start() on the caller's thread; read on the executor, where calls handed in
  // before it are refused.
  std::atomic<bool> started_{false};
  bool start_posted_ = false;  // Start() was called (caller's thread; then read on the executor).
  bool stopping_ = false;
  bool stopped_ = false;
};

}  // namespace nlockd::server
