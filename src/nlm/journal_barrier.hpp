// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <memory>
#include <vector>

#include <asio/any_io_executor.hpp>
#include <asio/async_result.hpp>
#include <asio/awaitable.hpp>
#include <asio/use_awaitable.hpp>

#include "nlm/lock_journal.hpp"

namespace nlockd::nlm {

// Holds the LOCK and UNLOCK calls of one turn of the executor behind one journal write: their
// entries go into one LockJournal::Record, and each call is answered once that write is done
// (docs/decisions/0015, addendum "one wait per batch"). The first call of a batch leads it: it
// yields once, so that the calls ready in the same turn join, writes the batch and then resumes
// every other call of it inline, in the order they joined, with the outcome. The others wait on
// the batch itself: no timer, no post and no coroutine of their own per call. Runs on one
// executor (no mutex); `journal` must outlive it and every batch in flight.
class JournalBarrier {
  using Handler = asio::async_result<asio::use_awaitable_t<>, void(bool)>::handler_type;

 public:
  // The calls of one write: the entries, and the followers waiting for it.
  class Batch {
   public:
    size_t calls() const { return waiting_.size() + 1; }

   private:
    friend class JournalBarrier;
    void Add(Handler handler) { waiting_.push_back(std::move(handler)); }
    std::vector<JournalEntry> entries_;
    std::vector<Handler> waiting_;  // The followers, in the order they joined.
  };
  // A call's place in a batch: `leads` for the call that opened it.
  struct Ticket {
    std::shared_ptr<Batch> batch;
    bool leads = false;
  };

  JournalBarrier(asio::any_io_executor executor, LockJournal& journal)
      : executor_(std::move(executor)), journal_(journal) {}
  JournalBarrier(const JournalBarrier&) = delete;
  JournalBarrier& operator=(const JournalBarrier&) = delete;

  // Adds `entries` (one call's, in order) to the open batch, opening one if none is.
  // REQUIRES: `entries` not empty; the caller then awaits Lead (ticket.leads) or Wait, before it
  // suspends on anything else.
  Ticket Join(std::vector<JournalEntry>& entries);
  // The same for a call with one entry (most: no waiter granted), without a vector of its own.
  Ticket Join(JournalEntry&& entry);
  // The leader's part: lets the ready calls join, writes the batch and completes the others.
  // True if written. Throws nothing: a journal that throws has failed (logged).
  asio::awaitable<bool> Lead(std::shared_ptr<Batch> batch);
  // A follower's part: completes with the batch's outcome. REQUIRES: `batch` (the caller's
  // ticket) is kept until then.
  auto Wait(const std::shared_ptr<Batch>& batch) {
    return asio::async_initiate<const asio::use_awaitable_t<>&, void(bool)>(
        [](Handler handler, Batch* waiting_on) { waiting_on->Add(std::move(handler)); },
        asio::use_awaitable, batch.get());
  }

 private:
  asio::any_io_executor executor_;
  LockJournal& journal_;
  // Opens a batch if none is open; the ticket of the call about to join it.
  Ticket Open();

  std::shared_ptr<Batch> open_;  // The batch calls join now; null when none is open.
};

}  // namespace nlockd::nlm
