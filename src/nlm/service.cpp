// SPDX-License-Identifier: Apache-2.0
#include "nlm/service.hpp"

#include <algorithm>
#include <random>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <spdlog/spdlog.h>

#include "base/logging.hpp"
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
      gate_(executor),
      turns_(executor),
      cookies_(options.cookie_key ? *options.cookie_key : RandomKey()) {}

NlmService::~NlmService() = default;

std::string NlmService::HostKeyFor(const rpc::CallContext& context,
                                   const std::string& caller_name) const {
  std::string peer = PeerOf(context);
  if (options_.host_key != NlmOptions::HostKey::kCallerName || caller_name.empty() ||
      caller_name == peer) {
    return peer;
  }
  // The name and the address together, as Linux lockd keys its hosts even when it monitors them
  // by name: another address sending this caller_name is another host, so it can neither
  // unlock, cancel or unshare what this one holds nor be granted a lock as this one. Addresses
  // hold no '@', so the key names one (name, address) pair.
  return caller_name + "@" + peer;
}

std::string NlmService::MonitorNameFor(const rpc::CallContext& context,
                                       const std::string& caller_name) const {
  if (options_.host_key == NlmOptions::HostKey::kCallerName && !caller_name.empty()) {
    return caller_name;
  }
  return PeerOf(context);
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

lock::LockRequest NlmService::TakeLockRequest(const rpc::CallContext& context, std::string host,
                                              nlm4_lockargs& args) {
  lock::LockRequest request;
  request.file = lock::FileKey(std::move(args.alock.fh));
  request.owner = lock::LockOwner{lock::HostId(std::move(host)), args.alock.svid,
                                  lock::OwnerHandle(std::move(args.alock.oh))};
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
  if (journal_ != nullptr) return std::nullopt;
  std::string host = HostKeyFor(context, args.alock.caller_name);
  if (monitor && !monitored_.contains(host)) return std::nullopt;
  lock::LockRequest request = TakeLockRequest(context, std::move(host), args);
  lock::LockOutcome outcome = ApplyLock(context, request);
  FinishGrants(std::move(outcome.grants), true);
  return nlm4_res{std::move(args.cookie), ToWire(outcome)};
}

asio::awaitable<nlm4_res> NlmService::Lock(const rpc::CallContext& context, nlm4_lockargs args,
                                           bool monitor) {
  std::string host = HostKeyFor(context, args.alock.caller_name);
  if (monitor && !monitored_.contains(host)) {
    bool ok = co_await EnsureMonitored(context, host, args);
    if (!ok) co_return nlm4_res{std::move(args.cookie), NLM4_DENIED_NOLOCKS};
  }
  lock::LockRequest request = TakeLockRequest(context, std::move(host), args);
  std::optional<OwnerTurns::Turn> turn;
  if (journal_ != nullptr) {
    const size_t slot = OwnerTurns::SlotOf(request.file, request.owner);
    turn = turns_.TryTake(slot);
    if (!turn) turn = co_await turns_.Take(slot);
  }
  // What the owner held over the range, to undo exactly this call if it cannot be written.
  std::optional<lock::PriorLocks> prior;
  if (journal_ != nullptr) {
    prior = locks_.SnapshotLocks(request.file, request.owner, request.offset, request.length);
  }
  lock::LockOutcome outcome = ApplyLock(context, request);
  nlm4_stats stat = ToWire(outcome);
  const bool granted = outcome.status == LockStatus::kGranted;
  // The entry is made again for an undo (rare) rather than copied here for every call.
  const auto own = [&request] {
    return JournalEntry::Locks(request.file, request.owner, RangeOf(request));
  };
  std::optional<JournalEntry> entry;
  if (granted && journal_ != nullptr) entry = own();
  const JournalBarrier::Ticket ticket = JoinJournal(std::move(entry), outcome.grants);
  const bool persisted = co_await AwaitJournal(ticket);
  FinishGrants(std::move(outcome.grants), persisted);
  if (!persisted && granted && prior) {
    // Fail closed (Linux lockd, NFS-Ganesha): a lock the store does not know is not granted.
    // Unless the call was a downgrade whose released part another owner holds now: then the
    // lock as granted is the state everyone saw, and it stands.
    const bool undone = UndoUnwritten(*prior, own());
    if (undone) stat = NLM4_DENIED_NOLOCKS;
    spdlog::warn("nlm lock host={} caller={} not persisted; answering {}",
                 LogValue(request.owner.host.value()), LogValue(request.host_label),
                 undone ? "DENIED_NOLOCKS" : "GRANTED (another owner holds what it released)");
  }
  co_return nlm4_res{std::move(args.cookie), stat};
}

asio::awaitable<bool> NlmService::EnsureMonitored(const rpc::CallContext& context, std::string host,
                                                  nlm4_lockargs args) {
  auto in_flight = monitoring_.find(host);
  if (in_flight != monitoring_.end()) {
    // Another first lock of this host is monitoring it: one durable write per host.
    std::shared_ptr<asio::steady_timer> done = in_flight->second;
    co_await done->async_wait(rpc::kUseTuple);
    co_return monitored_.contains(host);
  }
  auto done =
      std::make_shared<asio::steady_timer>(executor_, asio::steady_timer::time_point::max());
  monitoring_.emplace(host, done);
  MonitorRequest request{MonitorNameFor(context, args.alock.caller_name), args.alock.caller_name,
                         context.peer_address, args.state};
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
                      LogValue(host), LogValue(args.alock.caller_name));
  }
  done->cancel();
  co_return ok;
}

