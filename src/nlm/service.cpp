// SPDX-License-Identifier: Apache-2.0
#include "nlm/service.hpp"

#include <algorithm>
#include <random>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <spdlog/spdlog.h>

#include "base/host_name.hpp"
#include "base/logging.hpp"
#include "rpc/address.hpp"
#include "rpc/use_tuple.hpp"
#include "rpc/wait_bounds.hpp"

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

// A LOCK's status: a deadlock is the one denial with a code of its own (v4 DEADLCK; versions 1
// and 3 get DENIED from StatusForVersion).
nlm4_stats ToWire(const lock::LockOutcome& outcome) {
  return outcome.deadlock ? NLM4_DEADLCK : ToWire(outcome.status);
}

nlm4_holder ToWire(const lock::Holder& holder) {
  return nlm4_holder{holder.type == lock::LockType::kExclusive, holder.owner.svid,
                     holder.owner.oh.value(), holder.range.offset(), holder.range.length()};
}

lock::ShareAccess ToAccess(fsh_access access) { return static_cast<lock::ShareAccess>(access); }
lock::ShareDeny ToDeny(fsh_mode mode) { return static_cast<lock::ShareDeny>(mode); }

std::optional<lock::ByteRange> RangeOf(const lock::LockRequest& request) {
  return lock::ByteRange::FromOffsetLength(request.offset, request.length);
}

GrantCookies::Key RandomKey() {
  std::random_device random;
  auto word = [&random] { return (static_cast<uint64_t>(random()) << 32) | random(); };
  return GrantCookies::Key{word(), word()};
}

// The caller's address as NLM keys and binds hosts ("192.0.2.1"); an in-process caller's
// context carries its host id here instead.
std::string PeerOf(const rpc::CallContext& context) {
  return context.peer.empty() ? rpc::AddressToString(context.peer_address) : context.peer;
}

}  // namespace

NlmService::NlmService(asio::any_io_executor executor, lock::LockManager& locks,
                       HostMonitor& monitor, ClientCaller& caller, NlmOptions options)
    : executor_(executor),
      locks_(locks),
      monitor_(monitor),
      caller_(caller),
      options_(options),
      gate_(executor, "nlm"),
      turns_(executor),
      cookies_(options.cookie_key ? *options.cookie_key : RandomKey()) {}

NlmService::~NlmService() = default;

std::string NlmService::HostKeyFor(const rpc::CallContext& context,
                                   const std::string& caller_name) const {
  std::string peer = PeerOf(context);
  if (options_.host_key != NlmOptions::HostKey::kCallerName || caller_name.empty() ||
      SameHostName(caller_name, peer)) {
    return peer;
  }
  // The name and the address together, as Linux lockd keys its hosts even when it monitors them
  // by name: another address sending this caller_name is another host, so it can neither
  // unlock, cancel or unshare what this one holds nor be granted a lock as this one. Addresses
  // hold no '@', so the key names one (name, address) pair. The name is folded as SameHostName
  // matches names: "Client" and "client" from one address are one host, not two that conflict.
  return FoldHostName(caller_name) + "@" + peer;
}

std::string NlmService::MonitorNameFor(const rpc::CallContext& context,
                                       const std::string& caller_name) const {
  if (options_.host_key == NlmOptions::HostKey::kCallerName && !caller_name.empty()) {
    return caller_name;
  }
  return PeerOf(context);
}

lock::LockOwner NlmService::OwnerOf(std::string host, int32_t svid, std::string oh) {
  return lock::LockOwner{lock::HostId(std::move(host)), svid, lock::OwnerHandle(std::move(oh))};
}

lock::LockOwner NlmService::OwnerOf(const rpc::CallContext& context, const std::string& caller_name,
                                    int32_t svid, std::string oh) const {
  return OwnerOf(HostKeyFor(context, caller_name), svid, std::move(oh));
}

lock::LockRequest NlmService::ToRequest(const rpc::CallContext& context, const nlm4_lock& lock,
                                        bool exclusive) const {
  lock::LockRequest request;
  request.file = lock::FileKey(lock.fh);
  request.owner = OwnerOf(context, lock.caller_name, lock.svid, lock.oh);
  request.offset = lock.l_offset;
  request.length = lock.l_len;
  request.type = exclusive ? lock::LockType::kExclusive : lock::LockType::kShared;
  request.host_label = lock.caller_name;
  return request;
}

