// SPDX-License-Identifier: Apache-2.0
// JournalBarrier: the calls of one turn share one journal write and all see its outcome.
#include "nlm/journal_barrier.hpp"

#include <stdexcept>
#include <string>
#include <vector>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <gtest/gtest.h>

#include "nlm/testing/service_test_fixture.hpp"

namespace nlockd::nlm {
namespace {

using test_support::ManualJournal;
using test_support::RecordingJournal;
using test_support::Render;

JournalEntry Entry(const char* host) {
  return JournalEntry::Locks(lock::FileKey("file1"),
                             lock::LockOwner{lock::HostId(host), 1, lock::OwnerHandle("oh")});
}

// One call: joins with its entry, then leads or waits; notes its outcome in *outcome.
asio::awaitable<void> Call(JournalBarrier& barrier, const char* host, std::vector<std::string>& log,
                           int* outcome) {
  std::vector<JournalEntry> entries{Entry(host)};
  const JournalBarrier::Ticket ticket = barrier.Join(entries);
  log.push_back(std::string(host) + (ticket.leads ? " leads" : " joins"));
  const bool ok =
      ticket.leads ? co_await barrier.Lead(ticket.batch) : co_await barrier.Wait(ticket.batch);
  log.push_back(std::string(host) + (ok ? " written" : " failed"));
  *outcome = ok ? 1 : 0;
}

std::string Joined(const std::vector<std::string>& log) {
  std::string out;
  for (const std::string& line : log) out += (out.empty() ? "" : ", ") + line;
  return out;
}

TEST(JournalBarrier, TheCallsOfOneTurnShareOneWriteAndAreAnsweredInOrderAfterIt) {
  asio::io_context io;
  RecordingJournal journal;
  JournalBarrier barrier(io.get_executor(), journal);
  std::vector<std::string> log;
  int a = -1, b = -1, c = -1;
  journal.on_record = [&](const std::vector<JournalEntry>&) { log.push_back("record"); };
  asio::co_spawn(io, Call(barrier, "a", log, &a), asio::detached);
  asio::co_spawn(io, Call(barrier, "b", log, &b), asio::detached);
  asio::co_spawn(io, Call(barrier, "c", log, &c), asio::detached);
  io.run();
  EXPECT_EQ(Render(journal.batches),
            "locks f=file1 h=a svid=1; locks f=file1 h=b svid=1; "
            "locks f=file1 h=c svid=1");
  EXPECT_EQ(Joined(log), "a leads, b joins, c joins, record, b written, c written, a written");
  EXPECT_EQ(a + b + c, 3);
}

TEST(JournalBarrier, ACallAfterTheWriteBeganOpensTheNextBatch) {
  asio::io_context io;
  ManualJournal journal(io.get_executor());
  JournalBarrier barrier(io.get_executor(), journal);
  std::vector<std::string> log;
  int a = -1, b = -1, c = -1;
  asio::co_spawn(io, Call(barrier, "a", log, &a), asio::detached);
  io.poll();
  ASSERT_EQ(journal.writes.size(), 1u) << "a's batch is being written";
  asio::co_spawn(io, Call(barrier, "b", log, &b), asio::detached);
  asio::co_spawn(io, Call(barrier, "c", log, &c), asio::detached);
  io.poll();
  ASSERT_EQ(journal.writes.size(), 2u) << "b and c share the next write";
  EXPECT_EQ(journal.writes[1]->entries.size(), 2u);
  journal.CompleteNext(false);
  io.poll();
  EXPECT_EQ(a, 0) << "a's write failed";
  EXPECT_EQ(b, -1) << "b waits for its own write";
  journal.CompleteNext(true);
  io.poll();
  EXPECT_EQ(b, 1);
  EXPECT_EQ(c, 1);
  EXPECT_EQ(Joined(log), "a leads, b leads, c joins, a failed, c written, b written");
}

class ThrowingJournal : public LockJournal {
 public:
  asio::awaitable<bool> Record(std::vector<JournalEntry> /*entries*/) override {
    throw std::runtime_error("disk on fire");
    co_return true;
  }
};

TEST(JournalBarrier, AJournalThatThrowsFailsEveryCallOfTheBatch) {
  asio::io_context io;
  ThrowingJournal journal;
  JournalBarrier barrier(io.get_executor(), journal);
  std::vector<std::string> log;
  int a = -1, b = -1;
  asio::co_spawn(io, Call(barrier, "a", log, &a), asio::detached);
  asio::co_spawn(io, Call(barrier, "b", log, &b), asio::detached);
  io.run();
  EXPECT_EQ(a, 0);
  EXPECT_EQ(b, 0);
}

}  // namespace
}  // namespace nlockd::nlm
