// SPDX-License-Identifier: Apache-2.0
#include "nsm/notifier.hpp"

#include <algorithm>
#include <exception>
#include <memory>
#include <unordered_map>
#include <utility>

#include <asio/experimental/awaitable_operators.hpp>
#include <asio/ip/address.hpp>
#include <asio/ip/udp.hpp>
#include <asio/this_coro.hpp>
#include <spdlog/spdlog.h>

#include "base/error.hpp"
#include "base/host_name.hpp"
#include "nsm/name_resolver.hpp"
#include "nsm/wire.hpp"
#include "rpc/client.hpp"
#include "rpc/rpcbind.hpp"
#include "rpc/use_tuple.hpp"
#include "store/store.hpp"
#include "xdr/decoder.hpp"
#include "xdr/encoder.hpp"

namespace nlockd::nsm {

namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;
using namespace asio::experimental::awaitable_operators;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

NotifyScheduleOptions ScheduleOptionsFrom(const NotifierOptions& options) {
  return NotifyScheduleOptions{options.initial_backoff, options.max_backoff,
                               options.rpcbind_requery_after, options.total_budget};
}

// Done of the owed-row writes. Runs on the store's thread, so it only logs (spdlog is
// thread-safe) and touches nothing of the Notifier, which may be gone by then.
store::Done LogStoreFailure(std::string what) {
  return [what = std::move(what)](std::exception_ptr error) {
    if (!error) return;
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      spdlog::error("nsm notifier: {} failed: {}", what, e.what());
    }
  };
}

}  // namespace

Notifier::Notifier(asio::any_io_executor executor, rpc::Client& client, store::Store& store,
                   const Clock& clock, NotifierOptions options)
    : Notifier(executor, client, clock, options) {
  store_ = &store;
}

Notifier::Notifier(asio::any_io_executor executor, rpc::Client& client, const Clock& clock,
                   NotifierOptions options)
    : executor_(executor),
      client_(client),
      store_(nullptr),
      clock_(clock),
      options_(options),
      schedule_(ScheduleOptionsFrom(options)),
      gate_(executor, "nsm notifier"),
      channel_gate_(executor, "nsm notifier channel"),
      channel_(executor, channel_gate_, options.source_port),
      wake_(executor) {
  NLOCKD_REQUIRE(options.max_in_flight > 0 && options.max_open_attempts > 0);
}

void Notifier::SetTiming(const NotifierOptions& timing) {
  options_.attempt_deadline = timing.attempt_deadline;
  options_.initial_backoff = timing.initial_backoff;
  options_.max_backoff = timing.max_backoff;
  options_.total_budget = timing.total_budget;
  options_.statd_port = timing.statd_port;
  options_.statd_transport = timing.statd_transport;
  options_.rpcbind_port = timing.rpcbind_port;
  schedule_.set_options(ScheduleOptionsFrom(options_));
}

// A task that outlived Shutdown()'s bound was logged there; its pass outlives the gates safely,
// and the executor no longer runs it (see the class comment).
Notifier::~Notifier() = default;

void Notifier::StartRound(std::string our_name, int32_t state, std::vector<NotifyTarget> targets) {
  if (stopping_) {
    spdlog::warn("nsm notifier: round for state {} ignored after shutdown", state);
    return;
  }
  targets = MergeTargets({}, std::move(targets));
  const Clock::time_point now = clock_.Now();
  if (round_start_) {
    ++stats_.rounds_replaced;
    spdlog::info("nsm notifier: round in progress replaced ({} hosts owed, state {} now)",
                 schedule_.size(), state);
  }
  ++stats_.rounds_started;
  round_start_ = now;
  round_answered_ = 0;
  round_given_up_ = 0;
  // Hosts still owed from the round in progress announce the new state too.
  schedule_.AnnounceForAll(our_name, state);
  for (NotifyTarget& target : targets) {
    schedule_.Add(std::move(target.mon_name), std::move(target.address), our_name, state, now);
  }
  std::vector<store::NotifyOwed> owed;
  owed.reserve(schedule_.size());
  for (auto& [mon_name, address] : schedule_.Hosts()) {
    owed.push_back(store::NotifyOwed{std::move(mon_name), std::move(address), state, 0});
  }
  spdlog::info("nsm notifier: announcing state {} as '{}' to {} hosts", state, our_name,
               owed.size());
  if (store_ != nullptr) {
    store_->PutNotifyOwed(std::move(owed), LogStoreFailure("recording hosts owed SM_NOTIFY"));
  }

  if (pump_running_) {
    wake_.Set();
    return;
  }
  pump_running_ = true;
  // The gate closes only once stopping_ is set.
  NLOCKD_ASSERT(gate_.Spawn("notification pump", [this] { return Pump(); }));
}