lock::LockRequest NlmService::TakeLockRequest(const rpc::CallContext& context, std::string host,
                                              nlm4_lockargs& args) {
  lock::LockRequest request;
  request.file = lock::FileKey(std::move(args.alock.fh));
  request.owner = OwnerOf(std::move(host), args.alock.svid, std::move(args.alock.oh));
  request.offset = args.alock.l_offset;
  request.length = args.alock.l_len;
  request.type = args.exclusive ? lock::LockType::kExclusive : lock::LockType::kShared;
  request.block = args.block;
  request.reclaim = args.reclaim;
  // 0 is "not said" (Linux sends it in reclaims): it must not replace the state we know.
  if (args.state != 0) request.nsm_state = args.state;
  request.host_label = std::move(args.alock.caller_name);
  request.host_address = PeerOf(context);
  return request;
}

lock::LockOutcome NlmService::ApplyLock(const rpc::CallContext& context,
                                        const lock::LockRequest& request) {
  lock::LockOutcome outcome = locks_.Lock(request);
  if (outcome.status == LockStatus::kBlocked && outcome.waiter) {
    RememberWaiter(*outcome.waiter, context, request);
  }
  // The owner's own LOCK settles a pending grant of the same lock; a re-sent blocked LOCK
  // refused as a deadlock takes its waiter with it.
  ForgetWaiters(outcome.waiters_removed);
  if (outcome.deadlock) ++stats_.deadlocks_refused;
  if (outcome.status != LockStatus::kGranted) {
    spdlog::debug("nlm lock {} host={} caller={} svid={} fh_bytes={} offset={} len={}",
                  outcome.deadlock ? "deadlock" : lock::ToString(outcome.status),
                  LogValue(request.owner.host.value()), LogValue(request.host_label),
                  request.owner.svid, request.file.value().size(), request.offset, request.length);
  }
  return outcome;
}

// --- The changes of an owner's state, and the one routine that runs them ----------------------

namespace {

// What the changes of an owner's byte-range locks share (NlmService::ChangeOwnerState): the
// request (file, owner, range), the reply's cookie, and what the owner held over the range
// before the change, to undo it.
struct RangeChange {
  using Result = nlm4_res;
  lock::LockRequest request;
  std::string cookie;
  std::optional<lock::PriorLocks> prior;

  const lock::FileKey& file() const { return request.file; }
  const lock::LockOwner& owner() const { return request.owner; }
  void Snapshot(lock::LockManager& locks) {
    prior = locks.SnapshotLocks(request.file, request.owner, request.offset, request.length);
  }
  JournalEntry Entry() const {
    return JournalEntry::Locks(request.file, request.owner, RangeOf(request));
  }
  JournalEntryRef EntryRef() const {
    return {JournalEntry::Kind::kLocks, request.file, request.owner, RangeOf(request)};
  }
  Result Answer(nlm4_stats stat) { return nlm4_res{std::move(cookie), stat}; }
};

// The same for an owner's share reservation on a file.
struct ReservationChange {
  using Result = nlm4_shareres;
  lock::ShareRequest request;
  std::string cookie;
  std::optional<lock::PriorShare> prior;

  const lock::FileKey& file() const { return request.file; }
  const lock::LockOwner& owner() const { return request.owner; }
  void Snapshot(lock::LockManager& locks) {
    prior = locks.SnapshotShare(request.file, request.owner);
  }
  JournalEntry Entry() const { return JournalEntry::Share(request.file, request.owner); }
  Result Answer(nlm4_stats stat) { return nlm4_shareres{std::move(cookie), stat, 0}; }
};

}  // namespace

// LOCK and NM_LOCK. A lock that cannot be written is not granted (fail closed, as Linux lockd
// and NFS-Ganesha): DENIED_NOLOCKS, unless the call was a downgrade whose released part another
// owner holds now; then the lock as granted is the state everyone saw, and it stands.
struct NlmService::LockChange : RangeChange {
  const rpc::CallContext* context = nullptr;

