// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include <asio/any_io_executor.hpp>
#include <asio/awaitable.hpp>
#include <asio/steady_timer.hpp>

#include "base/log_limiter.hpp"
#include "lock/lock_manager.hpp"
#include "nlm/client_caller.hpp"
#include "nlm/grant_cookies.hpp"
#include "nlm/host_monitor.hpp"
#include "nlm/journal_barrier.hpp"
#include "nlm/lock_journal.hpp"
#include "nlm/owner_turns.hpp"
#include "nlm/wire.hpp"
#include "rpc/dispatcher.hpp"
#include "rpc/event.hpp"
#include "rpc/task_gate.hpp"

namespace nlockd::nlm {

struct NlmOptions {
  // What identifies a client host: its source address (the default; caller_name is then only
  // a label), or its caller_name together with its address (like Linux's nsm_use_hostnames:
  // the host is monitored, and released on a reboot, by name, from every address it used; its
  // locks belong to the name and the address it sent them from, so that another address
  // cannot act for it).
  enum class HostKey { kAddress, kCallerName };
  HostKey host_key = HostKey::kAddress;
  // How a granted blocked lock is announced: GRANTED_MSG (what Linux servers send) or GRANTED.
  bool granted_msg = true;
  // Each GRANTED attempt's total deadline, and attempts before the grant is revoked.
  std::chrono::milliseconds callback_deadline{5000};
  int callback_attempts = 3;
  // Wait between attempts, and before retrying a client that answered DENIED_GRACE_PERIOD.
  std::chrono::milliseconds callback_retry_delay{1000};
  // Deadline for the _RES call that answers a _MSG.
  std::chrono::milliseconds res_deadline{5000};
  // The secret key of the GRANTED cookies (GrantCookies). Unset: drawn from std::random_device
  // when the service is made. Tests set it to get the same cookies every run.
  std::optional<GrantCookies::Key> cookie_key;
};

// Counters an observer (admin/metrics) reads.
struct NlmStats {
  uint64_t callbacks_sent = 0;
  uint64_t callbacks_acknowledged = 0;
  // Grants revoked: the client answered with a refusal (in GRANTED's reply or a GRANTED_RES),
  // or every attempt went unanswered (or was answered DENIED_GRACE_PERIOD).
  uint64_t callbacks_refused = 0;
  uint64_t callbacks_failed = 0;
  uint64_t res_sent = 0;
  uint64_t res_failed = 0;
  // The same _RES calls by procedure (index: procedure - NLM_TEST_RES, through NLM_GRANTED_RES)
  // and how each ended.
  struct ResOutcomes {
    uint64_t delivered = 0;
    uint64_t timed_out = 0;
    uint64_t failed = 0;  // Any other error: unreachable, rejected, a bad reply.
  };
  static constexpr size_t kResProcedures = 5;
  std::array<ResOutcomes, kResProcedures> res_by_procedure{};
  uint64_t reclaims_granted = 0;  // LOCK, NM_LOCK and SHARE (or _MSG) with reclaim set, granted.
  // Blocking LOCK, NM_LOCK (or _MSG) refused because waiting would have closed a cycle of
  // waiting owners: DEADLCK in version 4, DENIED in versions 1 and 3.
  uint64_t deadlocks_refused = 0;
  uint64_t monitor_failures = 0;
  // FREE_ALL, procedure 16 or GRANTED_RES from a caller not entitled to it.
  uint64_t spoof_rejections = 0;
  uint64_t journal_failures = 0;  // LockJournal::Record calls that returned false.
  uint64_t hosts_released = 0;
};

// What releasing every host of one name did (NlmService::ReleaseHosts).
struct HostsReleased {
  size_t hosts = 0;    // Hosts whose key or caller_name label is the name.
  size_t locks = 0;    // Their lock entries.
  size_t shares = 0;   // Their share reservations.
  size_t waiters = 0;  // Their queued blocked requests.
  // Other hosts' waiters that the release granted (their callbacks follow the journal write).
  size_t waiters_granted = 0;
};

// The NLM service (program 100021, versions 1, 3 and 4) on top of lock::LockManager: one
// method per procedure, _MSG variants through the same methods, GRANTED callbacks for blocked
// locks that become granted. Runs on the executor that owns the lock manager; every
// coroutine it spawns is held by its TaskGate. The lock manager, monitor and caller (and the
// journal, if one is set) must outlive it.
class NlmService {
 public:
  NlmService(asio::any_io_executor executor, lock::LockManager& locks, HostMonitor& monitor,
             ClientCaller& caller, NlmOptions options);
  ~NlmService();
  NlmService(const NlmService&) = delete;
  NlmService& operator=(const NlmService&) = delete;

