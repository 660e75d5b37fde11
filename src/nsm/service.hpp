// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <asio/any_io_executor.hpp>
#include <asio/awaitable.hpp>
#include <asio/ip/address.hpp>
#include <asio/thread_pool.hpp>

#include "base/clock.hpp"
#include "base/log_limiter.hpp"
#include "nsm/name_resolver.hpp"
#include "nsm/registry.hpp"
#include "nsm/status_receiver.hpp"
#include "nsm/wire.hpp"
#include "rpc/call_context.hpp"
#include "rpc/dispatcher.hpp"
#include "rpc/task_gate.hpp"
#include "rpc/wait_bounds.hpp"
#include "store/store.hpp"

namespace nlockd::nsm {

struct NsmOptions {
  // Registrations held at most; past it SM_MON answers stat_fail.
  size_t max_registrations = 10'000;
  // Callers besides loopback allowed SM_MON, SM_UNMON, SM_UNMON_ALL and SM_SIMU_CRASH
  // (normalised addresses). Everyone else is refused: a remote host must not register monitors
  // with callbacks of its choosing, the old statd hole
  // (docs/decisions/0011-nsm-caller-rules-and-notify-gating.md).
  std::set<std::string> allowlist;
  // Programs a registration may name as its callback (rpc.statd: only NLM), so that an SM_MON
  // cannot aim nlockd's callbacks at an arbitrary local service.
  std::set<int32_t> callback_programs{100021};
  // Act on an SM_NOTIFY only when it comes from one of the peer's known addresses, so that a
  // spoofed SM_NOTIFY cannot drop another host's locks.
  bool check_notifier_address = true;
  // A registration made from a reserved source port (below 1024: the kernel's lockd, an NFS
  // server running as root) can be changed (SM_MON) or removed (SM_UNMON, SM_UNMON_ALL) only
  // from a reserved port, so that an unprivileged local user cannot unmonitor the kernel's
  // hosts by naming its my_id. Off only where every lock manager runs unprivileged.
  bool protect_privileged_registrations = true;
  // SM_SIMU_CRASH moves the state number and starts a notification round to every monitored
  // host. It is served only from loopback (or the allowlist) and a reserved port, as rpc.statd
  // serves it, one at a time and at most once per this interval, so that a local user cannot
  // churn the state and flood the monitored hosts with notifications.
  std::chrono::seconds simu_crash_interval{30};
  // The deadline of a status callback attempt: the StatusCaller's (nsm.callback_timeout).
  // Shutdown waits for the callbacks in flight this long plus rpc::kShutdownMargin.
  std::chrono::milliseconds callback_deadline{5000};
};

// Counters for /metrics. Indexed by procedure number (SM_NULL..SM_NOTIFY).
struct NsmStats {
  static constexpr size_t kProcedures = 7;
  std::array<uint64_t, kProcedures> succeeded{};  // answered stat_succ (or acted on)
  std::array<uint64_t, kProcedures> failed{};     // answered stat_fail, or had no effect
  std::array<uint64_t, kProcedures> refused{};    // caller not on loopback or the allowlist
  // SM_MON, SM_UNMON, SM_UNMON_ALL from an unreserved port on a registration made from a
  // reserved one (protect_privileged_registrations), and SM_SIMU_CRASH from an unreserved port.
  uint64_t privilege_refusals = 0;
  uint64_t simu_crash_limited = 0;  // SM_SIMU_CRASH within simu_crash_interval of the last
  uint64_t registrations_over_limit = 0;
  uint64_t invalid_arguments = 0;  // empty, unprintable, bad callback program
  uint64_t store_failures = 0;
  uint64_t crashes_detected = 0;      // SM_NOTIFY acted on, per peer
  uint64_t notify_not_monitored = 0;  // SM_NOTIFY rejections, by reason
  uint64_t notify_wrong_address = 0;
  uint64_t notify_replayed = 0;  // state equal to (or older than) the known one
  uint64_t callbacks_local = 0;
  uint64_t callbacks_ok = 0;
  uint64_t callbacks_failed = 0;
  uint64_t callbacks_refused = 0;  // program not in callback_programs
};

// The status monitor, NSM program 100024 version 1: one method per procedure over the
// Registry, with registrations persisted through store::Store before they are acknowledged.
// Runs on `executor`, which also owns the registry; store completions are posted back to it.
// The store, callers, receiver and hook must outlive it; every callback and lookup it spawns is
// held by its TaskGate (Shutdown cancels them and waits).
class NsmService {
 public:
  // `resolver` (may be null: names are then never resolved) finds the addresses of hosts
  // registered by name, for the notifier-address check. `clock` (null: the steady clock) paces
  // SM_SIMU_CRASH.
  NsmService(asio::any_io_executor executor, store::Store& store, StatusCaller& caller,
             LocalStatusReceiver& local, NsmOptions options, NameResolver* resolver = nullptr,
             const Clock* clock = nullptr);
  ~NsmService();
  NsmService(const NsmService&) = delete;
  NsmService& operator=(const NsmService&) = delete;