  Applied Apply(NlmService& nlm) {
    lock::LockOutcome outcome = nlm.ApplyLock(*context, request);
    const bool granted = outcome.status == LockStatus::kGranted;
    return Applied{ToWire(outcome), granted, granted, std::move(outcome.grants)};
  }
  nlm4_stats Undo(NlmService& nlm, nlm4_stats stat) {
    return nlm.UndoUnwritten(*prior, Entry(), "lock", stat, NLM4_DENIED_NOLOCKS);
  }
};

// UNLOCK. A release that cannot be written is undone: answering GRANTED would let a restart
// bring the locks back with nobody to reclaim them. The answer is the one clients send their
// UNLOCK again for (Linux retries an UNLOCK refused with DENIED_GRACE_PERIOD, having already
// dropped the lock locally; DENIED_NOLOCKS would end its attempts and leave the lock held here
// for good). The waiters it granted lose their grants first, so that the owner's locks can come
// back.
struct NlmService::UnlockChange : RangeChange {
  Applied Apply(NlmService& nlm) {
    lock::UnlockOutcome outcome =
        nlm.locks_.Unlock(request.file, request.owner, request.offset, request.length);
    nlm.ForgetWaiters(outcome.waiters_removed);
    const bool unlocked = outcome.status == LockStatus::kGranted;
    return Applied{ToWire(outcome.status), unlocked, unlocked, std::move(outcome.grants)};
  }
  nlm4_stats Undo(NlmService& nlm, nlm4_stats stat) {
    return nlm.UndoUnwritten(*prior, Entry(), "unlock", stat, NLM4_DENIED_GRACE_PERIOD);
  }
};

// CANCEL. Journaled only when it undid an unacknowledged grant; never undone (nothing to
// snapshot): undoing it would give the client a lock it no longer knows about.
struct NlmService::CancelChange : RangeChange {
  void Snapshot(lock::LockManager& /*locks*/) {}
  Applied Apply(NlmService& nlm) {
    lock::CancelOutcome outcome = nlm.locks_.Cancel(request);
    nlm.ForgetWaiters(outcome.waiters_removed);
    // Cancelling what is not queued is not an error to the client: it was granted or gone.
    const nlm4_stats stat =
        outcome.result == lock::CancelResult::kInvalidRange ? NLM4_FBIG : NLM4_GRANTED;
    return Applied{stat, outcome.result == lock::CancelResult::kGrantUndone, false,
                   std::move(outcome.grants)};
  }
  static nlm4_stats Undo(NlmService& /*nlm*/, nlm4_stats stat) { return stat; }
};

// SHARE. Fail closed, as for LOCK: the owner's reservation goes back to what it was (none, or
// the one this call replaced), unless another owner already uses what the call gave up.
struct NlmService::ShareChange : ReservationChange {
  Applied Apply(NlmService& nlm) {
    lock::ShareOutcome outcome = nlm.locks_.Share(request);
    const bool granted = outcome.status == LockStatus::kGranted;
    return Applied{ToWire(outcome.status), granted, granted, std::move(outcome.grants)};
  }
  nlm4_stats Undo(NlmService& nlm, nlm4_stats stat) {
    return nlm.UndoUnwritten(*prior, Entry(), "share", stat, NLM4_DENIED_NOLOCKS);
  }
};

// UNSHARE: always journaled (the persisted rows follow the table even when nothing was held);
// as for UNLOCK, a removal that cannot be written is undone and the client told to try again.
struct NlmService::UnshareChange : ReservationChange {
  Applied Apply(NlmService& nlm) {
    lock::UnshareOutcome outcome = nlm.locks_.Unshare(request.file, request.owner);
    return Applied{NLM4_GRANTED, true, outcome.removed, std::move(outcome.grants)};
  }
  nlm4_stats Undo(NlmService& nlm, nlm4_stats stat) {
    return nlm.UndoUnwritten(*prior, Entry(), "unshare", stat, NLM4_DENIED_GRACE_PERIOD);
  }
};