  // Persists every change of the lock and share table through `journal` from now on (see
  // LockJournal); nullptr (the default) persists nothing. With a journal, the calls of one owner
  // on one file that change state (LOCK, NM_LOCK, UNLOCK, CANCEL, SHARE, UNSHARE) run one at a
  // time: each waits for the previous one's write and undo (OwnerTurns).
  // REQUIRES: called before the service serves calls.
  void set_journal(LockJournal* journal) {
    journal_ = journal;
    barrier_.reset();
    if (journal != nullptr) barrier_.emplace(executor_, *journal);
  }

  // Registers every procedure of versions 1, 3 and 4.
  void Register(rpc::Dispatcher& dispatcher);

  // Procedures. `version` selects result codes; `context` identifies the caller.
  // The Try forms answer at once when nothing needs awaiting (the host is monitored already,
  // and no journal is set or it records inline): one coroutine frame less per call. They return
  // nullopt, having changed nothing, when the coroutine form must run; they may move from `args`
  // only when they answer.
  std::optional<nlm4_testres> TryTest(const rpc::CallContext& context, nlm4_testargs& args);
  std::optional<nlm4_res> TryLock(const rpc::CallContext& context, nlm4_lockargs& args,
                                  bool monitor);
  std::optional<nlm4_res> TryUnlock(const rpc::CallContext& context, nlm4_unlockargs& args);
  asio::awaitable<nlm4_testres> Test(const rpc::CallContext& context, nlm4_testargs args);
  asio::awaitable<nlm4_res> Lock(const rpc::CallContext& context, nlm4_lockargs args, bool monitor);
  asio::awaitable<nlm4_res> Cancel(const rpc::CallContext& context, nlm4_cancargs args);
  asio::awaitable<nlm4_res> Unlock(const rpc::CallContext& context, nlm4_unlockargs args);
  nlm4_res Granted(const nlm4_testargs& args);
  asio::awaitable<nlm4_shareres> Share(const rpc::CallContext& context, nlm4_shareargs args);
  asio::awaitable<nlm4_shareres> Unshare(const rpc::CallContext& context, nlm4_shareargs args);
  asio::awaitable<void> FreeAll(const rpc::CallContext& context, nlm4_notify args);
  void SmNotify(const rpc::CallContext& context, const nlm_sm_status& args);
  // Settles the GRANTED_MSG callback whose cookie it carries, if `context` is the host the
  // callback went to.
  void GrantedRes(const rpc::CallContext& context, const nlm4_res& res);

  // Drops the locks, shares and waiters of every host whose key or label is `name` and serves
  // the waiters they blocked (a reboot NSM reported, or the admin API's release). The release is
  // journaled in the background, before the callbacks of the waiters it granted.
  HostsReleased ReleaseHosts(const std::string& name);
  // A monitored host rebooted (NSM told us): ReleaseHosts; returns the locks released.
  size_t HostRebooted(const std::string& host) { return ReleaseHosts(host).locks; }

  // Journals, then sends the callbacks for, grants made outside an NLM call (grace timer, admin
  // actions).
  void SendGrants(lock::Grants grants);

  // Stops spawning callbacks, cancels those in flight (a callback stops where it is, and its
  // grant is neither announced nor revoked) and waits for them and for background journal
  // writes: at most the longer of callback_deadline and res_deadline, plus
  // rpc::kShutdownMargin.
  asio::awaitable<void> Shutdown();

  const NlmStats& stats() const { return stats_; }
  lock::LockManager& locks() { return locks_; }

 private:
  // A callback in flight waits on `woken` for its GRANTED_RES (GrantedRes sets `stat`), or
  // for its retry delay; setting it wakes the callback early.
  struct GrantAck {
    explicit GrantAck(asio::any_io_executor executor) : woken(std::move(executor)) {}
    rpc::Event woken;
    bool awaiting_res = false;  // A GRANTED_MSG was sent and its GRANTED_RES is awaited.
    std::optional<nlm4_stats> stat;
    bool accepted = false;  // The client accepted the grant; AcceptGrant acknowledged it.
  };

