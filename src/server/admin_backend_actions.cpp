// SPDX-License-Identifier: Apache-2.0
// AdminBackend's actions: what the admin API changes (a registration deleted, a host released,
// grace ended, SM_NOTIFY sent again), each done on the executor the way the protocol would.
#include <optional>
#include <string>
#include <utility>

#include <spdlog/spdlog.h>

#include "base/logging.hpp"
#include "lock/lock_manager.hpp"
#include "nsm/registry.hpp"
#include "server/admin_backend.hpp"
#include "server/admin_backend_calls.hpp"

namespace nlockd::server {

using admin::ApiError;
using admin::ApiErrorKind;

asio::awaitable<bool> AdminBackend::RemoveRegistration(std::string mon_name, store::MyId my_id) {
  co_return co_await parts_.nsm.RemoveRegistration(std::move(mon_name), std::move(my_id));
}

void AdminBackend::DeleteRegistration(const std::string& id) {
  auto registration = OnExecutor([this, id] { return FindRegistration(id); });
  if (!registration) throw ApiError(ApiErrorKind::kNotFound, "no registration " + id);
  if (nsm::IsLocalNlmId(registration->my_id)) {
    // Removing it would leave a host holding locks unwatched: a reboot would not free them.
    throw ApiError(ApiErrorKind::kConflict, "registration " + id +
                                                " is nlockd's own NLM monitoring a client host; "
                                                "release the host instead");
  }
  // Gone meanwhile (an SM_UNMON raced us): the caller wanted it gone, and it is.
  Await(RemoveRegistration(registration->mon_name, registration->my_id));
}

admin::ReleaseResult AdminBackend::ReleaseHost(const std::string& name) {
  auto released = OnExecutor([this, name]() -> std::optional<admin::ReleaseResult> {
    // The reboot path: releases every host `name` names (its key, or its caller_name label,
    // matched by SameHostName as FREE_ALL and the status callback match: "Client1" releases
    // "client1@192.0.2.7" under host_key caller_name), journals it, and sends the GRANTED
    // callbacks of the waiters it serves.
    const nlm::HostsReleased outcome = parts_.nlm.ReleaseHosts(name);
    if (outcome.hosts == 0) return std::nullopt;
    admin::ReleaseResult result;
    result.locks = outcome.locks;
    result.shares = outcome.shares;
    result.waiters = outcome.waiters;
    result.waiters_granted = outcome.waiters_granted;
    spdlog::info("admin released host={} hosts={} locks={} shares={} waiters={} waiters_granted={}",
                 name, outcome.hosts, result.locks, result.shares, result.waiters,
                 result.waiters_granted);
    return result;
  });
  if (!released) throw ApiError(ApiErrorKind::kNotFound, "no host " + name);
  return *released;
}

admin::GraceView AdminBackend::EndGrace() {
  auto ended = OnExecutor([this]() -> std::optional<admin::GraceView> {
    if (!parts_.locks.grace().IsActive()) return std::nullopt;
    spdlog::info("grace period ended by the admin API");
    if (parts_.grace != nullptr) {
      parts_.grace->End(lock::GraceEndReason::kAdmin);
      return GraceNow();
    }
    lock::DropOutcome dropped = parts_.locks.EndGrace(lock::GraceEndReason::kAdmin);
    parts_.nlm.SendGrants(std::move(dropped.grants));
    return GraceNow();
  });
  if (!ended) throw ApiError(ApiErrorKind::kConflict, "no grace period is active");
  return *ended;
}

admin::NotifyResult AdminBackend::Notify(const std::optional<std::string>& host) {
  auto queued = OnExecutor([this, host]() -> std::optional<uint64_t> {
    std::vector<nsm::NotifyTarget> targets = nsm::MonitoredTargets(parts_.nsm.registry(), host);
    if (host && targets.empty()) return std::nullopt;
    uint64_t count = targets.size();
    int32_t state = parts_.nsm.state();
    spdlog::info("admin: notifying {} hosts of state {} as {}", count, state, parts_.server_name);
    if (count != 0) parts_.notifier.StartRound(parts_.server_name, state, std::move(targets));
    return count;
  });
  if (!queued) throw ApiError(ApiErrorKind::kNotFound, "no registration monitors " + *host);
  admin::NotifyResult result;
  result.hosts = *queued;
  return result;
}

// Not on the executor: the host program stops the service from its own thread.
admin::ServiceReleaseResult AdminBackend::ReleaseService() {
  if (!parts_.ha) throw ApiError(ApiErrorKind::kConflict, "this node does not run with ha");
  const admin::HaView view = parts_.ha();
  if (!view.active) throw ApiError(ApiErrorKind::kConflict, "this node is not the active node");
  if (!parts_.release_service || !parts_.release_service()) {
    throw ApiError(ApiErrorKind::kUnavailable,
                   "the program running this service cannot release it; stop it instead");
  }
  spdlog::info("admin: releasing service {} (epoch {})", LogValue(parts_.server_name), view.epoch);
  return admin::ServiceReleaseResult{parts_.server_name, view.epoch};
}

}  // namespace nlockd::server
