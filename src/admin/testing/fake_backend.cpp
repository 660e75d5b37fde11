// SPDX-License-Identifier: Apache-2.0
#include "admin/testing/fake_backend.hpp"

#include <algorithm>
#include <set>

namespace nlockd::admin::testing {
namespace {

template <typename T>
bool Matches(const T& item, const StateQuery& query) {
  return (!query.host || item.host == *query.host) && (!query.file || item.file == *query.file);
}

template <typename T>
ListResult<T> Select(const std::vector<T>& items, const StateQuery& query) {
  std::vector<T> selected;
  for (const T& item : items) {
    if (Matches(item, query)) selected.push_back(item);
  }
  return TakePage(std::move(selected), query.page);
}

RegistrationView MakeRegistration(std::string mon_name, std::string my_name, int32_t prog,
                                  int32_t proc) {
  RegistrationView registration;
  registration.id = MakeRegistrationId(mon_name, my_name, prog, 1, proc);
  registration.mon_name = std::move(mon_name);
  registration.my_name = std::move(my_name);
  registration.my_prog = prog;
  registration.my_vers = 1;
  registration.my_proc = proc;
  registration.priv = std::string(16, '\x01');
  registration.source_address = "127.0.0.1";
  registration.created_unix = 1'790'000'000;
  registration.updated_unix = 1'790'000'100;
  return registration;
}

}  // namespace

void FakeBackend::Populate(FakeBackend& backend) {
  StatusView status;
  status.state_number = 7;
  status.server_name = "server.example";
  status.uptime_seconds = 12.5;
  backend.SetStatus(status);
  backend.SetReadiness(true, true);

  backend.AddRegistration(MakeRegistration("client-a", "localhost", 100021, 16));
  backend.AddRegistration(MakeRegistration("client-b", "localhost", 100021, 16));
  backend.AddRegistration(MakeRegistration("client-b", "other-lockd", 200001, 1));

  HostView a;
  a.name = "client-a";
  a.label = "client-a.example";
  a.nsm_state = 3;
  a.monitored = true;
  backend.AddHost(a);
  HostView b;
  b.name = "client-b";
  b.monitored = true;
  backend.AddHost(b);

  backend.AddLock({"\x01\x02\xff", "client-a", 11, "11@client-a", 0, 100, true, false});
  backend.AddLock({"\x01\x02\xff", "client-a", 12, "12@client-a", 200, 0, false, true});
  backend.AddLock({"\xaa\xbb", "client-b", 5, "5@client-b", 0, 10, false, false});
  backend.AddShare({"\xaa\xbb", "client-a", "share-owner", "read", "write", false});
  backend.AddWaiter({42,
                     "\x01\x02\xff",
                     "client-b",
                     6,
                     "6@client-b",
                     0,
                     50,
                     true,
                     false,
                     3.0,
                     {{"client-a", 11, "11@client-a", 0, 100, true, {}}},
                     1});

  GraceView grace;
  grace.active = true;
  grace.mode = "fine-grained";
  grace.seconds_left = 80;
  grace.reclaims_counted = 1;
  grace.reclaims_expected = 2;
  backend.SetGrace(grace);
}

void FakeBackend::SetStatus(const StatusView& status) {
  std::lock_guard lock(mutex_);
  status_ = status;
}

void FakeBackend::SetReadiness(bool store_loaded, bool listening) {
  std::lock_guard lock(mutex_);
  store_loaded_ = store_loaded;
  listening_ = listening;
}

void FakeBackend::AddRegistration(RegistrationView registration) {
  std::lock_guard lock(mutex_);
  registrations_.push_back(std::move(registration));
}

void FakeBackend::AddHost(HostView host) {
  std::lock_guard lock(mutex_);
  hosts_.push_back(std::move(host));
}

void FakeBackend::AddLock(LockView lock_view) {
  std::lock_guard lock(mutex_);
  locks_.push_back(std::move(lock_view));
}

void FakeBackend::AddShare(ShareView share) {
  std::lock_guard lock(mutex_);
  shares_.push_back(std::move(share));
}

void FakeBackend::AddWaiter(WaiterView waiter) {
  std::lock_guard lock(mutex_);
  waiters_.push_back(std::move(waiter));
}

void FakeBackend::SetGrace(const GraceView& grace) {
  std::lock_guard lock(mutex_);
  grace_ = grace;
}

std::vector<std::string> FakeBackend::notified() const {
  std::lock_guard lock(mutex_);
  return notified_;
}

StatusView FakeBackend::StatusLocked() const {
  StatusView status = status_;
  status.grace = grace_;
  status.registrations = registrations_.size();
  std::set<std::string> monitored;
  for (const auto& registration : registrations_) monitored.insert(registration.mon_name);
  status.monitored_hosts = monitored.size();
  status.hosts = hosts_.size();
  status.locks = locks_.size();
  status.shares = shares_.size();
  status.waiters = 0;
  status.pending_grants = 0;
  for (const auto& waiter : waiters_) ++(waiter.granted ? status.pending_grants : status.waiters);
  return status;
}

StatusView FakeBackend::Status() {
  std::lock_guard lock(mutex_);
  return StatusLocked();
}

ReadinessView FakeBackend::Readiness() {
  std::lock_guard lock(mutex_);
  return {store_loaded_, listening_, grace_, std::nullopt};
}

ListResult<RegistrationView> FakeBackend::ListRegistrations(const RegistrationQuery& query) {
  std::lock_guard lock(mutex_);
  std::vector<RegistrationView> selected;
  for (const auto& registration : registrations_) {
    if (query.mon_name && registration.mon_name != *query.mon_name) continue;
    if (query.my_name && registration.my_name != *query.my_name) continue;
    selected.push_back(registration);
  }
  return TakePage(std::move(selected), query.page);
}

RegistrationView FakeBackend::GetRegistration(const std::string& id) {
  std::lock_guard lock(mutex_);
  for (const auto& registration : registrations_) {
    if (registration.id == id) return registration;
  }
  throw ApiError(ApiErrorKind::kNotFound, "no registration with id " + id);
}

void FakeBackend::DeleteRegistration(const std::string& id) {
  std::lock_guard lock(mutex_);
  const auto erased = std::erase_if(
      registrations_, [&](const RegistrationView& registration) { return registration.id == id; });
  if (erased == 0) throw ApiError(ApiErrorKind::kNotFound, "no registration with id " + id);
}

ListResult<HostView> FakeBackend::ListHosts(const Page& page) {
  std::lock_guard lock(mutex_);
  std::vector<HostView> hosts = hosts_;
  for (HostView& host : hosts) {
    const auto of_host = [&](const auto& item) { return item.host == host.name; };
    host.locks = static_cast<uint64_t>(std::count_if(locks_.begin(), locks_.end(), of_host));
    host.shares = static_cast<uint64_t>(std::count_if(shares_.begin(), shares_.end(), of_host));
    host.waiters = static_cast<uint64_t>(std::count_if(waiters_.begin(), waiters_.end(), of_host));
  }
  return TakePage(std::move(hosts), page);
}

const HostView* FakeBackend::FindHostLocked(const std::string& name) const {
  for (const auto& host : hosts_) {
    if (host.name == name) return &host;
  }
  return nullptr;
}

HostDetail FakeBackend::GetHost(const std::string& name) {
  std::lock_guard lock(mutex_);
  const HostView* host = FindHostLocked(name);
  if (host == nullptr) throw ApiError(ApiErrorKind::kNotFound, "no host " + name);
  HostDetail detail;
  detail.host = *host;
  StateQuery query;
  query.host = name;
  query.page.limit = SIZE_MAX;
  detail.locks = Select(locks_, query).items;
  detail.shares = Select(shares_, query).items;
  detail.waiters = Select(waiters_, query).items;
  detail.host.locks = detail.locks.size();
  detail.host.shares = detail.shares.size();
  detail.host.waiters = detail.waiters.size();
  return detail;
}

ReleaseResult FakeBackend::ReleaseHost(const std::string& name) {
  std::lock_guard lock(mutex_);
  if (FindHostLocked(name) == nullptr) throw ApiError(ApiErrorKind::kNotFound, "no host " + name);
  ReleaseResult result;
  const auto of_host = [&](const auto& item) { return item.host == name; };
  result.locks = std::erase_if(locks_, of_host);
  result.shares = std::erase_if(shares_, of_host);
  result.waiters = std::erase_if(waiters_, of_host);
  return result;
}

ListResult<LockView> FakeBackend::ListLocks(const StateQuery& query) {
  std::lock_guard lock(mutex_);
  return Select(locks_, query);
}

ListResult<ShareView> FakeBackend::ListShares(const StateQuery& query) {
  std::lock_guard lock(mutex_);
  return Select(shares_, query);
}

ListResult<WaiterView> FakeBackend::ListWaiters(const StateQuery& query) {
  std::lock_guard lock(mutex_);
  return Select(waiters_, query);
}

GraceView FakeBackend::Grace() {
  std::lock_guard lock(mutex_);
  return grace_;
}

GraceView FakeBackend::EndGrace() {
  std::lock_guard lock(mutex_);
  if (!grace_.active) throw ApiError(ApiErrorKind::kConflict, "no grace period is active");
  grace_.active = false;
  grace_.mode.clear();
  grace_.seconds_left = 0;
  grace_.last_end_reason = "admin";
  return grace_;
}

NotifyResult FakeBackend::Notify(const std::optional<std::string>& host) {
  std::lock_guard lock(mutex_);
  std::set<std::string> monitored;
  for (const auto& registration : registrations_) monitored.insert(registration.mon_name);
  if (host && monitored.count(*host) == 0) {
    throw ApiError(ApiErrorKind::kNotFound, "no registration monitors " + *host);
  }
  notified_.push_back(host.value_or("*"));
  return {host ? 1 : monitored.size()};
}

void FakeBackend::SetHa(std::string service, int64_t epoch) {
  std::lock_guard lock(mutex_);
  ha_ = ServiceReleaseResult{std::move(service), epoch};
}

int FakeBackend::releases() const {
  std::lock_guard lock(mutex_);
  return releases_;
}

ServiceReleaseResult FakeBackend::ReleaseService() {
  std::lock_guard lock(mutex_);
  if (!ha_) throw ApiError(ApiErrorKind::kConflict, "this node does not run with ha");
  ++releases_;
  return *ha_;
}

}  // namespace nlockd::admin::testing