  // What the blocked LOCK that made a waiter said, for the waiter's GRANTED callback: the
  // version and caller of that request, not the host's latest ones.
  struct WaiterRecord {
    std::string host;
    lock::FileKey file;
    ClientAddress callback;  // The request's source address (and source port for a UDP _MSG).
    uint32_t version = NLM4_VERS;
    std::string caller_name;
    // Set while the callback runs (DeliverGrant owns the record then).
    std::string cookie;
    std::shared_ptr<GrantAck> ack;
    bool gone = false;  // The grant was taken back (CANCEL, UNLOCK, FREE_ALL): stop calling.
  };

  // Decode, call, encode: the glue between the dispatcher and the methods above. `now` is a
  // Try form (or one that always returns nullopt); `later` the coroutine form.
  template <typename Args, typename Result, typename Now, typename Later>
  asio::awaitable<rpc::HandlerStatus> Serve(const rpc::CallContext& context, xdr::Decoder& in,
                                            xdr::Encoder& out, Now now, Later later);
  // Records the reply's status in context.result (the result label of nlm_requests_total) and
  // counts a granted reclaim.
  template <typename Result>
  void NoteResult(const rpc::CallContext& context, bool reclaim, const Result& result);
  // The _MSG form: an empty reply now, the result as a _RES call to the client.
  template <typename Args, typename Result, typename Method>
  asio::awaitable<rpc::HandlerStatus> ServeMsg(const rpc::CallContext& context, xdr::Decoder& in,
                                               uint32_t res_procedure, Method method);

  // Handlers of the procedure table (Register): a call answered in its reply (Serve), or by a
  // _RES call (ServeMsg); a call that only tells us something (`method` takes its arguments).
  template <typename Args, typename Result, typename Now, typename Later>
  rpc::Dispatcher::Handler Answering(Now now, Later later);
  template <typename Args, typename Result, typename Method>
  rpc::Dispatcher::Handler AnsweringByRes(uint32_t res_procedure, Method method);
  template <typename Args>
  rpc::Dispatcher::Handler Taking(void (NlmService::*method)(const rpc::CallContext&, const Args&));

  // The lock table's host of a call: the address, or "caller_name@address" with the name
  // folded (FoldHostName), so that one host is one key whatever case its caller_name comes in.
  std::string HostKeyFor(const rpc::CallContext& context, const std::string& caller_name) const;
  // The name the status monitor watches for that host: the address, or the caller_name.
  std::string MonitorNameFor(const rpc::CallContext& context, const std::string& caller_name) const;
  // The lock owner (host, svid, oh) of a call, `host` its HostKeyFor; SHARE and UNSHARE have
  // svid 0.
  static lock::LockOwner OwnerOf(std::string host, int32_t svid, std::string oh);
  lock::LockOwner OwnerOf(const rpc::CallContext& context, const std::string& caller_name,
                          int32_t svid, std::string oh) const;
  lock::LockRequest ToRequest(const rpc::CallContext& context, const nlm4_lock& lock,
                              bool exclusive) const;
  // The LOCK request, its strings moved out of `args`; the host is bound to the caller's
  // address (lock::HostInfo::address) if the call leaves it holding state.
  lock::LockRequest TakeLockRequest(const rpc::CallContext& context, std::string host,
                                    nlm4_lockargs& args);
  // Asks the lock manager; keeps or forgets the waiter record.
  lock::LockOutcome ApplyLock(const rpc::CallContext& context, const lock::LockRequest& request);
  asio::awaitable<bool> EnsureMonitored(const rpc::CallContext& context, std::string host,
                                        std::string caller_name, int32_t state);