template <typename Change>
asio::awaitable<typename Change::Result> NlmService::ChangeOwnerState(Change change) {
  std::optional<OwnerTurns::Turn> turn;
  if (journal_ != nullptr) {
    const size_t slot = OwnerTurns::SlotOf(change.file(), change.owner());
    turn = turns_.TryTake(slot);
    if (!turn) turn = co_await turns_.Take(slot);
    change.Snapshot(locks_);
  }
  Applied applied = change.Apply(*this);
  // The entry is made here only when it is written, and again for an undo (rare), rather than
  // kept for every call.
  std::optional<JournalEntry> entry;
  if (applied.write && journal_ != nullptr) entry = change.Entry();
  const JournalBarrier::Ticket ticket = JoinJournal(std::move(entry), applied.grants);
  const bool persisted = co_await AwaitJournal(ticket);
  co_return FinishChange(change, applied, persisted);
}

template <typename Change>
typename Change::Result NlmService::FinishChange(Change& change, Applied& applied, bool persisted) {
  FinishGrants(std::move(applied.grants), persisted);
  if (!persisted && applied.undo) applied.stat = change.Undo(*this, applied.stat);
  return change.Answer(applied.stat);
}

template <typename Change>
typename Change::Result NlmService::ChangeOwnerStateNow(Change& change) {
  if (journal_ != nullptr) change.Snapshot(locks_);
  Applied applied = change.Apply(*this);
  bool persisted = true;
  if (journal_ != nullptr) {
    // The entries refer to the request and the grants, which outlive the write: no copies.
    if (applied.grants.empty()) {
      if (applied.write) {
        const JournalEntryRef own = change.EntryRef();
        persisted = RecordNow({&own, 1});
      }
    } else {
      std::vector<JournalEntryRef> entries;
      entries.reserve(applied.grants.size() + 1);
      if (applied.write) entries.push_back(change.EntryRef());
      for (const lock::WaiterGrant& grant : applied.grants) {
        entries.emplace_back(JournalEntry::Kind::kLocks, grant.file, grant.owner, grant.range);
      }
      persisted = RecordNow(entries);
    }
  }
  return FinishChange(change, applied, persisted);
}

// --- Procedures -------------------------------------------------------------------------------

std::optional<nlm4_testres> NlmService::TryTest(const rpc::CallContext& context,
                                                nlm4_testargs& args) {
  lock::TestOutcome outcome = locks_.Test(ToRequest(context, args.alock, args.exclusive));
  SendGrants(std::move(outcome.grants));
  nlm4_testres res;
  res.cookie = std::move(args.cookie);
  res.stat = ToWire(outcome.status);
  if (outcome.status == LockStatus::kDenied && outcome.holder) res.holder = ToWire(*outcome.holder);
  return res;
}

asio::awaitable<nlm4_testres> NlmService::Test(const rpc::CallContext& context,
                                               nlm4_testargs args) {
  co_return *TryTest(context, args);
}

std::optional<nlm4_res> NlmService::TryLock(const rpc::CallContext& context, nlm4_lockargs& args,
                                            bool monitor) {
  std::string host = HostKeyFor(context, args.alock.caller_name);
  if (monitor && !monitored_.contains(host)) return std::nullopt;
  std::optional<OwnerTurns::Turn> turn;
  if (journal_ != nullptr) {
    turn = TakeTurnNow(args.alock.fh, host, args.alock.svid, args.alock.oh);
    if (!turn) return std::nullopt;
  }
  LockChange change{{TakeLockRequest(context, std::move(host), args), std::move(args.cookie), {}},
                    &context};
  return ChangeOwnerStateNow(change);
}

asio::awaitable<nlm4_res> NlmService::Lock(const rpc::CallContext& context, nlm4_lockargs args,
                                           bool monitor) {
  const int32_t state = args.state;
  std::string host = HostKeyFor(context, args.alock.caller_name);
  const bool monitored = !monitor || monitored_.contains(host);
  LockChange change{{TakeLockRequest(context, std::move(host), args), std::move(args.cookie), {}},
                    &context};
  if (!monitored) return MonitorThenLock(std::move(change), state);
  return ChangeOwnerState(std::move(change));
}

