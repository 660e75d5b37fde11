// SPDX-License-Identifier: Apache-2.0
// NlmService and client hosts as a whole: FREE_ALL, the status monitor's reboot callback
// (procedure 16) and reboots NSM reports, each releasing everything of a host (the callback
// only of hosts whose known NSM state differs from the notified one).
#include <asio/ip/address.hpp>
#include <spdlog/spdlog.h>

#include "base/host_name.hpp"
#include "base/logging.hpp"
#include "nlm/service.hpp"
#include "rpc/address.hpp"

namespace nlockd::nlm {
namespace {

// Whether a monitor's name for a host (its mon_name) names this host: by key or caller_name.
bool HostNamed(const lock::HostInfo& host, const std::string& name) {
  return SameHostName(host.id.value(), name) || SameHostName(host.label, name);
}

// A rebooted host's lockd may come back on another port: the next callback asks again.
void ForgetCallbackPort(ClientCaller& caller, const lock::HostInfo& host) {
  asio::error_code bad;
  const asio::ip::address address = asio::ip::make_address(host.address, bad);
  if (!bad) caller.ForgetHost(address);
}

}  // namespace

asio::awaitable<void> NlmService::FreeAll(const rpc::CallContext& context, nlm4_notify args) {
  // A caller may free only itself, as with Linux lockd: the named host (by key or caller_name)
  // must be bound to the request's own source address. Being on loopback proves nothing: every
  // client on this machine is, each with its own address.
  std::vector<std::string> hosts;
  const std::string peer = rpc::AddressToString(context.peer_address);
  locks_.hosts().ForEach([&](const lock::HostInfo& host) {
    bool named = HostNamed(host, args.name);
    if (named && !host.address.empty() && host.address == peer) hosts.push_back(host.id.value());
  });
  if (hosts.empty()) {
    ++stats_.spoof_rejections;
    refused_log_.Log(spdlog::level::warn,
                     "nlm FREE_ALL name={} from {} refused: no host of that name is bound to that "
                     "address",
                     LogValue(args.name), peer);
    co_return;
  }
  HostsReleased released;
  std::vector<JournalEntry> entries;
  lock::Grants grants;
  for (const auto& host : hosts) ReleaseHost(host, released, entries, grants);
  const JournalBarrier::Ticket ticket = JoinJournal(std::move(entries), grants);
  FinishGrants(std::move(grants), co_await AwaitJournal(ticket));
}

void NlmService::SmNotify(const rpc::CallContext& context, const nlm_sm_status& args) {
  // Only a co-resident statd may tell us a host rebooted: loopback and a reserved port, as
  // Linux lockd requires.
  if (!rpc::IsLoopback(context.peer_address) || context.peer_port >= 1024) {
    ++stats_.spoof_rejections;
    refused_log_.Log(spdlog::level::warn,
                     "nlm SM_NOTIFY (procedure 16) for {} from {}:{} refused: not loopback with a "
                     "reserved port",
                     LogValue(args.mon_name), rpc::AddressToString(context.peer_address),
                     context.peer_port);
    return;
  }
  // As Linux lockd, a host is released only if its known NSM state differs from the notified
  // one; here that is also the state its lock requests carried (lockargs.state). A replayed or
  // late callback, or one that arrives after the rebooted client already locked under its new
  // state, must not drop what it holds now. The lock table keeps one state per host, so locks
  // of the old state that such a host still holds beside the new ones stay too. A released
  // host keeps its old state until its next lock request says the new one; until then a
  // replay finds it holding nothing.
  std::vector<std::string> hosts;
  locks_.hosts().ForEach([&](const lock::HostInfo& host) {
    if (!HostNamed(host, args.mon_name)) return;
    if (host.nsm_state == args.state) {
      spdlog::info(
          "nlm SM_NOTIFY (procedure 16) for {} state={}: host={} ignored, already at that state",
          LogValue(args.mon_name), args.state, LogValue(host.id.value()));
      return;
    }
    if (!host.HoldsState()) {
      // Nothing to release; its lockd may still have moved to another port.
      ForgetCallbackPort(caller_, host);
      return;
    }
    hosts.push_back(host.id.value());
  });
  ReleaseHostKeys(hosts);
}

HostsReleased NlmService::ReleaseHosts(const std::string& name) {
  std::vector<std::string> hosts;
  locks_.hosts().ForEach([&](const lock::HostInfo& host) {
    if (HostNamed(host, name)) hosts.push_back(host.id.value());
  });
  return ReleaseHostKeys(hosts);
}

HostsReleased NlmService::ReleaseHostKeys(const std::vector<std::string>& hosts) {
  HostsReleased released;
  std::vector<JournalEntry> entries;
  lock::Grants grants;
  for (const auto& host : hosts) ReleaseHost(host, released, entries, grants);
  PersistInBackground(std::move(entries), std::move(grants));
  return released;
}

void NlmService::ReleaseHost(const std::string& host, HostsReleased& released,
                             std::vector<JournalEntry>& entries, lock::Grants& grants) {
  if (const lock::HostInfo* info = locks_.hosts().Find(lock::HostId(host)); info != nullptr) {
    ForgetCallbackPort(caller_, *info);
  }
  lock::HostReleaseOutcome outcome = locks_.ReleaseHost(lock::HostId(host));
  ForgetHostWaiters(host);
  ++stats_.hosts_released;
  spdlog::info("nlm released host={} locks={} shares={} waiters={} grants={} restored_dropped={}",
               LogValue(host), outcome.locks, outcome.shares, outcome.waiters,
               outcome.grants.size(), outcome.restored);
  entries.push_back(JournalEntry::HostReleased(lock::HostId(host)));
  ++released.hosts;
  released.locks += outcome.locks;
  released.shares += outcome.shares;
  released.waiters += outcome.waiters;
  released.waiters_granted += outcome.grants.size();
  for (auto& grant : outcome.grants) grants.push_back(std::move(grant));
}

}  // namespace nlockd::nlm
