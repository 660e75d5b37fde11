// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include <asio/any_io_executor.hpp>
#include <asio/awaitable.hpp>

#include "admin/backend.hpp"
#include "base/clock.hpp"
#include "nlm/service.hpp"
#include "nsm/notifier.hpp"
#include "nsm/service.hpp"
#include "rpc/server.hpp"
#include "server/grace_controller.hpp"
#include "store/records.hpp"

namespace nlockd::lock {
class LockManager;
}
namespace nlockd::admin {
class Metrics;
struct ServiceCounts;
}  // namespace nlockd::admin

namespace nlockd::server {

class NsmBridge;

// What the admin backend reads and steers; everything lives on the server's executor.
struct AdminBackendParts {
  asio::any_io_executor executor;
  const Clock& clock;
  lock::LockManager& locks;
  nsm::NsmService& nsm;
  nsm::Notifier& notifier;
  nlm::NlmService& nlm;
  const NsmBridge& bridge;
  admin::Metrics& metrics;
  std::string server_name;
  bool granted_msg = true;  // Blocked locks are granted with GRANTED_MSG (else GRANTED).
  // The start-up grace period: its reclaim counts, and ending it (so that what it drops is
  // counted and the restored rows settled). Null: the LockManager's grace alone.
  GraceController* grace = nullptr;
  // With ha: this node's role, as status and readiness report it (thread-safe). Empty: no ha.
  std::function<admin::HaView()> ha;
  // With ha: asks the host program to release the service (false if it cannot). May be empty.
  std::function<bool()> release_service;
};

// admin::Backend over the running server. Called on the admin server's HTTP threads: each call
// posts its work to the executor that owns lock and NSM state and waits for it (at most
// `timeout`, then ApiError kUnavailable), so lock/ and nsm/ are never touched off that executor.
// Before MarkStoreLoaded() and after Close() every call but Readiness fails at once with
// kUnavailable. While it lives it is also Metrics' source of the services' own counters
// (admin::ServiceCounts, read the same way at each Metrics::Refresh).
// Every part must outlive the backend; the backend must outlive the executor's run.
//
// Files: admin_backend.cpp (start-up, status, grace, metrics), admin_backend_views.cpp (the read
// views: registrations, hosts, locks, shares, waiters), admin_backend_actions.cpp (what changes
// state: deleting a registration, releasing a host, ending grace, notifying).
class AdminBackend final : public admin::Backend {
 public:
  // How long an HTTP thread waits for the executor: a stalled or flooded executor costs an admin
  // caller a 503, not a hung worker (there are only AdminServerOptions::threads of them).
  static constexpr std::chrono::seconds kDefaultTimeout{5};

  explicit AdminBackend(AdminBackendParts parts,
                        std::chrono::milliseconds timeout = kDefaultTimeout);
  ~AdminBackend() override;
  AdminBackend(const AdminBackend&) = delete;
  AdminBackend& operator=(const AdminBackend&) = delete;

  // Start-up steps, from the thread that runs server::Core::Start before calls are served.
  // MarkListening also notes the restored state awaiting reclaim, so call it after the lock
  // table is restored. The RPC counters are summed over every listener in `rpc_servers` (the
  // main port, --nsm-listen's), which must outlive the backend's calls.
  void MarkStoreLoaded() { store_loaded_.store(true); }
  void MarkListening(std::span<const std::unique_ptr<rpc::Server>> rpc_servers);
  // Serving calls the host program hands in, without a listener of nlockd's own.
  void MarkServing();
  // Shutting down: calls fail with kUnavailable from now on.
  void Close() { closed_.store(true); }

  admin::StatusView Status() override;
  admin::ReadinessView Readiness() override;
  admin::ListResult<admin::RegistrationView> ListRegistrations(
      const admin::RegistrationQuery& query) override;
  admin::RegistrationView GetRegistration(const std::string& id) override;
  void DeleteRegistration(const std::string& id) override;
  admin::ListResult<admin::HostView> ListHosts(const admin::Page& page) override;
  admin::HostDetail GetHost(const std::string& name) override;
  admin::ReleaseResult ReleaseHost(const std::string& name) override;
  admin::ListResult<admin::LockView> ListLocks(const admin::StateQuery& query) override;
  admin::ListResult<admin::ShareView> ListShares(const admin::StateQuery& query) override;
  admin::ListResult<admin::WaiterView> ListWaiters(const admin::StateQuery& query) override;
  admin::GraceView Grace() override;
  admin::GraceView EndGrace() override;
  admin::NotifyResult Notify(const std::optional<std::string>& host) override;
  admin::ServiceReleaseResult ReleaseService() override;

 private:
  // Runs work() on the executor and returns its result (or rethrows what it threw).
  template <typename Work>
  auto OnExecutor(Work work) -> decltype(work());
  template <typename T>
  T Await(asio::awaitable<T> work);
  void CheckOpen() const;

  // These run on the executor.
  admin::StatusView StatusNow() const;
  admin::ServiceCounts ReadServiceCounts() const;
  admin::GraceView GraceNow() const;
  // Folded mon_names and addresses of every monitored peer.
  std::set<std::string> MonitoredKeys() const;
  static bool Monitored(const std::set<std::string>& keys, const std::string& host_id,
                        const std::string& label);
  std::optional<store::Registration> FindRegistration(const std::string& id) const;
  asio::awaitable<bool> RemoveRegistration(std::string mon_name, store::MyId my_id);

  AdminBackendParts parts_;
  std::chrono::milliseconds timeout_;
  Clock::time_point started_;
  std::atomic<bool> store_loaded_{false};
  std::atomic<bool> serving_{false};
  std::atomic<bool> closed_{false};
  // Written before the executor runs (MarkListening), before serving_ is set; read on it.
  uint64_t reclaims_expected_ = 0;
  std::vector<const rpc::Server*> rpc_servers_;
};

}  // namespace nlockd::server
