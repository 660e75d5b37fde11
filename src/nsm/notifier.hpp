// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <asio/any_io_executor.hpp>
#include <asio/awaitable.hpp>
#include <asio/ip/address.hpp>

#include "base/clock.hpp"
#include "nsm/notify_channel.hpp"
#include "nsm/notify_schedule.hpp"
#include "nsm/notify_targets.hpp"
#include "nsm/registry.hpp"
#include "rpc/call_context.hpp"
#include "rpc/event.hpp"
#include "rpc/task_gate.hpp"

namespace nlockd::rpc {
class Client;
}
namespace nlockd::store {
class Store;
struct LoadedState;
}  // namespace nlockd::store

// The restart notifier: after a state bump, SM_NOTIFY(our name, state) to the statd of every
// monitored host, in parallel, retried with backoff.
namespace nlockd::nsm {

// At namespace scope: g++ 12 cannot default-construct a nested struct with member initialisers
// in a default argument (docs/decisions/0001-toolchain-pitfalls.md, item 5).
struct NotifierOptions {
  // Attempts waiting for an answer younger than slot_hold, at most: bounds the burst of
  // timers and replies at the start of a round, so that the executor keeps up and answers are
  // not lost to retransmissions piling up (UDP calls share one socket: NotifyChannel).
  size_t max_in_flight = 256;
  // An attempt unanswered for this long stops counting against max_in_flight (its peer is
  // probably down or far) but runs on to its deadline, so that silent hosts do not hold the
  // slots while answering ones wait: each silent host costs the round slot_hold of one slot
  // (LAN peers answer in about a millisecond; bench/notify measures the effect). Not while
  // replies wait unread: then the executor is behind and more attempts would only time out.
  std::chrono::milliseconds slot_hold{100};
  // Attempts of any age at most: bounds memory and, for the TCP ones (a socket each), file
  // descriptors.
  size_t max_open_attempts = 4096;
  // Total deadline of one attempt: resolve + rpcbind GETPORT + SM_NOTIFY and its reply.
  std::chrono::milliseconds attempt_deadline{5000};
  // First UDP retransmission within an attempt's calls; doubles after each.
  std::chrono::milliseconds udp_retry{500};
  // Backoff between attempts, rpcbind re-query and the give-up budget (sm-notify's values).
  std::chrono::milliseconds initial_backoff{2000};
  std::chrono::milliseconds max_backoff{120000};
  uint32_t rpcbind_requery_after = 4;
  std::chrono::milliseconds total_budget{std::chrono::minutes(15)};
  // Non-zero: every peer's statd is at this port (over statd_transport); rpcbind is not asked.
  uint16_t statd_port = 0;
  rpc::Transport statd_transport = rpc::Transport::kUdp;
  // Where peers' portmappers listen (111; tests move it).
  uint16_t rpcbind_port = 111;
  // Non-zero: the source port of every call (rpcbind and SM_NOTIFY, UDP and TCP), for
  // firewalls (rpc.statd's --outgoing-port).
  uint16_t source_port = 0;
  // How long Shutdown waits for attempts beyond attempt_deadline after cancelling them (a
  // name lookup on Asio's resolver thread cannot be cancelled), and for the receive loops.
  std::chrono::milliseconds shutdown_grace{1000};
};

struct NotifierStats {
  uint64_t rounds_started = 0;
  uint64_t rounds_completed = 0;  // every host answered or given up
  uint64_t rounds_replaced = 0;   // a new round started while this one was in progress
  uint64_t attempts = 0;          // attempts begun (resolve, rpcbind, call)
  uint64_t sent = 0;              // SM_NOTIFY calls made
  uint64_t answered = 0;          // hosts that answered
  uint64_t failed_attempts = 0;   // attempts that ended without an answer
  uint64_t resolve_failures = 0;  // of those: the name did not resolve in time
  uint64_t rpcbind_failures = 0;  // of those: no port from the peer's rpcbind
  uint64_t given_up = 0;          // hosts whose budget ran out
  uint64_t stale_results = 0;     // attempts whose host was re-added meanwhile
  size_t pending = 0;             // hosts still owed
  size_t in_flight = 0;           // attempts running, lingering ones included
  size_t lingering = 0;           // of those: unanswered past slot_hold
  // Durations of the last rounds that completed, oldest first (at most kMaxRoundDurations).
  std::vector<Clock::duration> round_durations;
  static constexpr size_t kMaxRoundDurations = 32;
};

// One SM_NOTIFY attempt that ended (nsm_notification_duration_seconds).
struct NotifyAttemptReport {
  enum class Outcome {
    kAnswered,  // The peer answered (even if a newer round had re-added it meanwhile).
    kFailed,    // No answer; the host is retried (or was re-added meanwhile).
    kGaveUp,    // No answer, and the host's budget ran out.
  };
  const std::string& mon_name;
  Outcome outcome;
  Clock::duration duration;  // Resolve, rpcbind GETPORT and the call, by the injected clock.
};

// Owns the schedule of hosts owed an SM_NOTIFY and the coroutines that notify them. Runs on
// `executor`, which must be single-threaded (an io_context run by one thread, or a strand);
// every callback runs there. executor, client, store and clock must outlive the Notifier.
// REQUIRES: Shutdown() has completed before the Notifier is destroyed (if a round ever started),
// and the executor runs no handler of it after that.
class Notifier {
 public:
  Notifier(asio::any_io_executor executor, rpc::Client& client, store::Store& store,
           const Clock& clock, NotifierOptions options);
  // A notifier whose rounds are not recorded in a store: what it owes is lost with it (the
  // status monitor's early round, which the store's own round follows).
  Notifier(asio::any_io_executor executor, rpc::Client& client, const Clock& clock,
           NotifierOptions options);
  ~Notifier();
  Notifier(const Notifier&) = delete;
  Notifier& operator=(const Notifier&) = delete;