  // The change a state-changing call (LOCK, NM_LOCK, UNLOCK, CANCEL, SHARE, UNSHARE) makes to
  // one owner's state on one file, as ChangeOwnerState runs it. Each provides:
  //   file(), owner()               whose turn it takes;
  //   Snapshot(locks)               with a journal: keeps what the owner holds, for Undo;
  //   Apply(service) -> Applied     makes the change;
  //   Entry()                       the journal entry that names it;
  //   Undo(service, stat) -> stat   puts back the snapshot (UndoUnwritten), the new answer;
  //   Answer(stat) -> Result        the reply.
  struct Applied {
    nlm4_stats stat = NLM4_GRANTED;
    bool write = false;   // The owner's state changed: journal Entry() before the answer.
    bool undo = false;    // If that write fails, Undo (fail closed).
    lock::Grants grants;  // Waiters the change granted: journaled after Entry().
  };
  struct LockChange;
  struct UnlockChange;
  struct CancelChange;
  struct ShareChange;
  struct UnshareChange;
  // LOCK of a host not monitored yet (the first, or one forgotten): monitors it, then locks.
  asio::awaitable<nlm4_res> MonitorThenLock(LockChange change, int32_t state);
  // The owner and range of an UNLOCK, its strings moved out of `args`.
  UnlockChange TakeUnlock(const rpc::CallContext& context, nlm4_unlockargs& args) const;
  // The one way a call changes an owner's state (docs/architecture.md, journal-before-answer):
  // with a journal, takes the owner's turn on the file (OwnerTurns; an earlier call of the owner
  // still awaiting its write may undo itself, and this one changes the state only after that)
  // and snapshots; applies; journals the change and its grants in the turn's batch
  // (JoinJournal, AwaitJournal) before the answer; then announces the grants, or revokes them
  // and undoes the change if the write failed. Without a journal it answers at once.
  template <typename Change>
  asio::awaitable<typename Change::Result> ChangeOwnerState(Change change);
  // The same without a coroutine frame (the Try forms): without a journal, or with one that
  // records inline (LockJournal::records_inline), the change written by RecordNow.
  // REQUIRES: no journal, or the owner's turn taken by TakeTurnNow and held until it returns.
  template <typename Change>
  typename Change::Result ChangeOwnerStateNow(Change& change);
  // Both forms' last step: announces the grants (or revokes them if not persisted), undoes the
  // change if it was not persisted and must be, and makes the answer.
  template <typename Change>
  typename Change::Result FinishChange(Change& change, Applied& applied, bool persisted);
  // Whether a Try form may answer the call of this owner on this file now: nullopt when the
  // journal does not record inline or an earlier call of the owner holds its turn (the
  // coroutine form waits for it); else the turn, taken. REQUIRES: a journal is set.
  std::optional<OwnerTurns::Turn> TakeTurnNow(std::string_view file, std::string_view host,
                                              int32_t svid, std::string_view oh);
  // Records `entries` inline (LockJournal::RecordInline): true once written or when there is
  // nothing to write, false if the journal failed.
  bool RecordNow(std::span<const JournalEntryRef> entries);

  // The one form of write-and-wait: JoinJournal puts a call's `own` entries and its grants'
  // into the turn's batch (JournalBarrier), AwaitJournal waits for that batch's write (an empty
  // ticket, with no journal or nothing to write, is written at once). The caller keeps the
  // ticket until the wait is over, then finishes the grants.
  JournalBarrier::Ticket JoinJournal(std::optional<JournalEntry> own, const lock::Grants& grants);
  JournalBarrier::Ticket JoinJournal(std::vector<JournalEntry> own, const lock::Grants& grants);
  asio::awaitable<bool> AwaitJournal(const JournalBarrier::Ticket& ticket);
  // Adds the entries that persist `grants` (each waiter's locks near its range).
  static void AppendGrantEntries(std::vector<JournalEntry>& entries, const lock::Grants& grants);
  asio::awaitable<bool> LeadJournal(std::shared_ptr<JournalBarrier::Batch> batch);
  // A call that changed the owner's state could not be written: puts back what the owner held
  // before it (`prior`), journals that in the background (`entry` names the owner and file)
  // and serves the waiters it frees. Returns the answer: `refusal` once undone, else `stat` (the
  // call stands: another owner holds what it gave up). `procedure` names it in the log.
  nlm4_stats UndoUnwritten(const lock::PriorLocks& prior, const JournalEntry& entry,
                           const char* procedure, nlm4_stats stat, nlm4_stats refusal);
  nlm4_stats UndoUnwritten(const lock::PriorShare& prior, const JournalEntry& entry,
                           const char* procedure, nlm4_stats stat, nlm4_stats refusal);
  // Takes back a grant nobody will hold (refused, unanswered, not written, or nobody to call)
  // and journals that, and the waiters it frees, in the background.
  void RevokeUnaccepted(const lock::WaiterGrant& grant);
  // Records `entries` in the journal: true once written (at once with no journal or nothing
  // to record), false if the journal failed.
  asio::awaitable<bool> Persist(std::vector<JournalEntry> entries);
  // After the grants were journaled (or the journal failed): announce them, or revoke them.
  void FinishGrants(lock::Grants grants, bool persisted);
  // Journals `entries` and the grants in the background, then finishes the grants.
  void PersistInBackground(std::vector<JournalEntry> entries, lock::Grants grants);
  asio::awaitable<void> PersistThenFinish(std::vector<JournalEntry> entries, lock::Grants grants,
                                          rpc::TaskGate::Pass pass);