asio::awaitable<nlm4_res> NlmService::MonitorThenLock(LockChange change, int32_t state) {
  // The awaited value is named before it is tested: with the co_await in the if's condition,
  // GCC 12's build trapped (SIGILL) when the coroutine resumed.
  const bool monitored = co_await EnsureMonitored(
      *change.context, change.request.owner.host.value(), change.request.host_label, state);
  if (!monitored) co_return nlm4_res{std::move(change.cookie), NLM4_DENIED_NOLOCKS};
  co_return co_await ChangeOwnerState(std::move(change));
}

asio::awaitable<bool> NlmService::EnsureMonitored(const rpc::CallContext& context, std::string host,
                                                  std::string caller_name, int32_t state) {
  auto in_flight = monitoring_.find(host);
  if (in_flight != monitoring_.end()) {
    // Another first lock of this host is monitoring it: one durable write per host.
    std::shared_ptr<rpc::Event> done = in_flight->second;
    co_await done->Wait();
    co_return monitored_.contains(host);
  }
  auto done = std::make_shared<rpc::Event>(executor_);
  monitoring_.emplace(host, done);
  MonitorRequest request{MonitorNameFor(context, caller_name), caller_name, context.peer_address,
                         state};
  bool ok = false;
  try {
    ok = co_await monitor_.Monitor(std::move(request));
  } catch (const std::exception& e) {
    spdlog::error("nlm cannot monitor host={}: {}", LogValue(host), e.what());
  }
  monitoring_.erase(host);
  if (ok) {
    monitored_.insert(host);
    // Bounded by the lock manager's host limit (twice it, so that pruning costs O(1) per host
    // amortized): a host it no longer knows (evicted or forgotten while idle) is monitored again
    // if it comes back, which costs one SM_MON.
    if (monitored_.size() > 2 * locks_.hosts().max_hosts()) {
      std::erase_if(monitored_, [&](const std::string& name) {
        return name != host && locks_.hosts().Find(lock::HostId(name)) == nullptr;
      });
    }
  } else {
    ++stats_.monitor_failures;
    callback_log_.Log(spdlog::level::warn,
                      "nlm monitoring host={} caller={} failed; answering DENIED_NOLOCKS",
                      LogValue(host), LogValue(caller_name));
  }
  done->Set();
  co_return ok;
}

NlmService::UnlockChange NlmService::TakeUnlock(const rpc::CallContext& context,
                                                nlm4_unlockargs& args) const {
  UnlockChange change;
  change.request.file = lock::FileKey(std::move(args.alock.fh));
  change.request.owner =
      OwnerOf(context, args.alock.caller_name, args.alock.svid, std::move(args.alock.oh));
  change.request.offset = args.alock.l_offset;
  change.request.length = args.alock.l_len;
  change.cookie = std::move(args.cookie);
  return change;
}

asio::awaitable<nlm4_res> NlmService::Cancel(const rpc::CallContext& context, nlm4_cancargs args) {
  CancelChange change{{ToRequest(context, args.alock, args.exclusive), std::move(args.cookie), {}}};
  change.request.block = args.block;
  return ChangeOwnerState(std::move(change));
}

std::optional<nlm4_res> NlmService::TryUnlock(const rpc::CallContext& context,
                                              nlm4_unlockargs& args) {
  std::optional<OwnerTurns::Turn> turn;
  if (journal_ != nullptr) {
    turn = TakeTurnNow(args.alock.fh, HostKeyFor(context, args.alock.caller_name), args.alock.svid,
                       args.alock.oh);
    if (!turn) return std::nullopt;
  }
  UnlockChange change = TakeUnlock(context, args);
  return ChangeOwnerStateNow(change);
}

asio::awaitable<nlm4_res> NlmService::Unlock(const rpc::CallContext& context,
                                             nlm4_unlockargs args) {
  return ChangeOwnerState(TakeUnlock(context, args));
}

nlm4_res NlmService::Granted(const nlm4_testargs& args) {
  // nlockd is a server: it holds no client-side blocked requests to be granted.
  return nlm4_res{args.cookie, NLM4_DENIED};
}