  // Registers SM_NULL through SM_NOTIFY.
  void Register(rpc::Dispatcher& dispatcher);
  // REQUIRES: before SM_SIMU_CRASH is served.
  void SetRestartHook(RestartHook* hook) { restart_hook_ = hook; }

  // REQUIRES: before anything is served. Null: no events reported.
  void SetMonitorEvents(MonitorEvents* events) { events_ = events; }

  // Start-up: the durable state number and the persisted registrations.
  void Load(int32_t state, const std::vector<store::Registration>& registrations);

  // Procedures (the Open Group XNFS specification, NSM chapter).
  sm_stat_res Stat(const rpc::CallContext& context, const sm_name& args);
  asio::awaitable<sm_stat_res> Mon(const rpc::CallContext& context, mon args);
  asio::awaitable<sm_stat> Unmon(const rpc::CallContext& context, mon_id args);
  asio::awaitable<sm_stat> UnmonAll(const rpc::CallContext& context, my_id args);
  asio::awaitable<void> SimuCrash(const rpc::CallContext& context);
  void Notify(const rpc::CallContext& context, const stat_chge& args);

  // nlockd's own NLM starts monitoring a client host (mon_name = its host key, `address` where it
  // speaks from, `peer_state` its NSM state from lockargs.state). Returns once the registration
  // is durable; false if it could not be made (limit, store failure).
  asio::awaitable<bool> MonitorLocal(std::string mon_name, asio::ip::address address,
                                     int32_t peer_state);

  // The admin API's delete: removes one registration as SM_UNMON does, without SM_UNMON's caller
  // check, and returns once the removal is stored. False if no registration has that key.
  // Throws the store's error (the registration is then gone from memory only).
  asio::awaitable<bool> RemoveRegistration(std::string mon_name, store::MyId id);

  // Stops spawning callbacks and lookups, cancels those in flight and waits for them, at most
  // shutdown_bound().
  asio::awaitable<void> Shutdown();
  // A cancelled callback makes no further attempt, but one under way may run to its deadline.
  std::chrono::steady_clock::duration shutdown_bound() const {
    return options_.callback_deadline + rpc::kShutdownMargin;
  }

  // A configuration reload: the caller rules (allowlist, callback programs, the notifier
  // address check, the reserved-port rules) apply to the calls served from now on.
  // max_registrations is kept: the registry is sized once. Registrations already made stay,
  // whatever their callback program.
  void SetCallerRules(const NsmOptions& options);

  int32_t state() const { return state_; }
  // Start-up, after Load: the state number once it has moved on (Load had the stored one).
  void set_state(int32_t state) { state_ = state; }
  const Registry& registry() const { return registry_; }
  const NsmStats& stats() const { return stats_; }

