// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "admin/backend.hpp"

namespace nlockd::admin::testing {

// An in-memory Backend for tests of the router, the server and nlockctl: it holds views as the
// test sets them and applies filters, paging, deletes, releases and grace end to them the way a
// real backend must. Thread-safe (the HTTP threads call it concurrently).
class FakeBackend : public Backend {
 public:
  // A populated state: registrations for two monitored hosts, two client hosts with locks, a
  // share and a waiter, and an active fine-grained grace period.
  static void Populate(FakeBackend& backend);

  void SetStatus(const StatusView& status);
  void SetReadiness(bool store_loaded, bool listening);
  void AddRegistration(RegistrationView registration);
  void AddHost(HostView host);
  void AddLock(LockView lock);
  void AddShare(ShareView share);
  void AddWaiter(WaiterView waiter);
  void SetGrace(const GraceView& grace);
  // The hosts Notify() was asked for ("*" for all), in order.
  std::vector<std::string> notified() const;
  // Makes this an HA node of `service` at `epoch` (ReleaseService() is refused without it).
  void SetHa(std::string service, int64_t epoch);
  // How many times ReleaseService() was accepted.
  int releases() const;

  StatusView Status() override;
  ReadinessView Readiness() override;
  ListResult<RegistrationView> ListRegistrations(const RegistrationQuery& query) override;
  RegistrationView GetRegistration(const std::string& id) override;
  void DeleteRegistration(const std::string& id) override;
  ListResult<HostView> ListHosts(const Page& page) override;
  HostDetail GetHost(const std::string& name) override;
  ReleaseResult ReleaseHost(const std::string& name) override;
  ListResult<LockView> ListLocks(const StateQuery& query) override;
  ListResult<ShareView> ListShares(const StateQuery& query) override;
  ListResult<WaiterView> ListWaiters(const StateQuery& query) override;
  GraceView Grace() override;
  GraceView EndGrace() override;
  NotifyResult Notify(const std::optional<std::string>& host) override;
  ServiceReleaseResult ReleaseService() override;

 private:
  StatusView StatusLocked() const;
  const HostView* FindHostLocked(const std::string& name) const;

  mutable std::mutex mutex_;
  StatusView status_;
  bool store_loaded_ = false;
  bool listening_ = false;
  std::vector<RegistrationView> registrations_;
  std::vector<HostView> hosts_;
  std::vector<LockView> locks_;
  std::vector<ShareView> shares_;
  std::vector<WaiterView> waiters_;
  GraceView grace_;
  std::vector<std::string> notified_;
  std::optional<ServiceReleaseResult> ha_;
  int releases_ = 0;
};

}  // namespace nlockd::admin::testing
