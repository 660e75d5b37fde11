// SPDX-License-Identifier: Apache-2.0
// NlmService and the lock journal: the owner's turn, writing a call's change before its answer,
// undoing a change that could not be written, and the grants that wait for their write
// (docs/architecture.md, journal-before-answer).
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <spdlog/spdlog.h>

#include "base/logging.hpp"
#include "nlm/service.hpp"

namespace nlockd::nlm {

void NlmService::AppendGrantEntries(std::vector<JournalEntry>& entries,
                                    const lock::Grants& grants) {
  for (const auto& grant : grants) {
    entries.push_back(JournalEntry::Locks(grant.file, grant.owner, grant.range));
  }
}

namespace {

asio::awaitable<bool> Written() { co_return true; }

// The answer to a call whose change could not be written: `refusal` if the change was undone;
// else the call stands (another owner holds what it gave up) with its own answer.
nlm4_stats AnswerUnwritten(const char* procedure, const JournalEntry& entry, bool undone,
                           nlm4_stats stat, nlm4_stats refusal) {
  const nlm4_stats answer = undone ? refusal : stat;
  spdlog::warn("nlm {} host={} not persisted; answering {}{}", procedure,
               LogValue(entry.owner.host.value()), ToString(answer),
               undone ? "" : " (another owner holds what it gave up)");
  return answer;
}

}  // namespace

JournalBarrier::Ticket NlmService::JoinJournal(std::optional<JournalEntry> own,
                                               const lock::Grants& grants) {
  if (!barrier_) return {};
  if (grants.empty()) {
    if (!own) return {};
    return barrier_->Join(std::move(*own));
  }
  std::vector<JournalEntry> entries;
  if (own) entries.push_back(std::move(*own));
  AppendGrantEntries(entries, grants);
  return barrier_->Join(entries);
}

JournalBarrier::Ticket NlmService::JoinJournal(std::vector<JournalEntry> own,
                                               const lock::Grants& grants) {
  if (!barrier_) return {};
  AppendGrantEntries(own, grants);
  if (own.empty()) return {};
  return barrier_->Join(own);
}

asio::awaitable<bool> NlmService::AwaitJournal(const JournalBarrier::Ticket& ticket) {
  if (!ticket.batch) return Written();
  if (ticket.leads) return LeadJournal(ticket.batch);
  return barrier_->Wait(ticket.batch);
}

asio::awaitable<bool> NlmService::LeadJournal(std::shared_ptr<JournalBarrier::Batch> batch) {
  const bool ok = co_await barrier_->Lead(std::move(batch));
  if (!ok) ++stats_.journal_failures;
  co_return ok;
}

nlm4_stats NlmService::UndoUnwritten(const lock::PriorLocks& prior, const JournalEntry& entry,
                                     const char* procedure, nlm4_stats stat, nlm4_stats refusal) {
  lock::RestoreOutcome undo = locks_.RestoreLocks(entry.file, entry.owner, prior);
  PersistInBackground({entry}, std::move(undo.grants));
  return AnswerUnwritten(procedure, entry, undo.restored, stat, refusal);
}

nlm4_stats NlmService::UndoUnwritten(const lock::PriorShare& prior, const JournalEntry& entry,
                                     const char* procedure, nlm4_stats stat, nlm4_stats refusal) {
  lock::RestoreOutcome undo = locks_.RestoreShare(entry.file, entry.owner, prior);
  PersistInBackground({entry}, std::move(undo.grants));
  return AnswerUnwritten(procedure, entry, undo.restored, stat, refusal);
}

void NlmService::RevokeUnaccepted(const lock::WaiterGrant& grant) {
  lock::RevokeOutcome revoked = locks_.RevokeGrant(grant.id);
  if (!revoked.revoked) return;  // Settled already (acknowledged, or by the owner's own call).
  PersistInBackground({JournalEntry::Locks(grant.file, grant.owner, grant.range)},
                      std::move(revoked.grants));
}

asio::awaitable<bool> NlmService::Persist(std::vector<JournalEntry> entries) {
  if (journal_ == nullptr || entries.empty()) co_return true;
  bool ok = false;
  try {
    ok = co_await journal_->Record(std::move(entries));
  } catch (const std::exception& e) {
    spdlog::error("nlm lock journal failed: {}", e.what());
  }
  if (!ok) ++stats_.journal_failures;
  co_return ok;
}

std::optional<OwnerTurns::Turn> NlmService::TakeTurnNow(std::string_view file,
                                                        std::string_view host, int32_t svid,
                                                        std::string_view oh) {
  if (!journal_->records_inline()) return std::nullopt;
  return turns_.TryTake(OwnerTurns::SlotOf(file, host, svid, oh));
}

bool NlmService::RecordNow(std::span<const JournalEntryRef> entries) {
  if (entries.empty()) return true;
  bool ok = false;
  try {
    ok = journal_->RecordInline(entries);
  } catch (const std::exception& e) {
    spdlog::error("nlm lock journal failed: {}", e.what());
  }
  if (!ok) ++stats_.journal_failures;
  return ok;
}

void NlmService::SendGrants(lock::Grants grants) {
  if (grants.empty()) return;
  PersistInBackground({}, std::move(grants));
}

void NlmService::PersistInBackground(std::vector<JournalEntry> entries, lock::Grants grants) {
  if (journal_ == nullptr) {
    FinishGrants(std::move(grants), true);
    return;
  }
  AppendGrantEntries(entries, grants);
  if (entries.empty()) return;
  // Not once shutting down: the clients re-poll after restart. Not spawned through
  // TaskGate::Spawn: a journal write is never cancelled (its wait would end before the store
  // answered); the shutdown bound covers it.
  auto pass = gate_.TryEnter("background journal write");
  if (!pass) return;
  asio::co_spawn(executor_,
                 PersistThenFinish(std::move(entries), std::move(grants), std::move(*pass)),
                 asio::detached);
}

asio::awaitable<void> NlmService::PersistThenFinish(std::vector<JournalEntry> entries,
                                                    lock::Grants grants,
                                                    rpc::TaskGate::Pass /*pass*/) {
  bool persisted = co_await Persist(std::move(entries));
  FinishGrants(std::move(grants), persisted);
}

void NlmService::FinishGrants(lock::Grants grants, bool persisted) {
  for (auto& grant : grants) {
    if (!persisted) {
      // The store does not know the waiter holds the lock: take the grant back (fail closed).
      DropWaiterRecord(grant.id.value());
      RevokeUnaccepted(grant);
      continue;
    }
    // Not once shutting down: the clients re-poll after restart.
    if (!gate_.Spawn("GRANTED callback", [&] { return DeliverGrant(std::move(grant)); })) return;
  }
}

}  // namespace nlockd::nlm
