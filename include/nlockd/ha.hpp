// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "nlockd/export.hpp"
#include "nlockd/types.hpp"

namespace nlockd {

// The role of a node of an HA service (Options::ha).
enum class HaRole { kStandby, kActive };

struct HaState {
  HaRole role = HaRole::kStandby;
  // Who holds the service's lease as last seen ("nlockd pid P on HOST"; this node's own while
  // active); empty when the lease is free or was never taken.
  std::string holder;
  int64_t epoch = 0;  // the lease's epoch as last seen: +1 per takeover
  std::chrono::seconds lease{0};
};

// Where a LockService with Options::ha reports its role. It outlives the constructor's wait:
// with ha, the LockService constructor waits as standby until this node holds the service's
// lease (docs/decisions/0017), so a host that wants to show the standby (an admin endpoint, a
// metric) makes an HaStatus first, reads it from other threads while the constructor waits,
// and keeps reading it while the service runs. Thread-safe.
//
// ABI: holds only a pointer to its implementation.
class NLOCKD_EXPORT HaStatus {
 public:
  // `admin_token`: as Options::admin_token, for HandleAdminRequest().
  explicit HaStatus(std::string admin_token = {});
  ~HaStatus();
  HaStatus(const HaStatus&) = delete;
  HaStatus& operator=(const HaStatus&) = delete;

  HaState Get() const;

  // How this host program performs a planned release (`nlockctl service release`, POST
  // /api/v1/service/release on the active node): `handler` is called on an admin thread and
  // must only arrange for the service to stop (not wait for it); the host then shuts the
  // LockService down (which releases the lease at once), calls HoldOffNextTakeover() and builds
  // a new LockService with this status, which waits as standby. Without a handler the request
  // is refused with 503.
  void SetReleaseHandler(std::function<void()> handler);
  // The next LockService built with this status, waiting as standby, leaves a free lease to the
  // other nodes for `hold_off` before taking it itself; applies to that one construction.
  void HoldOffNextTakeover(std::chrono::milliseconds hold_off);

  // The admin API (docs/api.md) of a node that has no running service yet (the standby, or
  // the active one while its LockService is being built): /healthz 200; /readyz 503 with
  // "role", "holder" and "epoch"; /api/v1/status with the "ha" object; /metrics with
  // nlockd_ha_role, nlockd_ha_epoch and nlockd_ha_lease_info; anything else 503. Once the
  // service runs, LockService::HandleAdminRequest answers the same fields for the active node.
  AdminResponse HandleAdminRequest(const AdminRequest& request) const;

 private:
  friend class LockService;
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace nlockd
