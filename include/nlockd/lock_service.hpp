// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "nlockd/export.hpp"
#include "nlockd/ha.hpp"
#include "nlockd/options.hpp"
#include "nlockd/types.hpp"

namespace asio {
class io_context;
}
namespace prometheus {
class Registry;
}

namespace nlockd {

// One NFS lock manager: the lock table, NLM (program 100021, versions 1, 3, 4), NSM (program
// 100024) with its registrations and the restart notification round, crash recovery with its
// grace period, the store, and the metrics. A process may run several, each with options (and a
// store) of its own; nothing is shared between them.
//
// Lifecycle: construct (opens the store; throws std::runtime_error if it cannot), optionally
// SetEventHandlers() and Listen(), then Start() once; hand it calls; Shutdown() once (the
// destructor shuts down if that was not done).
//
// Threading: all lock, NLM and NSM state lives on one executor, a strand of an io_context:
// either one this service owns and runs on a thread of its own (the first constructor), or
// one the host runs (the second: any number of threads may run it; one made with the
// concurrency hint 1, `asio::io_context io(1)`, is taken to run on one thread only and is used
// without a strand). The methods below may be
// called from any thread; each says where its completion runs. The blocking ones
// (Shutdown, Status, HandleAdminRequest, RefreshMetrics, MetricsText) wait for that executor, so
// they must not be called from it nor, with the host's io_context, from the host's only thread
// running it.
//
// ABI: the class holds only a pointer to its implementation, so adding members in a later
// release does not change its layout.
class NLOCKD_EXPORT LockService {
 public:
  // Runs on an io_context and thread of its own (started by Start(), joined by Shutdown()).
  explicit LockService(Options options);
  // Runs on the host's io_context: the host keeps running it until Shutdown() has returned.
  // Declared with a forward declaration of asio::io_context (standalone Asio); the host must be
  // compiled against the same Asio version and configuration as libnlockd (docs/embedding.md).
  LockService(Options options, asio::io_context& io);
  // The same with Options::ha, reporting this node's role to `ha_status` from the start of the
  // constructor's wait as standby until the service ends (see HaStatus). Without ha it
  // reports nothing. REQUIRES: ha_status is not null.
  LockService(Options options, std::shared_ptr<HaStatus> ha_status);
  LockService(Options options, asio::io_context& io, std::shared_ptr<HaStatus> ha_status);
  ~LockService();
  LockService(const LockService&) = delete;
  LockService& operator=(const LockService&) = delete;

  // Replaces the event callbacks. REQUIRES: before Start().
  void SetEventHandlers(EventHandlers handlers);

  // Serves NLM and NSM (those of them Options::serve_nlm and serve_nsm name) itself over TCP and
  // UDP on `address:port` (port 0 picks a free one for both), for hosts without a transport;
  // the daemon does this. Before Start(). Returns the bound port; throws std::runtime_error if
  // it cannot bind.
  uint16_t Listen(const std::string& address, uint16_t port);
  // The same for some of the programs served (kNlmProgram, kNsmProgram): a call to another one
  // is answered PROG_UNAVAIL there, and only these are registered with rpcbind at that port.
  // May be called once per listener, so that NSM has a port of its own as rpc.statd does.
  // Throws std::runtime_error also when none of `programs` is served (Options::serve_nlm,
  // serve_nsm).
  uint16_t Listen(const std::string& address, uint16_t port, std::vector<uint32_t> programs);
  // Serves NLM and NSM on sockets the host made: a bound, listening TCP socket and a bound UDP
  // socket on the same port. The service owns both from now on. REQUIRES: before Start().
  uint16_t ListenOnSockets(int tcp_listen_fd, int udp_fd);

  // Loads the store (the state number moves on, registrations and the lock table come back),
  // opens the grace period the restart calls for, starts serving and sends SM_NOTIFY to every
  // host monitored before the restart. Reads the store on the calling thread and finishes on
  // the service's executor: with its own thread it returns once serving; on the host's
  // io_context, serving begins when the host runs it. Throws std::runtime_error if
  // the store cannot be read. REQUIRES: called once, before any other call but the setup ones.
  void Start();
  // Blocking: waits until rpcbind holds the service's registrations (at once when it makes
  // none, Options::rpcbind_register off), at most 2 s, the wait the restart notification makes
  // too; false if that ran out (the registration goes on in the background). After Start(),
  // with the service's own thread or while the host runs its io_context. nlockd tells systemd
  // READY=1 after it.
  bool WaitForRegistrations();

