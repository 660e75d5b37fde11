// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>

#include "base/clock.hpp"
#include "lock/owner.hpp"

namespace nlockd::lock {

// What the registry knows about one client host.
struct HostInfo {
  HostId id;
  std::string label;                 // E.g. the NLM caller_name of a host keyed by address.
  std::optional<int32_t> nsm_state;  // The client's last reported NSM state (lockargs.state).
  // Where its latest request that left it holding state came from (LockRequest::host_address):
  // the protocol layer lets only that address release the host (NLM FREE_ALL).
  std::string address;
  Clock::time_point first_seen;
  Clock::time_point last_seen;
  uint64_t locks = 0;           // Lock entries held, including granted-unacknowledged ones.
  uint64_t shares = 0;          // Share reservations held.
  uint64_t waiters = 0;         // Blocked requests still queued.
  uint64_t pending_grants = 0;  // Granted blocked requests not yet acknowledged.
  // Times everything of the host was released (LockManager::ReleaseHost): an undo of a call
  // made before a release does not bring back what that release dropped.
  uint64_t releases = 0;

  bool HoldsState() const {
    return locks != 0 || shares != 0 || waiters != 0 || pending_grants != 0;
  }
};

// The client hosts known to a lock manager (DittoFS's connection tracker), protocol-agnostic so
// that other protocols can reuse it. A host is added when it first takes state and stays, idle,
// after it releases everything, so that "first time seen" means what it says; idle hosts are
// evicted, least recently seen first, only to make room, or forgotten on request.
// The counts are kept current by the LockManager.
// Thread safety: none; owned by the LockManager's executor. `clock` must outlive the registry.
class HostRegistry {
 public:
  // `max_hosts` stops a flood of client identities (spoofed UDP source addresses, invented
  // caller_names) from growing the registry, and with it the lock state, without bound.
  HostRegistry(const Clock& clock, size_t max_hosts);
  HostRegistry(const HostRegistry&) = delete;
  HostRegistry& operator=(const HostRegistry&) = delete;

  const HostInfo* Find(const HostId& id) const;
  HostInfo* Find(const HostId& id);

  enum class Admission : uint8_t {
    kWithinLimit,  // Refuse a new host when full and no idle host can be evicted.
    kForce,        // Restored state: admit past the limit.
  };
  struct AddResult {
    HostInfo* host = nullptr;  // nullptr: refused, the registry is full.
    bool added = false;        // The host was not known before this call.
  };
  AddResult FindOrAdd(const HostId& id, Admission admission = Admission::kWithinLimit);

  // Records that the host was heard from now.
  void Touch(HostInfo& host) const { host.last_seen = clock_.Now(); }

  // Removes an idle host. Returns false if it is unknown or still holds state.
  bool Forget(const HostId& id);

  size_t size() const { return hosts_.size(); }
  size_t max_hosts() const { return max_hosts_; }

  // Calls fn(const HostInfo&) for every host, in no particular order.
  void ForEach(const std::function<void(const HostInfo&)>& fn) const;

 private:
  bool EvictOldestIdle();

  const Clock& clock_;
  size_t max_hosts_;
  std::unordered_map<HostId, HostInfo> hosts_;
};

}  // namespace nlockd::lock
