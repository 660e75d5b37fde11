// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "base/clock.hpp"

// When each host owed an SM_NOTIFY is tried next: the backoff, the rpcbind re-query and the
// give-up of the restart notifier, with no I/O and no Asio, so that tests drive it with a
// ManualClock. The Notifier waits on timers for the times it returns.
namespace nlockd::nsm {

struct NotifyScheduleOptions {
  // Pause after the first failed attempt; it doubles after each further failure (sm-notify: 2 s).
  std::chrono::milliseconds initial_backoff{2000};
  // The doubling stops here (sm-notify: 120 s), so a host that comes back late is found soon.
  std::chrono::milliseconds max_backoff{120000};
  // Failed attempts on a port learned from the peer's rpcbind before rpcbind is asked again
  // (sm-notify: 4), in case the peer's statd restarted on another port.
  uint32_t rpcbind_requery_after = 4;
  // Time from a host's first attempt after which it is not tried again but given up (treated
  // as crashed); bounds how long an unreachable host stays owed (sm-notify: 15 min).
  std::chrono::milliseconds total_budget{std::chrono::minutes(15)};
};

// Where a peer's statd listens, as its rpcbind said.
struct PeerPort {
  uint16_t port = 0;
  bool tcp = false;

  friend bool operator==(const PeerPort&, const PeerPort&) = default;
};

// One attempt to make now.
struct NotifyAttempt {
  std::string mon_name;
  std::string address;  // IP literal, or empty: resolve mon_name
  std::string our_name;
  int32_t state = 0;
  uint64_t generation = 0;       // hand back to Answered/Failed
  uint32_t attempt = 0;          // 1 for the first attempt of this round
  std::optional<PeerPort> port;  // nullopt: ask the peer's rpcbind
};

// The schedule as a test sees it.
struct NotifyHostView {
  int32_t state = 0;
  uint32_t failures = 0;
  bool in_flight = false;
  bool port_cached = false;
  Clock::time_point next_due;
  Clock::time_point give_up_after;
};

// Owns the hosts still owed an SM_NOTIFY: each one's announced state, failures, cached statd
// port, next due time and budget end. A host is in flight between PopDue and Answered/Failed
// and is not handed out twice. Not thread-safe; the Notifier uses it on its executor.
class NotifySchedule {
 public:
  using time_point = Clock::time_point;

  explicit NotifySchedule(NotifyScheduleOptions options) : options_(options) {}

  // Owes host an SM_NOTIFY(our_name, state), due at once, with a fresh budget and no failures.
  // A host already owed is replaced (the newest state wins); the outcome of an attempt already
  // in flight for it is then ignored (Answered/Failed report kStale).
  void Add(std::string mon_name, std::string address, std::string our_name, int32_t state,
           time_point now);
  // Makes every host owed announce (our_name, state) from its next attempt on, keeping its
  // schedule: a newer round must never be followed by an older state number.
  void AnnounceForAll(const std::string& our_name, int32_t state);

  // The next host due at or before now and not in flight, marked in flight; earliest first.
  std::optional<NotifyAttempt> PopDue(time_point now);
  // The earliest due time of a host not in flight.
  std::optional<time_point> NextDue() const;

  enum class Outcome {
    kDone,    // the host is no longer owed
    kRetry,   // it is due again at NextDue()
    kGiveUp,  // its budget is spent: it is no longer owed, treat it as crashed
    kStale,   // the attempt was for a replaced entry (or an unknown host); nothing changed
  };
  Outcome Answered(const std::string& mon_name, uint64_t generation);
  // `learned`: the port the attempt got from rpcbind, if it asked and got one.
  Outcome Failed(const std::string& mon_name, uint64_t generation, time_point now,
                 std::optional<PeerPort> learned);

  // Delay after the n-th consecutive failure (n >= 1): 2, 4, 8, ..., 120, 120 s by default.
  std::chrono::milliseconds BackoffAfter(uint32_t failures) const;

  // A configuration reload: later retries use the new backoff, hosts added later the new
  // budget; a host already owed keeps the give-up time its round gave it.
  void set_options(NotifyScheduleOptions options) { options_ = options; }

  bool empty() const { return hosts_.empty(); }
  size_t size() const { return hosts_.size(); }
  size_t in_flight() const { return in_flight_; }
  std::optional<NotifyHostView> View(const std::string& mon_name) const;
  // (mon_name, address) of every host owed, by mon_name.
  std::vector<std::pair<std::string, std::string>> Hosts() const;

 private:
  struct Host {
    std::string address;
    std::string our_name;
    int32_t state = 0;
    uint64_t generation = 0;
    uint32_t failures = 0;
    uint32_t failures_on_port = 0;  // since the cached port was learned
    std::optional<PeerPort> port;
    bool in_flight = false;
    time_point next_due;
    time_point give_up_after;
  };

  void Queue(const std::string& mon_name, const Host& host);
  void Unqueue(const std::string& mon_name, const Host& host);
  void Erase(std::map<std::string, Host>::iterator it);

  NotifyScheduleOptions options_;
  uint64_t next_generation_ = 1;
  size_t in_flight_ = 0;
  std::map<std::string, Host> hosts_;
  // Hosts not in flight, by due time.
  std::set<std::pair<time_point, std::string>> due_;
};

}  // namespace nlockd::nsm
