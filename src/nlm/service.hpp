#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include <asio/any_io_executor.hpp>
#include <asio/awaitable.hpp>
#include <asio/steady_timer.hpp>

#include "lock/lock_manager.hpp"
#include "nlm/client_caller.hpp"
#include "nlm/host_monitor.hpp"
#include "nlm/wire.hpp"
#include "rpc/dispatcher.hpp"
#include "rpc/task_gate.hpp"

namespace nlockd::nlm {

struct NlmOptions {
  // What identifies a client host (PROTOCOL-NOTES.md §1.3, §1.7): its source address (the
  // default; caller_name is then only a label) or its caller_name (like Linux's
  // nsm_use_hostnames). Keying by name trusts what the client says about itself.
  enum class HostKey { kAddress, kCallerName };
  HostKey host_key = HostKey::kAddress;
  // How a granted blocked lock is announced: GRANTED_MSG (what Linux servers send) or GRANTED.
  bool granted_msg = true;
  // Each GRANTED attempt's total deadline, and attempts before the grant is revoked.
  std::chrono::milliseconds callback_deadline{5000};
  int callback_attempts = 3;
  // Wait between attempts, and before retrying a client that answered DENIED_GRACE_PERIOD.
  std::chrono::milliseconds callback_retry_delay{1000};
  // Deadline for the _RES call that answers a _MSG.
  std::chrono::milliseconds res_deadline{5000};
};

// Counters an observer (admin/metrics) reads.
struct NlmStats {
  uint64_t callbacks_sent = 0;
  uint64_t callbacks_acknowledged = 0;
  uint64_t callbacks_failed = 0;  // Grants revoked because the client refused or vanished.
  uint64_t res_sent = 0;
  uint64_t res_failed = 0;
  uint64_t monitor_failures = 0;
  uint64_t spoof_rejections = 0;  // FREE_ALL or procedure 16 from a caller not entitled to it.
  uint64_t hosts_released = 0;
};

// The NLM service (program 100021, versions 1, 3 and 4) on top of lock::LockManager: one
// method per procedure, _MSG variants through the same methods, GRANTED callbacks for blocked
// locks that become granted. Runs on the executor that owns the lock manager; every
// coroutine it spawns is held by its TaskGate. The lock manager, monitor and caller must
// outlive it.
class NlmService {
 public:
  NlmService(asio::any_io_executor executor, lock::LockManager& locks, HostMonitor& monitor,
             ClientCaller& caller, NlmOptions options);
  ~NlmService();
  NlmService(const NlmService&) = delete;
  NlmService& operator=(const NlmService&) = delete;

  // Registers every procedure of versions 1, 3 and 4.
  void Register(rpc::Dispatcher& dispatcher);

  // Procedures. `version` selects result codes; `context` identifies the caller.
  asio::awaitable<nlm4_testres> Test(const rpc::CallContext& context, nlm4_testargs args);
  asio::awaitable<nlm4_res> Lock(const rpc::CallContext& context, nlm4_lockargs args,
                                 bool monitor);
  asio::awaitable<nlm4_res> Cancel(const rpc::CallContext& context, nlm4_cancargs args);
  asio::awaitable<nlm4_res> Unlock(const rpc::CallContext& context, nlm4_unlockargs args);
  nlm4_res Granted(const nlm4_testargs& args);
  asio::awaitable<nlm4_shareres> Share(const rpc::CallContext& context, nlm4_shareargs args);
  nlm4_shareres Unshare(const rpc::CallContext& context, const nlm4_shareargs& args);
  void FreeAll(const rpc::CallContext& context, const nlm4_notify& args);
  void SmNotify(const rpc::CallContext& context, const nlm_sm_status& args);
  void GrantedRes(const nlm4_res& res);

  // A monitored host rebooted (NSM told us): drop its locks, shares and waiters and serve the
  // waiters they blocked. Returns the locks released.
  size_t HostRebooted(const std::string& host);

  // Sends the callbacks for grants made outside an NLM call (grace timer, admin actions).
  void SendGrants(lock::Grants grants);

  // Stops spawning callbacks and waits for those in flight (bounded).
  asio::awaitable<void> Shutdown();

  const NlmStats& stats() const { return stats_; }
  lock::LockManager& locks() { return locks_; }

 private:
  struct GrantAck;

  // Decode, call, encode: the glue between the dispatcher and the methods above.
  template <typename Args, typename Result, typename Method>
  asio::awaitable<rpc::HandlerStatus> Serve(const rpc::CallContext& context, xdr::Decoder& in,
                                            xdr::Encoder& out, Method method);
  // The _MSG form: an empty reply now, the result as a _RES call to the client.
  template <typename Args, typename Result, typename Method>
  asio::awaitable<rpc::HandlerStatus> ServeMsg(const rpc::CallContext& context, xdr::Decoder& in,
                                               uint32_t res_procedure, Method method);

  std::string HostKeyFor(const rpc::CallContext& context, const std::string& caller_name) const;
  lock::LockRequest ToRequest(const rpc::CallContext& context, const nlm4_lock& lock,
                              bool exclusive) const;
  asio::awaitable<bool> EnsureMonitored(const rpc::CallContext& context, std::string host,
                                        nlm4_lockargs args);
  asio::awaitable<void> DeliverGrant(lock::WaiterGrant grant, rpc::TaskGate::Pass pass);
  asio::awaitable<void> SendRes(ClientAddress client, uint32_t version, uint32_t procedure,
                                std::vector<uint8_t> body, rpc::TaskGate::Pass pass);
  void SpawnRes(const rpc::CallContext& context, uint32_t procedure, std::vector<uint8_t> body);
  size_t ReleaseHost(const std::string& host);

  asio::any_io_executor executor_;
  lock::LockManager& locks_;
  HostMonitor& monitor_;
  ClientCaller& caller_;
  NlmOptions options_;
  rpc::TaskGate gate_;
  NlmStats stats_;
  std::unordered_set<std::string> monitored_;
  // Hosts whose first SM_MON is in flight; later first locks wait on it.
  std::unordered_map<std::string, std::shared_ptr<asio::steady_timer>> monitoring_;
  std::unordered_map<uint64_t, std::shared_ptr<GrantAck>> awaiting_ack_;  // GRANTED_MSG sent.
  // Per host: the address and NLM version of its latest request, for callbacks. Bounded by
  // the hosts that ever locked (the monitor's registration limit).
  std::unordered_map<std::string, asio::ip::address> host_addresses_;
  std::unordered_map<std::string, uint32_t> client_versions_;
};

}  // namespace nlockd::nlm
