#include "nlm/service.hpp"

#include <algorithm>
#include <cctype>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <spdlog/spdlog.h>

#include "rpc/address.hpp"
#include "rpc/use_tuple.hpp"

namespace nlockd::nlm {

namespace {

using lock::LockStatus;

// --- Converters: wire <-> lock/ -------------------------------------------------------------

nlm4_stats ToWire(LockStatus status) {
  switch (status) {
    case LockStatus::kGranted:
      return NLM4_GRANTED;
    case LockStatus::kDenied:
      return NLM4_DENIED;
    case LockStatus::kBlocked:
      return NLM4_BLOCKED;
    case LockStatus::kDeniedGrace:
      return NLM4_DENIED_GRACE_PERIOD;
    case LockStatus::kNoResources:
      return NLM4_DENIED_NOLOCKS;
    case LockStatus::kInvalidRange:
      return NLM4_FBIG;  // v1/v3: mapped to denied_nolocks by StatusForVersion.
  }
  return NLM4_FAILED;
}

nlm4_holder ToWire(const lock::Holder& holder) {
  return nlm4_holder{holder.type == lock::LockType::kExclusive, holder.owner.svid,
                     holder.owner.oh.value(), holder.range.offset(), holder.range.length()};
}

lock::ShareAccess ToAccess(fsh_access access) { return static_cast<lock::ShareAccess>(access); }
lock::ShareDeny ToDeny(fsh_mode mode) { return static_cast<lock::ShareDeny>(mode); }

std::string CookieFor(lock::WaiterId id) {
  std::string cookie(8, '\0');
  for (int i = 0; i < 8; ++i) cookie[static_cast<size_t>(i)] = static_cast<char>(id.value() >> (56 - 8 * i));
  return cookie;
}

std::optional<uint64_t> WaiterIdFromCookie(const std::string& cookie) {
  if (cookie.size() != 8) return std::nullopt;
  uint64_t id = 0;
  for (char c : cookie) id = (id << 8) | static_cast<uint8_t>(c);
  return id;
}

bool SameName(std::string_view a, std::string_view b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

}  // namespace

struct NlmService::GrantAck {
  explicit GrantAck(asio::any_io_executor executor)
      : timer(std::move(executor), asio::steady_timer::time_point::max()) {}
  asio::steady_timer timer;
  std::optional<nlm4_stats> stat;
};

NlmService::NlmService(asio::any_io_executor executor, lock::LockManager& locks,
                       HostMonitor& monitor, ClientCaller& caller, NlmOptions options)
    : executor_(executor),
      locks_(locks),
      monitor_(monitor),
      caller_(caller),
      options_(options),
      gate_(executor) {}

NlmService::~NlmService() = default;

std::string NlmService::HostKeyFor(const rpc::CallContext& context,
                                   const std::string& caller_name) const {
  if (options_.host_key == NlmOptions::HostKey::kCallerName && !caller_name.empty()) {
    return caller_name;
  }
  return context.peer.empty() ? rpc::AddressToString(context.peer_address) : context.peer;
}

lock::LockRequest NlmService::ToRequest(const rpc::CallContext& context, const nlm4_lock& lock,
                                        bool exclusive) const {
  lock::LockRequest request;
  request.file = lock::FileKey(lock.fh);
  request.owner = lock::LockOwner{lock::HostId(HostKeyFor(context, lock.caller_name)), lock.svid,
                                  lock::OwnerHandle(lock.oh)};
  request.offset = lock.l_offset;
  request.length = lock.l_len;
  request.type = exclusive ? lock::LockType::kExclusive : lock::LockType::kShared;
  request.host_label = lock.caller_name;
  return request;
}

// --- Procedures -------------------------------------------------------------------------------

asio::awaitable<nlm4_testres> NlmService::Test(const rpc::CallContext& context,
                                               nlm4_testargs args) {
  lock::TestOutcome outcome = locks_.Test(ToRequest(context, args.alock, args.exclusive));
  SendGrants(std::move(outcome.grants));
  nlm4_testres res;
  res.cookie = std::move(args.cookie);
  res.stat = ToWire(outcome.status);
  if (outcome.status == LockStatus::kDenied && outcome.holder) res.holder = ToWire(*outcome.holder);
  co_return res;
}

asio::awaitable<nlm4_res> NlmService::Lock(const rpc::CallContext& context, nlm4_lockargs args,
                                           bool monitor) {
  std::string host = HostKeyFor(context, args.alock.caller_name);
  host_addresses_[host] = context.peer_address;
  client_versions_[host] = context.version;
  if (monitor && !monitored_.contains(host)) {
    bool ok = co_await EnsureMonitored(context, host, args);
    if (!ok) co_return nlm4_res{std::move(args.cookie), NLM4_DENIED_NOLOCKS};
  }
  lock::LockRequest request = ToRequest(context, args.alock, args.exclusive);
  request.block = args.block;
  request.reclaim = args.reclaim;
  request.nsm_state = args.state;
  lock::LockOutcome outcome = locks_.Lock(request);
  SendGrants(std::move(outcome.grants));
  if (outcome.status != LockStatus::kGranted) {
    spdlog::debug("nlm lock {} host={} caller={} svid={} file={} offset={} len={}",
                  lock::ToString(outcome.status), host, args.alock.caller_name, args.alock.svid,
                  args.alock.fh.size(), args.alock.l_offset, args.alock.l_len);
  }
  co_return nlm4_res{std::move(args.cookie), ToWire(outcome.status)};
}

asio::awaitable<bool> NlmService::EnsureMonitored(const rpc::CallContext& context,
                                                  std::string host, nlm4_lockargs args) {
  auto in_flight = monitoring_.find(host);
  if (in_flight != monitoring_.end()) {
    // Another first lock of this host is monitoring it: one durable write per host.
    std::shared_ptr<asio::steady_timer> done = in_flight->second;
    co_await done->async_wait(rpc::kUseTuple);
    co_return monitored_.contains(host);
  }
  auto done = std::make_shared<asio::steady_timer>(executor_,
                                                   asio::steady_timer::time_point::max());
  monitoring_.emplace(host, done);
  MonitorRequest request{host, args.alock.caller_name, context.peer_address, args.state};
  bool ok = false;
  try {
    ok = co_await monitor_.Monitor(std::move(request));
  } catch (const std::exception& e) {
    spdlog::error("nlm cannot monitor host={}: {}", host, e.what());
  }
  monitoring_.erase(host);
  if (ok) {
    monitored_.insert(host);
  } else {
    ++stats_.monitor_failures;
    spdlog::warn("nlm monitoring host={} caller={} failed; answering DENIED_NOLOCKS", host,
                 args.alock.caller_name);
  }
  done->cancel();
  co_return ok;
}

asio::awaitable<nlm4_res> NlmService::Cancel(const rpc::CallContext& context, nlm4_cancargs args) {
  lock::LockRequest request = ToRequest(context, args.alock, args.exclusive);
  request.block = args.block;
  lock::CancelOutcome outcome = locks_.Cancel(request);
  SendGrants(std::move(outcome.grants));
  // Cancelling what is not queued is not an error to the client: it was granted or gone.
  nlm4_stats stat = outcome.result == lock::CancelResult::kInvalidRange ? NLM4_FBIG : NLM4_GRANTED;
  co_return nlm4_res{std::move(args.cookie), stat};
}

asio::awaitable<nlm4_res> NlmService::Unlock(const rpc::CallContext& context,
                                             nlm4_unlockargs args) {
  lock::LockRequest request = ToRequest(context, args.alock, true);
  lock::UnlockOutcome outcome =
      locks_.Unlock(request.file, request.owner, request.offset, request.length);
  SendGrants(std::move(outcome.grants));
  co_return nlm4_res{std::move(args.cookie), ToWire(outcome.status)};
}

nlm4_res NlmService::Granted(const nlm4_testargs& args) {
  // nlockd is a server: it holds no client-side blocked requests to be granted.
  return nlm4_res{args.cookie, NLM4_DENIED};
}

asio::awaitable<nlm4_shareres> NlmService::Share(const rpc::CallContext& context,
                                                 nlm4_shareargs args) {
  std::string host = HostKeyFor(context, args.share.caller_name);
  host_addresses_[host] = context.peer_address;
  lock::ShareRequest request;
  request.file = lock::FileKey(args.share.fh);
  request.owner = lock::LockOwner{lock::HostId(host), 0, lock::OwnerHandle(args.share.oh)};
  request.access = ToAccess(args.share.access);
  request.deny = ToDeny(args.share.mode);
  request.reclaim = args.reclaim;
  request.host_label = args.share.caller_name;
  lock::ShareOutcome outcome = locks_.Share(request);
  SendGrants(std::move(outcome.grants));
  co_return nlm4_shareres{std::move(args.cookie), ToWire(outcome.status), 0};
}

nlm4_shareres NlmService::Unshare(const rpc::CallContext& context, const nlm4_shareargs& args) {
  lock::LockOwner owner{lock::HostId(HostKeyFor(context, args.share.caller_name)), 0,
                        lock::OwnerHandle(args.share.oh)};
  lock::UnshareOutcome outcome = locks_.Unshare(lock::FileKey(args.share.fh), owner);
  SendGrants(std::move(outcome.grants));
  return nlm4_shareres{args.cookie, NLM4_GRANTED, 0};
}

void NlmService::FreeAll(const rpc::CallContext& context, const nlm4_notify& args) {
  // The caller may free only itself: the host its address is bound to must carry the name
  // (PROTOCOL-NOTES.md §2 #12); a co-resident caller on loopback may free any host.
  std::vector<std::string> hosts;
  std::string peer = rpc::AddressToString(context.peer_address);
  bool local = rpc::IsLoopback(context.peer_address);
  locks_.hosts().ForEach([&](const lock::HostInfo& host) {
    bool named = SameName(host.id.value(), args.name) || SameName(host.label, args.name);
    if (!named) return;
    auto address = host_addresses_.find(host.id.value());
    bool bound = address != host_addresses_.end() &&
                 rpc::AddressToString(address->second) == peer;
    if (local || bound) hosts.push_back(host.id.value());
  });
  if (hosts.empty()) {
    ++stats_.spoof_rejections;
    spdlog::warn("nlm FREE_ALL name={} from peer={} matches no host bound to that address; "
                 "ignored",
                 args.name, peer);
    return;
  }
  for (const auto& host : hosts) ReleaseHost(host);
}

void NlmService::SmNotify(const rpc::CallContext& context, const nlm_sm_status& args) {
  // Only a co-resident statd may tell us a host rebooted: loopback and a reserved port, as
  // Linux lockd requires (PROTOCOL-NOTES.md §1.10).
  if (!rpc::IsLoopback(context.peer_address) || context.peer_port >= 1024) {
    ++stats_.spoof_rejections;
    spdlog::warn("nlm SM_NOTIFY (procedure 16) for {} from {}:{} refused: not loopback with a "
                 "reserved port",
                 args.mon_name, rpc::AddressToString(context.peer_address), context.peer_port);
    return;
  }
  HostRebooted(args.mon_name);
}

size_t NlmService::HostRebooted(const std::string& name) {
  std::vector<std::string> hosts;
  locks_.hosts().ForEach([&](const lock::HostInfo& host) {
    if (SameName(host.id.value(), name) || SameName(host.label, name)) {
      hosts.push_back(host.id.value());
    }
  });
  size_t released = 0;
  for (const auto& host : hosts) released += ReleaseHost(host);
  return released;
}

size_t NlmService::ReleaseHost(const std::string& host) {
  lock::HostReleaseOutcome outcome = locks_.ReleaseHost(lock::HostId(host));
  ++stats_.hosts_released;
  spdlog::info("nlm released host={} locks={} shares={} waiters={} grants={}", host,
               outcome.locks, outcome.shares, outcome.waiters, outcome.grants.size());
  size_t locks = outcome.locks;
  SendGrants(std::move(outcome.grants));
  return locks;
}

void NlmService::GrantedRes(const nlm4_res& res) {
  auto id = WaiterIdFromCookie(res.cookie);
  if (!id) return;
  auto it = awaiting_ack_.find(*id);
  if (it == awaiting_ack_.end()) return;  // Late or unknown: the grant was already settled.
  it->second->stat = res.stat;
  it->second->timer.cancel();
}

// --- GRANTED callbacks ------------------------------------------------------------------------

void NlmService::SendGrants(lock::Grants grants) {
  for (auto& grant : grants) {
    auto pass = gate_.TryEnter();
    if (!pass) return;  // Shutting down: the clients re-poll after restart.
    asio::co_spawn(executor_, DeliverGrant(std::move(grant), std::move(*pass)), asio::detached);
  }
}

asio::awaitable<void> NlmService::DeliverGrant(lock::WaiterGrant grant,
                                               rpc::TaskGate::Pass /*pass*/) {
  const std::string& host = grant.owner.host.value();
  const lock::HostInfo* info = locks_.hosts().Find(grant.owner.host);
  auto address = host_addresses_.find(host);
  if (address == host_addresses_.end()) {
    auto revoked = locks_.RevokeGrant(grant.id);
    SendGrants(std::move(revoked.grants));
    co_return;
  }
  // Call back with the version the client last locked with.
  uint32_t version = NLM4_VERS;
  auto client_version = client_versions_.find(host);
  if (client_version != client_versions_.end()) version = client_version->second;

  nlm4_testargs args;
  args.cookie = CookieFor(grant.id);
  args.exclusive = grant.type == lock::LockType::kExclusive;
  args.alock.caller_name = info != nullptr && !info->label.empty() ? info->label : host;
  args.alock.fh = grant.file.value();
  args.alock.oh = grant.owner.oh.value();
  args.alock.svid = grant.owner.svid;
  args.alock.l_offset = grant.range.offset();
  args.alock.l_len = grant.range.length();
  std::vector<uint8_t> body;
  xdr::Encoder enc(body);
  Encode(enc, version, args);
  ClientAddress client{address->second, std::nullopt, rpc::Transport::kUdp};

  for (int attempt = 1; attempt <= options_.callback_attempts && !gate_.closed(); ++attempt) {
    std::optional<nlm4_stats> answer;
    ++stats_.callbacks_sent;
    if (options_.granted_msg) {
      auto ack = std::make_shared<GrantAck>(executor_);
      awaiting_ack_[grant.id.value()] = ack;
      rpc::CallResult sent =
          co_await caller_.Call(client, version, NLM_GRANTED_MSG, body, options_.callback_deadline);
      if (sent.status == rpc::CallStatus::kOk && !ack->stat) {
        ack->timer.expires_after(options_.callback_deadline);
        co_await ack->timer.async_wait(rpc::kUseTuple);
      }
      awaiting_ack_.erase(grant.id.value());
      answer = ack->stat;
    } else {
      rpc::CallResult result =
          co_await caller_.Call(client, version, NLM_GRANTED, body, options_.callback_deadline);
      if (result.status == rpc::CallStatus::kOk) {
        nlm4_res res;
        xdr::Decoder dec(result.body);
        if (Decode(dec, version, res)) answer = res.stat;
      }
    }
    if (answer == NLM4_GRANTED) {
      locks_.AcknowledgeGrant(grant.id);
      ++stats_.callbacks_acknowledged;
      co_return;
    }
    if (answer && answer != NLM4_DENIED_GRACE_PERIOD) break;  // The client refused the lock.
    // No answer, or the client is in its own grace period: try again later.
    asio::steady_timer delay(executor_, options_.callback_retry_delay);
    co_await delay.async_wait(rpc::kUseTuple);
  }
  if (gate_.closed()) co_return;
  ++stats_.callbacks_failed;
  spdlog::info("nlm GRANTED callback to host={} not acknowledged; revoking the grant", host);
  auto revoked = locks_.RevokeGrant(grant.id);
  SendGrants(std::move(revoked.grants));
}

// --- _MSG replies -----------------------------------------------------------------------------

void NlmService::SpawnRes(const rpc::CallContext& context, uint32_t procedure,
                          std::vector<uint8_t> body) {
  auto pass = gate_.TryEnter();
  if (!pass) return;
  ClientAddress client{context.peer_address, std::nullopt, context.transport};
  if (context.transport == rpc::Transport::kUdp) client.port = context.peer_port;
  asio::co_spawn(executor_,
                 SendRes(client, context.version, procedure, std::move(body), std::move(*pass)),
                 asio::detached);
}

asio::awaitable<void> NlmService::SendRes(ClientAddress client, uint32_t version,
                                          uint32_t procedure, std::vector<uint8_t> body,
                                          rpc::TaskGate::Pass /*pass*/) {
  rpc::CallResult result =
      co_await caller_.Call(client, version, procedure, std::move(body), options_.res_deadline);
  if (result.status == rpc::CallStatus::kOk) {
    ++stats_.res_sent;
  } else {
    ++stats_.res_failed;
    spdlog::info("nlm _RES procedure {} to {} failed: {} {}", procedure,
                 rpc::AddressToString(client.address), rpc::ToString(result.status),
                 result.detail);
  }
}

asio::awaitable<void> NlmService::Shutdown() {
  gate_.Close();
  for (auto& [id, ack] : awaiting_ack_) ack->timer.cancel();
  co_await gate_.WaitEmpty(std::chrono::seconds(5));
}

}  // namespace nlockd::nlm