  // Starts announcing SM_NOTIFY(mon_name = our_name, state) to every target in the background
  // and returns at once. Persists the targets as owed (one PutNotifyOwed batch); each row goes
  // when its host answers or is given up. A round in progress is replaced: a host in both gets
  // a fresh schedule, and every host still owed announces the newest state. Targets are
  // deduplicated by mon_name (case-insensitively). Ignored after Shutdown.
  void StartRound(std::string our_name, int32_t state, std::vector<NotifyTarget> targets);

  void set_on_answered(std::function<void(const std::string& mon_name)> callback) {
    on_answered_ = std::move(callback);
  }
  // The host's budget ran out: treat it as crashed.
  void set_on_given_up(std::function<void(const std::string& mon_name)> callback) {
    on_given_up_ = std::move(callback);
  }

  // Every attempt, once it ended (after on_answered / on_given_up for its host).
  void set_on_attempt(std::function<void(const NotifyAttemptReport&)> callback) {
    on_attempt_ = std::move(callback);
  }

  NotifierStats stats() const;
  // A configuration reload: the attempt deadline, backoff, budget and the peers' statd and
  // rpcbind ports apply to attempts begun from now on (see NotifySchedule::set_options).
  // The concurrency limits, retransmission timing and source port are kept.
  void SetTiming(const NotifierOptions& timing);
  bool RoundActive() const { return round_start_.has_value(); }
  size_t Pending() const { return schedule_.size(); }

  // Stops retries and new attempts, cancels the attempts in flight and waits for them (at most
  // attempt_deadline + shutdown_grace). Hosts not answered stay owed in the store for the next
  // start.
  asio::awaitable<void> Shutdown();

 private:
  struct AttemptResult {
    enum class Failure { kNone, kResolve, kRpcbind, kCall };
    Failure failure = Failure::kNone;
    std::optional<PeerPort> learned;
    std::string detail;
  };

  asio::awaitable<void> Pump();
  asio::awaitable<void> RunAttempt(NotifyAttempt attempt);
  // Attempt(), with an exception as a failed call; sets `ended` when it returns.
  asio::awaitable<AttemptResult> AttemptThenSet(NotifyAttempt attempt, rpc::Event& ended);
  // Attempt() on a thread of its own that a cancel does not make throw.
  asio::awaitable<AttemptResult> UnthrowingAttempt(NotifyAttempt attempt);
  asio::awaitable<AttemptResult> Attempt(NotifyAttempt attempt);
  asio::awaitable<std::optional<uint16_t>> GetPort(asio::ip::address address, uint32_t protocol,
                                                   std::chrono::steady_clock::time_point deadline);
  bool HasRoom() const;
  asio::awaitable<void> HoldSlot(rpc::Event& ended);
  NotifyAttemptReport::Outcome Finish(const NotifyAttempt& attempt, const AttemptResult& result);
  void RemoveOwed(const std::string& mon_name);
  void EndRound();

  asio::any_io_executor executor_;
  rpc::Client& client_;
  store::Store* store_;  // null: nothing recorded
  const Clock& clock_;
  NotifierOptions options_;  // SetTiming changes some; see there
  NotifySchedule schedule_;
  rpc::TaskGate gate_;          // the pump and the attempts
  rpc::TaskGate channel_gate_;  // the channel's receive loops
  NotifyChannel channel_;
  rpc::Event wake_;    // the pump sleeps on it; set when there is news
  size_t active_ = 0;  // attempts counted against max_in_flight
  bool pump_running_ = false;
  bool stopping_ = false;
  std::optional<Clock::time_point> round_start_;
  uint64_t round_answered_ = 0;
  uint64_t round_given_up_ = 0;
  NotifierStats stats_;
  std::function<void(const std::string&)> on_answered_;
  std::function<void(const std::string&)> on_given_up_;
  std::function<void(const NotifyAttemptReport&)> on_attempt_;
};

}  // namespace nlockd::nsm
