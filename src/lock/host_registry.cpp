// SPDX-License-Identifier: Apache-2.0
#include "lock/host_registry.hpp"

namespace nlockd::lock {

HostRegistry::HostRegistry(const Clock& clock, size_t max_hosts)
    : clock_(clock), max_hosts_(max_hosts) {}

const HostInfo* HostRegistry::Find(const HostId& id) const {
  auto it = hosts_.find(id);
  return it == hosts_.end() ? nullptr : &it->second;
}

HostInfo* HostRegistry::Find(const HostId& id) {
  auto it = hosts_.find(id);
  return it == hosts_.end() ? nullptr : &it->second;
}

HostRegistry::AddResult HostRegistry::FindOrAdd(const HostId& id, Admission admission) {
  if (hosts_.size() >= max_hosts_) {
    if (HostInfo* known = Find(id)) return AddResult{known, false};
    if (admission == Admission::kWithinLimit && !EvictOldestIdle()) return AddResult{};
  }
  auto [it, inserted] = hosts_.try_emplace(id);
  if (inserted) {
    const Clock::time_point now = clock_.Now();
    it->second.id = id;
    it->second.first_seen = now;
    it->second.last_seen = now;
  }
  return AddResult{&it->second, inserted};
}

bool HostRegistry::Forget(const HostId& id) {
  auto it = hosts_.find(id);
  if (it == hosts_.end() || it->second.HoldsState()) return false;
  hosts_.erase(it);
  return true;
}

void HostRegistry::ForEach(const std::function<void(const HostInfo&)>& fn) const {
  for (const auto& [id, info] : hosts_) fn(info);
}

// A linear scan: it runs only when the registry is full and a new host arrives.
bool HostRegistry::EvictOldestIdle() {
  auto oldest = hosts_.end();
  for (auto it = hosts_.begin(); it != hosts_.end(); ++it) {
    if (it->second.HoldsState()) continue;
    if (oldest == hosts_.end() || it->second.last_seen < oldest->second.last_seen) oldest = it;
  }
  if (oldest == hosts_.end()) return false;
  hosts_.erase(oldest);
  return true;
}

}  // namespace nlockd::lock