NotifierStats Notifier::stats() const {
  NotifierStats stats = stats_;
  stats.pending = schedule_.size();
  stats.in_flight = schedule_.in_flight();
  stats.lingering = stats.in_flight - active_;
  return stats;
}

asio::awaitable<void> Notifier::Shutdown() {
  stopping_ = true;
  // Cancelled, the pump stops and each attempt ends its call (unanswered: its host stays owed).
  co_await gate_.CancelAndWait(options_.attempt_deadline + options_.shutdown_grace);
  // Only now: the attempts' calls read their replies through the channel.
  channel_.Close();
  co_await channel_gate_.CancelAndWait(options_.shutdown_grace);
  spdlog::info("nsm notifier stopped; {} hosts still owed SM_NOTIFY", schedule_.size());
}

// Hands out due hosts while fewer than max_in_flight attempts run, then sleeps until the next
// host is due or an attempt ends or a round starts (wake_ is set). The executor is
// single-threaded and wake_ stays set until the next turn of this loop, so no news is lost.
asio::awaitable<void> Notifier::Pump() {
  while (!stopping_) {
    wake_.Reset();
    const Clock::time_point now = clock_.Now();
    while (HasRoom()) {
      std::optional<NotifyAttempt> attempt = schedule_.PopDue(now);
      if (!attempt) break;
      ++stats_.attempts;
      ++active_;  // here, not in RunAttempt: co_spawn only posts its start
      const bool spawned = gate_.Spawn(
          "SM_NOTIFY attempt", [this, &attempt] { return RunAttempt(std::move(*attempt)); });
      NLOCKD_ASSERT(spawned);  // the gate closes only once stopping_ is set
    }
    if (schedule_.empty()) {
      EndRound();
      break;
    }
    Clock::duration wait = std::chrono::hours(1);  // until an attempt ends
    if (HasRoom()) {
      if (auto next = schedule_.NextDue()) wait = std::max(Clock::duration(0), *next - now);
    }
    co_await wake_.WaitFor(wait);  // cancelled at shutdown: stopping_ ends the loop
  }
  pump_running_ = false;
}

asio::awaitable<void> Notifier::RunAttempt(NotifyAttempt attempt) {
  // The pump counted this attempt in active_ when it spawned it; HoldSlot gives the slot back
  // at slot_hold or when the attempt ended, whichever is first. `ended` outlives both.
  rpc::Event ended(executor_);
  const Clock::time_point started = clock_.Now();
  // Named first: g++ 12 double-destroys temporaries in a co_await operand (PR 101367 family).
  auto run = AttemptThenSet(attempt, ended);
  auto hold = HoldSlot(ended);
  AttemptResult result = co_await (std::move(run) && std::move(hold));
  if (stopping_ && result.failure != AttemptResult::Failure::kNone) {
    // Cancelled by Shutdown (or failed as it began): the host stays owed, and this is no
    // failure of the peer's.
    co_return;
  }
  const NotifyAttemptReport::Outcome outcome = Finish(attempt, result);
  if (on_attempt_) {
    on_attempt_(NotifyAttemptReport{attempt.mon_name, outcome, clock_.Now() - started});
  }
  wake_.Set();
}

asio::awaitable<Notifier::AttemptResult> Notifier::AttemptThenSet(NotifyAttempt attempt,
                                                                  rpc::Event& ended) {
  // A branch of RunAttempt's &&, on a thread of its own: as for TaskGate::Spawn, a cancel ends
  // the current wait with an error, never with an exception that would skip the clean-up of
  // the channel's calls.
  co_await asio::this_coro::throw_if_cancelled(false);
  AttemptResult result;
  try {
    // Asio 1.22 does not pass the gate's cancellation into the && group: the attempt races the
    // gate's cancelled() event instead, which cancels it.
    auto call = UnthrowingAttempt(std::move(attempt));  // named first (g++ 12)
    auto cancelled = gate_.cancelled().Wait();
    auto outcome = co_await (std::move(call) || std::move(cancelled));
    if (outcome.index() == 0) {
      result = std::get<0>(std::move(outcome));
    } else {
      result.failure = AttemptResult::Failure::kCall;
      result.detail = "cancelled at shutdown";
    }
  } catch (const std::exception& e) {
    result.failure = AttemptResult::Failure::kCall;
    result.detail = e.what();
  }
  ended.Set();
  co_return result;
}