  // Shuts down gracefully: stops the listener, finishes calls and callbacks in flight (bounded),
  // unregisters from rpcbind, and records a clean stop in the store. Returns when done.
  // Idempotent. Calls handed in afterwards are answered with RpcReply::send = false.
  void Shutdown();
  // The same without blocking; `done` runs on the service's executor (or at once if it is
  // already shut down).
  void AsyncShutdown(std::function<void()> done);

  // Applies what may change while serving, from `options` (the rest of it is ignored: it needs
  // a new LockService): the NSM caller rules (nsm_allowlist, nsm_callback_programs,
  // nsm_check_notifier_address) for the calls served from now on, and the notification timing
  // and ports (notify_timeout, notify_backoff, notify_budget, notify_statd_port,
  // notify_rpcbind_port) for the attempts begun from now on; a host already owed a
  // notification keeps the give-up time its round gave it. Returns at once; calls handed in
  // after it returns see the change. nlockd's SIGHUP uses it.
  void Reload(const Options& options);
  // Sends the restart notification round that Options::notify_hold holds back, now. Returns at
  // once; any thread. Called before the round reached its hold, the round does not hold; after
  // it went out, does nothing. nlockd's SIGUSR2 uses it.
  void ReleaseNotificationHold();

  // --- RPC --------------------------------------------------------------------------------

  // Serves one NLM or NSM call that the host's transport received (any program may be passed;
  // others get PROG_UNAVAIL), as the host decoded its header: an RPC version 2 call (the host
  // checks the version). `call` is copied before this returns. `done` receives the reply on
  // the service's executor, never before HandleCall returns. Calls from one connection may
  // complete out of order (a LOCK awaiting its journal write, say): match replies by xid, as
  // RPC does. Retransmissions of non-idempotent calls are answered from a reply cache keyed by
  // (peer address, xid, ...).
  void HandleCall(const RpcCall& call, std::function<void(RpcReply)> done);

  // The (program, version) pairs served, for the host's own rpcbind registration.
  std::vector<ProgramVersion> Programs() const;
  // The port Listen() bound; 0 without a listener.
  uint16_t port() const;

  // --- Events, status, metrics, admin ------------------------------------------------------

  // Blocking: status as of now.
  Status GetStatus();
  // Blocking: one request of the admin API (docs/api.md), the same JSON as nlockd's admin HTTP
  // server answers: status, registrations, hosts, locks, shares, waiters, grace, notify.
  AdminResponse HandleAdminRequest(const AdminRequest& request);
  // The prometheus-cpp registry with every metric of this service, for the host's exposer
  // (prometheus::Exposer::RegisterCollectable). Counters of calls, notifications and store
  // commits update as they happen; the counters the services keep themselves (callbacks,
  // reclaims, reboots, RPC bytes and connections) and the snapshot gauges (locks held,
  // grace, ...) read as of the last RefreshMetrics().
  std::shared_ptr<prometheus::Registry> MetricsRegistry();
  // Blocking: sets the snapshot gauges from the current state (call before each scrape).
  void RefreshMetrics();
  // Blocking: RefreshMetrics(), then the Prometheus text exposition (format 0.0.4).
  std::string MetricsText();

  // --- The lock table, for the NFS server --------------------------------------------------
  // Each completes on the service's executor. File handles are the bytes NLM clients send as
  // `fh`: the NFS file handle of the host (whatever it means there), compared byte for byte.

  // The locks that a read (exclusive = false) or write of the range would conflict with:
  // for an NFSv3 server that refuses I/O under a mandatory lock, or an NFSv4 bridge.
  void FindConflicts(ConflictQuery query, std::function<void(std::vector<HeldLock>)> done);
  // The file was removed: cancels its blocked requests and releases every lock and share on it
  // (persisted like the clients' own UNLOCK and UNSHARE). Locks granted while this runs are
  // not released.
  void ReleaseFile(std::string file, std::function<void(FileRelease)> done);

  // Locks of a protocol layer in the host (an NFSv4 server), in the same table as NLM's: they
  // conflict with NLM locks both ways, and releasing them grants NLM waiters. Persisted like
  // NLM locks. REQUIRES: one owner's calls on one file do not overlap (wait for each `done`).
  void Lock(LocalLockRequest request, std::function<void(LockAnswer)> done);
  // TEST: would the request be granted; for kDenied, the holder.
  void Test(LocalLockRequest request, std::function<void(LockAnswer)> done);
  // Releases the owner's locks over the range (unlocking what is not held succeeds).
  void Unlock(std::string file, LockOwner owner, ByteRange range,
              std::function<void(LockResult)> done);
  // Releases everything the host holds (its client expired); returns the locks released.
  void ReleaseHost(std::string host, std::function<void(size_t)> done);

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace nlockd