  // Waiter records: what the GRANTED callback of each blocked LOCK needs.
  void RememberWaiter(lock::WaiterId id, const rpc::CallContext& context,
                      const lock::LockRequest& request);
  // Forgets the records of waiters the lock manager removed (cancelled, unlocked, settled by
  // the owner's own LOCK: the outcome's waiters_removed), stopping their callbacks.
  void ForgetWaiters(const lock::WaiterIds& removed);
  // Forgets every waiter record of `host` (its state was released).
  void ForgetHostWaiters(const std::string& host);
  // Marks a record gone: its callback, if one is running, stops at its next step.
  void DropWaiterRecord(uint64_t id);
  asio::awaitable<void> DeliverGrant(lock::WaiterGrant grant);
  // The client accepted the grant of waiter `id` (in GRANTED's reply or a GRANTED_RES): the
  // lock manager settles it now, so that the client holds the lock from this moment, whatever
  // runs before the delivering coroutine resumes (a CANCEL then finds nothing to undo).
  void AcceptGrant(uint64_t id);
  // True while the callback of waiter `id` should go on (its grant is still pending).
  bool GrantStillPending(uint64_t id) const;
  asio::awaitable<void> SendRes(ClientAddress client, uint32_t version, uint32_t procedure,
                                std::vector<uint8_t> body);
  void SpawnRes(const rpc::CallContext& context, uint32_t procedure, std::vector<uint8_t> body);
  // Releases each of these hosts (keys in the lock table) and journals it in the background.
  HostsReleased ReleaseHostKeys(const std::vector<std::string>& hosts);
  // Releases everything of `host`; adds it to `released` and appends its journal entry and the
  // grants it made.
  void ReleaseHost(const std::string& host, HostsReleased& released,
                   std::vector<JournalEntry>& entries, lock::Grants& grants);

  asio::any_io_executor executor_;
  lock::LockManager& locks_;
  HostMonitor& monitor_;
  ClientCaller& caller_;
  NlmOptions options_;
  rpc::TaskGate gate_;
  OwnerTurns turns_;  // Used while a journal is set.
  NlmStats stats_;
  // Hosts monitored already (their first lock awaited SM_MON); see EnsureMonitored for its
  // bound.
  std::unordered_set<std::string> monitored_;
  // Hosts whose first SM_MON is in flight; later first locks wait on it.
  std::unordered_map<std::string, std::shared_ptr<rpc::Event>> monitoring_;
  LockJournal* journal_ = nullptr;
  std::optional<JournalBarrier> barrier_;  // Over journal_, while one is set.
  GrantCookies cookies_;
  // Per blocked LOCK (by waiter id): how to call its client back. Bounded by the lock manager's
  // waiter limits: a record lives as long as its waiter, or its callback.
  std::unordered_map<uint64_t, std::unique_ptr<WaiterRecord>> waiters_;
  std::unordered_map<std::string, size_t> waiters_per_host_;
  std::unordered_map<std::string, uint64_t> waiter_by_cookie_;  // Callbacks in flight.
  // Lines any client can cause at will (a FREE_ALL or procedure 16 naming someone else, _MSG
  // calls from an address with no NLM service to answer, grants never acknowledged): 10 at once,
  // then 1 a second, so that a flood of such calls cannot fill the log. stats_ counts them all.
  LogLimiter refused_log_{"nlm calls refused"};
  LogLimiter callback_log_{"nlm callbacks failed"};
};

}  // namespace nlockd::nlm