asio::awaitable<Notifier::AttemptResult> Notifier::UnthrowingAttempt(NotifyAttempt attempt) {
  co_await asio::this_coro::throw_if_cancelled(false);  // as in AttemptThenSet
  co_return co_await Attempt(std::move(attempt));
}

// Gives the attempt's slot back after slot_hold, unless replies wait unread in the channel:
// then the executor is behind, and freeing slots would only start attempts it cannot serve
// within their deadlines (the overload that made sm-notify lose replies), so it waits again.
// Ends at once when the attempt ended.
asio::awaitable<void> Notifier::HoldSlot(rpc::Event& ended) {
  co_await asio::this_coro::throw_if_cancelled(false);  // as in AttemptThenSet
  for (;;) {
    const bool attempt_ended = co_await ended.WaitFor(options_.slot_hold);
    if (attempt_ended || ended.IsSet() || stopping_ || !channel_.RepliesQueued()) break;
  }
  --active_;
  wake_.Set();
}

bool Notifier::HasRoom() const {
  return active_ < options_.max_in_flight && schedule_.in_flight() < options_.max_open_attempts;
}

NotifyAttemptReport::Outcome Notifier::Finish(const NotifyAttempt& attempt,
                                              const AttemptResult& result) {
  using Failure = AttemptResult::Failure;
  using Outcome = NotifyAttemptReport::Outcome;
  if (result.failure == Failure::kNone) {
    if (schedule_.Answered(attempt.mon_name, attempt.generation) ==
        NotifySchedule::Outcome::kStale) {
      ++stats_.stale_results;
      return Outcome::kAnswered;
    }
    ++stats_.answered;
    ++round_answered_;
    spdlog::debug("nsm notifier: {} answered SM_NOTIFY (attempt {})", attempt.mon_name,
                  attempt.attempt);
    RemoveOwed(attempt.mon_name);
    if (on_answered_) on_answered_(attempt.mon_name);
    return Outcome::kAnswered;
  }
  ++stats_.failed_attempts;
  if (result.failure == Failure::kResolve) ++stats_.resolve_failures;
  if (result.failure == Failure::kRpcbind) ++stats_.rpcbind_failures;
  switch (schedule_.Failed(attempt.mon_name, attempt.generation, clock_.Now(), result.learned)) {
    case NotifySchedule::Outcome::kRetry:
      // One warning per host and round (its first failure), and one when it is given up;
      // the retries in between are debug lines.
      spdlog::log(attempt.attempt <= 1 ? spdlog::level::warn : spdlog::level::debug,
                  "nsm notifier: SM_NOTIFY to {} failed (attempt {}): {}; retrying with backoff",
                  attempt.mon_name, attempt.attempt, result.detail);
      break;
    case NotifySchedule::Outcome::kGiveUp:
      ++stats_.given_up;
      ++round_given_up_;
      spdlog::warn(
          "nsm notifier: giving up on {} after {} attempts (last: {}); treating it as "
          "crashed",
          attempt.mon_name, attempt.attempt, result.detail);
      RemoveOwed(attempt.mon_name);
      if (on_given_up_) on_given_up_(attempt.mon_name);
      return Outcome::kGaveUp;
    case NotifySchedule::Outcome::kStale:
      ++stats_.stale_results;
      break;
    case NotifySchedule::Outcome::kDone:
      NLOCKD_ASSERT(false, "a failed attempt cannot complete a host");
  }
  return Outcome::kFailed;
}

void Notifier::RemoveOwed(const std::string& mon_name) {
  if (store_ == nullptr) return;
  store_->RemoveNotifyOwed(mon_name, LogStoreFailure("removing owed SM_NOTIFY of " + mon_name));
}

void Notifier::EndRound() {
  if (!round_start_) return;
  const Clock::duration took = clock_.Now() - *round_start_;
  ++stats_.rounds_completed;
  stats_.round_durations.push_back(took);
  if (stats_.round_durations.size() > NotifierStats::kMaxRoundDurations) {
    stats_.round_durations.erase(stats_.round_durations.begin());
  }
  spdlog::info("nsm notifier: round ended after {:.3f} s: {} hosts answered, {} given up",
               Seconds(took), round_answered_, round_given_up_);
  round_start_.reset();
}

}  // namespace nlockd::nsm