asio::awaitable<nlm4_shareres> NlmService::Share(const rpc::CallContext& context,
                                                 nlm4_shareargs args) {
  ShareChange change;
  change.request.file = lock::FileKey(std::move(args.share.fh));
  change.request.owner = OwnerOf(context, args.share.caller_name, 0, std::move(args.share.oh));
  change.request.access = ToAccess(args.share.access);
  change.request.deny = ToDeny(args.share.mode);
  change.request.reclaim = args.reclaim;
  change.request.host_label = std::move(args.share.caller_name);
  change.request.host_address = PeerOf(context);
  change.cookie = std::move(args.cookie);
  return ChangeOwnerState(std::move(change));
}

asio::awaitable<nlm4_shareres> NlmService::Unshare(const rpc::CallContext& context,
                                                   nlm4_shareargs args) {
  UnshareChange change;
  change.request.file = lock::FileKey(std::move(args.share.fh));
  change.request.owner = OwnerOf(context, args.share.caller_name, 0, std::move(args.share.oh));
  change.cookie = std::move(args.cookie);
  return ChangeOwnerState(std::move(change));
}

void NlmService::GrantedRes(const rpc::CallContext& context, const nlm4_res& res) {
  auto by_cookie = waiter_by_cookie_.find(res.cookie);
  if (by_cookie == waiter_by_cookie_.end()) return;  // Late or unknown: already settled.
  WaiterRecord& record = *waiters_.at(by_cookie->second);
  // Only the host the callback went to may answer it.
  if (context.peer_address != record.callback.address) {
    ++stats_.spoof_rejections;
    refused_log_.Log(spdlog::level::warn,
                     "nlm GRANTED_RES for host={} from {} refused: the callback went to {}",
                     LogValue(record.host), rpc::AddressToString(context.peer_address),
                     rpc::AddressToString(record.callback.address));
    return;
  }
  if (!record.ack) return;
  if (res.stat == NLM4_GRANTED) {
    // Accepted even between attempts: the client holds the lock once it said so.
    AcceptGrant(by_cookie->second);
  } else if (!record.ack->awaiting_res) {
    return;
  }
  record.ack->stat = res.stat;
  record.ack->woken.Set();
}

// --- _MSG replies -----------------------------------------------------------------------------

void NlmService::SpawnRes(const rpc::CallContext& context, uint32_t procedure,
                          std::vector<uint8_t> body) {
  ClientAddress client{context.peer_address, std::nullopt, context.transport,
                       context.local_address};
  if (context.transport == rpc::Transport::kUdp) client.port = context.peer_port;
  gate_.Spawn("_RES call", [&] {
    return SendRes(std::move(client), context.version, procedure, std::move(body));
  });
}

asio::awaitable<void> NlmService::SendRes(ClientAddress client, uint32_t version,
                                          uint32_t procedure, std::vector<uint8_t> body) {
  rpc::CallResult result =
      co_await caller_.Call(client, version, procedure, std::move(body), options_.res_deadline);
  // `procedure` is one of the five _RES procedures (the ServeMsg callers).
  NlmStats::ResOutcomes& outcomes = stats_.res_by_procedure[procedure - NLM_TEST_RES];
  if (result.status == rpc::CallStatus::kOk) {
    ++stats_.res_sent;
    ++outcomes.delivered;
  } else {
    ++stats_.res_failed;
    ++(result.status == rpc::CallStatus::kTimedOut ? outcomes.timed_out : outcomes.failed);
    callback_log_.Log(spdlog::level::info, "nlm _RES procedure {} to {} failed: {} {}", procedure,
                      rpc::AddressToString(client.address), rpc::ToString(result.status),
                      result.detail);
  }
}

asio::awaitable<void> NlmService::Shutdown() {
  // Cancelled, a callback or _RES call ends the call or wait it is in. A background journal
  // write cannot be cancelled: the bound covers it on a healthy store, and a store that hangs
  // is logged after it.
  const auto longest = std::max(options_.callback_deadline, options_.res_deadline);
  co_await gate_.CancelAndWait(longest + rpc::kShutdownMargin);
}

}  // namespace nlockd::nlm