asio::awaitable<nlm4_res> NlmService::Cancel(const rpc::CallContext& context, nlm4_cancargs args) {
  lock::LockRequest request = ToRequest(context, args.alock, args.exclusive);
  request.block = args.block;
  const std::optional<OwnerTurns::Turn> turn = co_await OwnerTurn(request.file, request.owner);
  lock::CancelOutcome outcome = locks_.Cancel(request);
  ForgetWaiters(outcome.waiters_removed);
  std::vector<JournalEntry> own;
  if (outcome.result == lock::CancelResult::kGrantUndone) {
    own.push_back(JournalEntry::Locks(request.file, request.owner, RangeOf(request)));
  }
  co_await JournalCall(std::move(own), std::move(outcome.grants));
  // Cancelling what is not queued is not an error to the client: it was granted or gone.
  nlm4_stats stat = outcome.result == lock::CancelResult::kInvalidRange ? NLM4_FBIG : NLM4_GRANTED;
  co_return nlm4_res{std::move(args.cookie), stat};
}

NlmService::Unlocked NlmService::TakeUnlock(const rpc::CallContext& context,
                                            nlm4_unlockargs& args) const {
  return Unlocked{lock::FileKey(std::move(args.alock.fh)),
                  lock::LockOwner{lock::HostId(HostKeyFor(context, args.alock.caller_name)),
                                  args.alock.svid, lock::OwnerHandle(std::move(args.alock.oh))},
                  {}};
}

void NlmService::ApplyUnlock(Unlocked& unlocked, const nlm4_unlockargs& args) {
  unlocked.outcome =
      locks_.Unlock(unlocked.file, unlocked.owner, args.alock.l_offset, args.alock.l_len);
  ForgetWaiters(unlocked.outcome.waiters_removed);
}

std::optional<nlm4_res> NlmService::TryUnlock(const rpc::CallContext& context,
                                              nlm4_unlockargs& args) {
  if (journal_ != nullptr) return std::nullopt;
  Unlocked unlocked = TakeUnlock(context, args);
  ApplyUnlock(unlocked, args);
  FinishGrants(std::move(unlocked.outcome.grants), true);
  return nlm4_res{std::move(args.cookie), ToWire(unlocked.outcome.status)};
}

asio::awaitable<nlm4_res> NlmService::Unlock(const rpc::CallContext& context,
                                             nlm4_unlockargs args) {
  Unlocked unlocked = TakeUnlock(context, args);
  std::optional<OwnerTurns::Turn> turn;
  if (journal_ != nullptr) {
    const size_t slot = OwnerTurns::SlotOf(unlocked.file, unlocked.owner);
    turn = turns_.TryTake(slot);
    if (!turn) turn = co_await turns_.Take(slot);
  }
  std::optional<lock::PriorLocks> prior;
  if (journal_ != nullptr) {
    prior =
        locks_.SnapshotLocks(unlocked.file, unlocked.owner, args.alock.l_offset, args.alock.l_len);
  }
  ApplyUnlock(unlocked, args);
  nlm4_stats stat = ToWire(unlocked.outcome.status);
  const bool unlocked_ok = unlocked.outcome.status == LockStatus::kGranted;
  const auto own = [&unlocked, &args] {
    return JournalEntry::Locks(
        unlocked.file, unlocked.owner,
        lock::ByteRange::FromOffsetLength(args.alock.l_offset, args.alock.l_len));
  };
  // The waiters it granted lose their grants first if it is not written, so that the owner's
  // locks can come back.
  std::optional<JournalEntry> entry;
  if (unlocked_ok && journal_ != nullptr) entry = own();
  const JournalBarrier::Ticket ticket = JoinJournal(std::move(entry), unlocked.outcome.grants);
  const bool persisted = co_await AwaitJournal(ticket);
  FinishGrants(std::move(unlocked.outcome.grants), persisted);
  if (!persisted && prior) {
    // The store still holds the locks: answering GRANTED would let a restart bring them back
    // with nobody to reclaim them. The owner keeps them, and the answer is the one clients
    // send their UNLOCK again for (Linux retries an UNLOCK refused with DENIED_GRACE_PERIOD,
    // having already dropped the lock locally; DENIED_NOLOCKS would end its attempts and leave
    // the lock held here for good).
    const bool undone = UndoUnwritten(*prior, own());
    if (undone) stat = NLM4_DENIED_GRACE_PERIOD;
    spdlog::warn(
        "nlm unlock host={} not persisted; answering {}", LogValue(unlocked.owner.host.value()),
        undone ? "DENIED_GRACE_PERIOD (try again)" : "GRANTED (another owner holds the range now)");
  }
  co_return nlm4_res{std::move(args.cookie), stat};
}