 private:
  asio::awaitable<rpc::HandlerStatus> SimuCrashCall(const rpc::CallContext& context);
  asio::awaitable<rpc::HandlerStatus> NotifyCall(const rpc::CallContext& context, xdr::Decoder& in);
  bool CallerAllowed(const rpc::CallContext& context, SmProc procedure);
  // Whether `context` may change `registration` (protect_privileged_registrations); logs and
  // counts a refusal.
  bool MayChange(const rpc::CallContext& context, const store::Registration& registration,
                 SmProc procedure);
  // Whether SM_SIMU_CRASH from `context` is served now; logs and counts a refusal.
  bool SimuCrashAllowed(const rpc::CallContext& context);
  // An accepted SM_NOTIFY for `peer`: unless its state is not newer, the status callbacks.
  void HostRebooted(const Registry::Peer& peer, const stat_chge& args, const std::string& source);
  // Writes the peer's new state into each of its registrations (in the background).
  void PersistPeerState(const Registry::Peer& peer, int32_t state);
  void NotMonitored(const stat_chge& args, const std::string& source);
  void RejectAddress(const std::string& peer, const stat_chge& args, const std::string& source);
  // An SM_NOTIFY that matched no peer by name or source address: the peers that have an
  // address of mon_name, resolved (with check_notifier_address, `source` must be one of them).
  asio::awaitable<void> MatchByResolvedName(stat_chge args, std::string source);
  asio::awaitable<void> CheckByName(std::string peer_name, stat_chge args, std::string source);
  // Validates a registration's names and callback; logs and counts what is wrong.
  bool Valid(const std::string& mon_name, const my_id& id, std::string_view procedure);
  // Persists and applies; false (registry unchanged) on the limit or a store failure.
  asio::awaitable<bool> PutRegistration(store::Registration registration);
  asio::awaitable<std::exception_ptr> Persist(std::function<void(store::Done)> write);
  asio::awaitable<std::exception_ptr> Persist(std::vector<std::function<void(store::Done)>> writes);
  asio::awaitable<int32_t> BumpStateOffThread();
  asio::awaitable<void> SendCallback(store::MyId target, StatusCallback body);

  asio::any_io_executor executor_;
  store::Store& store_;
  StatusCaller& caller_;
  LocalStatusReceiver& local_;
  NameResolver* resolver_;
  SteadyClock steady_clock_;
  const Clock& clock_;
  NsmOptions options_;
  RestartHook* restart_hook_ = nullptr;
  MonitorEvents* events_ = nullptr;
  Registry registry_;
  NsmStats stats_;
  int32_t state_ = 0;
  rpc::TaskGate gate_;
  // Lookups of MatchByResolvedName in flight. Past the limit an unmatched SM_NOTIFY is ignored
  // at once, so that a flood of notifications with made-up names (SM_NOTIFY comes from the
  // network) cannot queue lookups without bound ahead of those that check monitored hosts.
  static constexpr size_t kMaxNotifyLookups = 16;
  size_t notify_lookups_ = 0;
  // SM_SIMU_CRASH: whether one is moving the state now, and when the last one was served.
  bool simu_crash_running_ = false;
  std::optional<Clock::time_point> last_simu_crash_;
  // Lines that callers can cause at will (SM_NOTIFY from anywhere, refused calls) are
  // rate-limited per kind, so that a flood of them cannot fill the log.
  LogLimiter refused_log_{"nsm calls refused"};
  LogLimiter simu_crash_log_{"nsm SM_SIMU_CRASH ignored"};
  LogLimiter invalid_log_{"nsm invalid registrations"};
  LogLimiter notify_ignored_log_{"nsm SM_NOTIFY ignored"};
  LogLimiter notify_rejected_log_{"nsm SM_NOTIFY rejected"};
  LogLimiter notify_lookup_log_{"nsm SM_NOTIFY name lookups"};
  // The blocking BumpState of SM_SIMU_CRASH runs here, never on the executor.
  asio::thread_pool worker_{1};
};

// Whether every byte is printable ASCII (0x20..0x7e): names end up in logs, files and SQL.
bool PrintableName(const std::string& name);

// Where a call came from as a registration records it (store::Registration::source_address):
// "10.0.0.1:811", "[::1]:811". The port is kept so that whether an SM_MON came from a reserved
// port is known after a restart.
std::string CallerEndpoint(const rpc::CallContext& context);
// Whether the call came from a reserved port (below 1024: only root may bind one).
bool FromReservedPort(const rpc::CallContext& context);
// Whether a registration was made from a reserved port. One written before the port was
// recorded (a bare address) counts as made from one: it may be the kernel's.
bool MadeFromReservedPort(const store::Registration& registration);

}  // namespace nlockd::nsm
