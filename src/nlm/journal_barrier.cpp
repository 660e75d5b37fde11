// SPDX-License-Identifier: Apache-2.0
#include "nlm/journal_barrier.hpp"

#include <exception>
#include <iterator>
#include <utility>

#include <asio/post.hpp>
#include <spdlog/spdlog.h>

namespace nlockd::nlm {

JournalBarrier::Ticket JournalBarrier::Open() {
  Ticket ticket;
  if (!open_) {
    open_ = std::make_shared<Batch>();
    ticket.leads = true;
  }
  ticket.batch = open_;
  return ticket;
}

JournalBarrier::Ticket JournalBarrier::Join(std::vector<JournalEntry>& entries) {
  Ticket ticket = Open();
  std::move(entries.begin(), entries.end(), std::back_inserter(open_->entries_));
  return ticket;
}

JournalBarrier::Ticket JournalBarrier::Join(JournalEntry&& entry) {
  Ticket ticket = Open();
  open_->entries_.push_back(std::move(entry));
  return ticket;
}

asio::awaitable<bool> JournalBarrier::Lead(std::shared_ptr<Batch> batch) {
  // Behind the handlers that are ready now: the calls they decode join this batch.
  co_await asio::post(executor_, asio::use_awaitable);
  if (open_ == batch) open_.reset();
  bool ok = false;
  try {
    ok = co_await journal_.Record(std::move(batch->entries_));
  } catch (const std::exception& e) {
    spdlog::error("nlm lock journal failed: {}", e.what());
  }
  // Each follower runs on here until it suspends again or is answered; a call that joins a
  // batch meanwhile opens a new one.
  std::vector<Handler> waiting = std::move(batch->waiting_);
  for (Handler& handler : waiting) std::move(handler)(ok);
  co_return ok;
}

}  // namespace nlockd::nlm
