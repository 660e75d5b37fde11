// SPDX-License-Identifier: Apache-2.0
#include "nsm/notify_schedule.hpp"

#include <algorithm>

#include "base/error.hpp"

namespace nlockd::nsm {

void NotifySchedule::Add(std::string mon_name, std::string address, std::string our_name,
                         int32_t state, time_point now) {
  auto it = hosts_.find(mon_name);
  if (it == hosts_.end()) {
    it = hosts_.emplace(std::move(mon_name), Host{}).first;
  } else if (!it->second.in_flight) {
    Unqueue(it->first, it->second);
  }
  Host& host = it->second;
  const bool in_flight = host.in_flight;
  host = Host{};
  host.address = std::move(address);
  host.our_name = std::move(our_name);
  host.state = state;
  host.generation = next_generation_++;
  // An attempt in flight for the old entry still holds the host until it reports back (stale);
  // only then is the new entry handed out, so that one host never has two attempts at once.
  host.in_flight = in_flight;
  host.next_due = now;
  host.give_up_after = now + options_.total_budget;
  if (!host.in_flight) Queue(it->first, host);
}

void NotifySchedule::AnnounceForAll(const std::string& our_name, int32_t state) {
  for (auto& [name, host] : hosts_) {
    host.our_name = our_name;
    host.state = state;
  }
}

std::optional<NotifyAttempt> NotifySchedule::PopDue(time_point now) {
  if (due_.empty() || due_.begin()->first > now) return std::nullopt;
  auto it = hosts_.find(due_.begin()->second);
  NLOCKD_ASSERT(it != hosts_.end());
  due_.erase(due_.begin());
  Host& host = it->second;
  host.in_flight = true;
  ++in_flight_;
  if (host.port && host.failures_on_port >= options_.rpcbind_requery_after) {
    host.port.reset();
    host.failures_on_port = 0;
  }
  NotifyAttempt attempt;
  attempt.mon_name = it->first;
  attempt.address = host.address;
  attempt.our_name = host.our_name;
  attempt.state = host.state;
  attempt.generation = host.generation;
  attempt.attempt = host.failures + 1;
  attempt.port = host.port;
  return attempt;
}

std::optional<NotifySchedule::time_point> NotifySchedule::NextDue() const {
  if (due_.empty()) return std::nullopt;
  return due_.begin()->first;
}

NotifySchedule::Outcome NotifySchedule::Answered(const std::string& mon_name, uint64_t generation) {
  auto it = hosts_.find(mon_name);
  if (it == hosts_.end()) return Outcome::kStale;
  Host& host = it->second;
  if (host.generation != generation) {
    if (host.in_flight) {
      // The replaced entry's attempt is over: the new one may go out now.
      host.in_flight = false;
      --in_flight_;
      Queue(it->first, host);
    }
    return Outcome::kStale;
  }
  Erase(it);
  return Outcome::kDone;
}

NotifySchedule::Outcome NotifySchedule::Failed(const std::string& mon_name, uint64_t generation,
                                               time_point now, std::optional<PeerPort> learned) {
  auto it = hosts_.find(mon_name);
  if (it == hosts_.end()) return Outcome::kStale;
  Host& host = it->second;
  if (host.generation != generation) return Answered(mon_name, generation);
  NLOCKD_ASSERT(host.in_flight);
  ++host.failures;
  if (!host.port && learned) {
    host.port = learned;
    host.failures_on_port = 0;
  }
  if (host.port) ++host.failures_on_port;
  const time_point next = now + BackoffAfter(host.failures);
  if (next > host.give_up_after) {
    Erase(it);
    return Outcome::kGiveUp;
  }
  host.in_flight = false;
  --in_flight_;
  host.next_due = next;
  Queue(it->first, host);
  return Outcome::kRetry;
}

std::chrono::milliseconds NotifySchedule::BackoffAfter(uint32_t failures) const {
  std::chrono::milliseconds delay = options_.initial_backoff;
  for (uint32_t i = 1; i < failures && delay < options_.max_backoff; ++i) delay *= 2;
  return std::min(delay, options_.max_backoff);
}

std::optional<NotifyHostView> NotifySchedule::View(const std::string& mon_name) const {
  auto it = hosts_.find(mon_name);
  if (it == hosts_.end()) return std::nullopt;
  const Host& host = it->second;
  return NotifyHostView{host.state,    host.failures,     host.in_flight, host.port.has_value(),
                        host.next_due, host.give_up_after};
}

std::vector<std::pair<std::string, std::string>> NotifySchedule::Hosts() const {
  std::vector<std::pair<std::string, std::string>> hosts;
  hosts.reserve(hosts_.size());
  for (const auto& [name, host] : hosts_) hosts.emplace_back(name, host.address);
  return hosts;
}

void NotifySchedule::Queue(const std::string& mon_name, const Host& host) {
  due_.emplace(host.next_due, mon_name);
}

void NotifySchedule::Unqueue(const std::string& mon_name, const Host& host) {
  due_.erase({host.next_due, mon_name});
}

void NotifySchedule::Erase(std::map<std::string, Host>::iterator it) {
  if (it->second.in_flight) {
    --in_flight_;
  } else {
    Unqueue(it->first, it->second);
  }
  hosts_.erase(it);
}

}  // namespace nlockd::nsm
