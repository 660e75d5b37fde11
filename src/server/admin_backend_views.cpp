// SPDX-License-Identifier: Apache-2.0
// AdminBackend's read views: registrations, hosts, locks, shares and waiters (with the locks
// each waits for), each taken on the executor and paged on the caller's thread.
#include <algorithm>
#include <set>
#include <utility>
#include <vector>

#include "lock/lock_manager.hpp"
#include "nsm/registry.hpp"
#include "server/admin_backend.hpp"
#include "server/admin_backend_calls.hpp"

namespace nlockd::server {

using admin::ApiError;
using admin::ApiErrorKind;

namespace {

std::string RegistrationIdOf(const store::Registration& registration) {
  const store::MyId& id = registration.my_id;
  return admin::MakeRegistrationId(registration.mon_name, id.my_name, id.my_prog, id.my_vers,
                                   id.my_proc);
}

int64_t UnixSeconds(std::chrono::system_clock::time_point at) {
  return std::chrono::duration_cast<std::chrono::seconds>(at.time_since_epoch()).count();
}

admin::RegistrationView ToView(const store::Registration& registration) {
  admin::RegistrationView view;
  view.id = RegistrationIdOf(registration);
  view.mon_name = registration.mon_name;
  view.my_name = registration.my_id.my_name;
  view.my_prog = registration.my_id.my_prog;
  view.my_vers = registration.my_id.my_vers;
  view.my_proc = registration.my_id.my_proc;
  view.priv.assign(registration.priv.begin(), registration.priv.end());
  view.source_address = registration.source_address;
  view.created_unix = UnixSeconds(registration.created);
  view.updated_unix = UnixSeconds(registration.updated);
  return view;
}

lock::StateFilter FilterOf(const admin::StateQuery& query) {
  lock::StateFilter filter;
  if (query.host) filter.host = lock::HostId(*query.host);
  if (query.file) filter.file = lock::FileKey(*query.file);
  return filter;
}

admin::LockView ToView(const lock::LockInfo& info) {
  admin::LockView view;
  view.file = info.file.value();
  view.host = info.owner.host.value();
  view.svid = info.owner.svid;
  view.owner = info.owner.oh.value();
  view.offset = info.range.offset();
  view.length = info.range.length();
  view.exclusive = info.type == lock::LockType::kExclusive;
  view.awaiting_reclaim = info.awaiting_reclaim;
  return view;
}

// The API's names of share modes (admin/backend.hpp, docs/api.md), one set for access and deny,
// rather than lock::ToString's log spellings ("read-write", "deny-write"). Both enums are bit
// sets: read 1, write 2.
template <typename Mode>
std::string ShareModeName(Mode mode) {
  const auto bits = static_cast<unsigned>(mode);
  if (bits == 3) return "read_write";
  if (bits == 1) return "read";
  if (bits == 2) return "write";
  return "none";
}

admin::ShareView ToView(const lock::ShareInfo& info) {
  admin::ShareView view;
  view.file = info.file.value();
  view.host = info.owner.host.value();
  view.owner = info.owner.oh.value();
  view.access = ShareModeName(info.access);
  view.deny = ShareModeName(info.deny);
  view.awaiting_reclaim = info.awaiting_reclaim;
  return view;
}

admin::BlockerView ToView(const lock::Blocker& blocker) {
  admin::BlockerView view;
  view.host = blocker.owner.host.value();
  view.svid = blocker.owner.svid;
  view.owner = blocker.owner.oh.value();
  view.offset = blocker.range.offset();
  view.length = blocker.range.length();
  view.exclusive = blocker.type == lock::LockType::kExclusive;
  for (const lock::WaiterId& id : blocker.holder_waits) view.waiting.push_back(id.value());
  return view;
}

admin::WaiterView ToView(const lock::WaiterInfo& info, Clock::time_point now) {
  admin::WaiterView view;
  view.id = info.id.value();
  view.file = info.file.value();
  view.host = info.owner.host.value();
  view.svid = info.owner.svid;
  view.owner = info.owner.oh.value();
  view.offset = info.range.offset();
  view.length = info.range.length();
  view.exclusive = info.type == lock::LockType::kExclusive;
  view.granted = info.granted;
  view.seconds = Seconds(now - info.since);
  return view;
}

// A waiter with the locks it waits for: the edges an operator follows along a chain.
admin::WaiterView ToView(const lock::WaitForInfo& info, Clock::time_point now) {
  admin::WaiterView view = ToView(info.waiter, now);
  for (const lock::Blocker& blocker : info.blocked_by) view.blocked_by.push_back(ToView(blocker));
  view.blockers = info.blockers;
  return view;
}

admin::HostView ToView(const lock::HostInfo& host, Clock::time_point now, bool monitored) {
  admin::HostView view;
  view.name = host.id.value();
  view.label = host.label;
  view.nsm_state = host.nsm_state;
  view.monitored = monitored;
  view.first_seen_seconds_ago = Seconds(now - host.first_seen);
  view.last_seen_seconds_ago = Seconds(now - host.last_seen);
  view.locks = host.locks;
  view.shares = host.shares;
  view.waiters = host.waiters;
  view.pending_grants = host.pending_grants;
  return view;
}

template <typename View, typename Info>
std::vector<View> ToViews(const std::vector<Info>& infos) {
  std::vector<View> views;
  views.reserve(infos.size());
  for (const auto& info : infos) views.push_back(ToView(info));
  return views;
}

}  // namespace

std::optional<store::Registration> AdminBackend::FindRegistration(const std::string& id) const {
  for (auto& registration : parts_.nsm.registry().All()) {
    if (RegistrationIdOf(registration) == id) return std::move(registration);
  }
  return std::nullopt;
}

admin::ListResult<admin::RegistrationView> AdminBackend::ListRegistrations(
    const admin::RegistrationQuery& query) {
  std::vector<admin::RegistrationView> all = OnExecutor([this, query] {
    std::vector<admin::RegistrationView> views;
    for (const auto& registration : parts_.nsm.registry().All()) {
      if (query.mon_name && registration.mon_name != *query.mon_name) continue;
      if (query.my_name && registration.my_id.my_name != *query.my_name) continue;
      views.push_back(ToView(registration));
    }
    return views;
  });
  return admin::TakePage(std::move(all), query.page);
}

admin::RegistrationView AdminBackend::GetRegistration(const std::string& id) {
  auto registration = OnExecutor([this, id] { return FindRegistration(id); });
  if (!registration) throw ApiError(ApiErrorKind::kNotFound, "no registration " + id);
  return ToView(*registration);
}

std::set<std::string> AdminBackend::MonitoredKeys() const {
  std::set<std::string> keys;
  for (const auto& peer : parts_.nsm.registry().Peers()) {
    keys.insert(nsm::FoldName(peer.name));
    keys.insert(peer.addresses.begin(), peer.addresses.end());
  }
  return keys;
}

bool AdminBackend::Monitored(const std::set<std::string>& keys, const std::string& host_id,
                             const std::string& label) {
  return keys.count(nsm::FoldName(host_id)) != 0 || keys.count(host_id) != 0 ||
         (!label.empty() && keys.count(nsm::FoldName(label)) != 0);
}

admin::ListResult<admin::HostView> AdminBackend::ListHosts(const admin::Page& page) {
  std::vector<admin::HostView> all = OnExecutor([this] {
    Clock::time_point now = parts_.clock.Now();
    std::set<std::string> monitored = MonitoredKeys();
    std::vector<admin::HostView> views;
    parts_.locks.hosts().ForEach([&](const lock::HostInfo& host) {
      views.push_back(ToView(host, now, Monitored(monitored, host.id.value(), host.label)));
    });
    // The registry keeps no order; a stable one makes pages meaningful.
    std::sort(views.begin(), views.end(),
              [](const auto& a, const auto& b) { return a.name < b.name; });
    return views;
  });
  return admin::TakePage(std::move(all), page);
}

admin::HostDetail AdminBackend::GetHost(const std::string& name) {
  auto found = OnExecutor([this, name]() -> std::optional<admin::HostDetail> {
    const lock::HostInfo* host = parts_.locks.hosts().Find(lock::HostId(name));
    if (host == nullptr) return std::nullopt;
    Clock::time_point now = parts_.clock.Now();
    admin::HostDetail detail;
    detail.host = ToView(*host, now, Monitored(MonitoredKeys(), name, host->label));
    lock::StateFilter filter;
    filter.host = lock::HostId(name);
    detail.locks = ToViews<admin::LockView>(parts_.locks.ListLocks(filter));
    detail.shares = ToViews<admin::ShareView>(parts_.locks.ListShares(filter));
    for (const auto& waiter : parts_.locks.ListWaitFor(filter)) {
      detail.waiters.push_back(ToView(waiter, now));
    }
    return detail;
  });
  if (!found) throw ApiError(ApiErrorKind::kNotFound, "no host " + name);
  return std::move(*found);
}

admin::ListResult<admin::LockView> AdminBackend::ListLocks(const admin::StateQuery& query) {
  auto all = OnExecutor(
      [this, query] { return ToViews<admin::LockView>(parts_.locks.ListLocks(FilterOf(query))); });
  return admin::TakePage(std::move(all), query.page);
}

admin::ListResult<admin::ShareView> AdminBackend::ListShares(const admin::StateQuery& query) {
  auto all = OnExecutor([this, query] {
    return ToViews<admin::ShareView>(parts_.locks.ListShares(FilterOf(query)));
  });
  return admin::TakePage(std::move(all), query.page);
}

admin::ListResult<admin::WaiterView> AdminBackend::ListWaiters(const admin::StateQuery& query) {
  auto all = OnExecutor([this, query] {
    Clock::time_point now = parts_.clock.Now();
    std::vector<admin::WaiterView> views;
    for (const auto& waiter : parts_.locks.ListWaitFor(FilterOf(query))) {
      views.push_back(ToView(waiter, now));
    }
    return views;
  });
  return admin::TakePage(std::move(all), query.page);
}

}  // namespace nlockd::server