nlm4_res NlmService::Granted(const nlm4_testargs& args) {
  // nlockd is a server: it holds no client-side blocked requests to be granted.
  return nlm4_res{args.cookie, NLM4_DENIED};
}

asio::awaitable<nlm4_shareres> NlmService::Share(const rpc::CallContext& context,
                                                 nlm4_shareargs args) {
  std::string host = HostKeyFor(context, args.share.caller_name);
  lock::ShareRequest request;
  request.file = lock::FileKey(args.share.fh);
  request.owner = lock::LockOwner{lock::HostId(host), 0, lock::OwnerHandle(args.share.oh)};
  request.access = ToAccess(args.share.access);
  request.deny = ToDeny(args.share.mode);
  request.reclaim = args.reclaim;
  request.host_label = args.share.caller_name;
  request.host_address = PeerOf(context);
  const std::optional<OwnerTurns::Turn> turn = co_await OwnerTurn(request.file, request.owner);
  std::optional<lock::PriorShare> prior;
  if (journal_ != nullptr) prior = locks_.SnapshotShare(request.file, request.owner);
  lock::ShareOutcome outcome = locks_.Share(request);
  nlm4_stats stat = ToWire(outcome.status);
  const bool granted = outcome.status == LockStatus::kGranted;
  const JournalEntry own = JournalEntry::Share(request.file, request.owner);
  std::optional<JournalEntry> entry;
  if (granted) entry = own;
  const JournalBarrier::Ticket ticket = JoinJournal(std::move(entry), outcome.grants);
  const bool persisted = co_await AwaitJournal(ticket);
  FinishGrants(std::move(outcome.grants), persisted);
  if (!persisted && granted && prior) {
    // Fail closed, as for LOCK: the owner's reservation goes back to what it was (none, or
    // the one this call replaced), unless another owner already uses what the call gave up.
    const bool undone = UndoUnwritten(*prior, own);
    if (undone) stat = NLM4_DENIED_NOLOCKS;
    spdlog::warn("nlm share host={} caller={} not persisted; answering {}",
                 LogValue(request.owner.host.value()), LogValue(request.host_label),
                 undone ? "DENIED_NOLOCKS" : "GRANTED (not undoable)");
  }
  co_return nlm4_shareres{std::move(args.cookie), stat, 0};
}

asio::awaitable<nlm4_shareres> NlmService::Unshare(const rpc::CallContext& context,
                                                   nlm4_shareargs args) {
  lock::FileKey file(args.share.fh);
  lock::LockOwner owner{lock::HostId(HostKeyFor(context, args.share.caller_name)), 0,
                        lock::OwnerHandle(args.share.oh)};
  const std::optional<OwnerTurns::Turn> turn = co_await OwnerTurn(file, owner);
  std::optional<lock::PriorShare> prior;
  if (journal_ != nullptr) prior = locks_.SnapshotShare(file, owner);
  lock::UnshareOutcome outcome = locks_.Unshare(file, owner);
  nlm4_stats stat = NLM4_GRANTED;
  const JournalEntry own = JournalEntry::Share(file, owner);
  std::vector<JournalEntry> entries;
  entries.push_back(own);
  const bool persisted = co_await JournalCall(std::move(entries), std::move(outcome.grants));
  if (!persisted && prior && prior->share) {
    // As for UNLOCK: the reservation stays, and the client is told to try again.
    const bool undone = UndoUnwritten(*prior, own);
    if (undone) stat = NLM4_DENIED_GRACE_PERIOD;
    spdlog::warn("nlm unshare host={} not persisted; answering {}", LogValue(owner.host.value()),
                 undone ? "DENIED_GRACE_PERIOD (try again)" : "GRANTED (not undoable)");
  }
  co_return nlm4_shareres{std::move(args.cookie), stat, 0};
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
  record.ack->timer.cancel();
}

// --- _MSG replies -----------------------------------------------------------------------------

void NlmService::SpawnRes(const rpc::CallContext& context, uint32_t procedure,
                          std::vector<uint8_t> body) {
  auto pass = gate_.TryEnter();
  if (!pass) return;
  ClientAddress client{context.peer_address, std::nullopt, context.transport,
                       context.local_address};
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
  gate_.Close();
  for (auto& [id, record] : waiters_) {
    if (record->ack) record->ack->timer.cancel();
  }
  // Woken, a callback or _RES call still finishes the outbound call it is in: wait longer than
  // its deadline, so that no coroutine resumes into a destroyed service.
  const auto longest = std::max(options_.callback_deadline, options_.res_deadline);
  if (!co_await gate_.WaitEmpty(longest + std::chrono::seconds(1))) {
    spdlog::error("nlm: {} callbacks still running after shutdown", gate_.count());
  }
}

}  // namespace nlockd::nlm
