// SPDX-License-Identifier: Apache-2.0
#include "store/sql/group_commit.hpp"

#include <condition_variable>
#include <future>
#include <initializer_list>
#include <mutex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/error.hpp"

namespace nlockd::store {
namespace {

// A commit function that records each batch (as the mon_names of RemoveNotifyOwedOps, and "!"
// for a synced one), can be held so that writes pile up, and fails batches holding "bad".
class FakeDatabase {
 public:
  GroupCommitter::CommitFn Fn() {
    return [this](std::span<const QueuedWrite> batch, Durability durability) {
      std::unique_lock lock(mu_);
      ++calls_started_;
      changed_.notify_all();
      changed_.wait(lock, [&] { return !held_; });
      std::string rendered = durability == Durability::kSynced ? "!" : "";
      for (const QueuedWrite& w : batch) {
        const auto* op = std::get_if<RemoveNotifyOwedOp>(&w.op);
        const std::string name = op != nullptr ? op->mon_name : "reg";
        if (name == "bad") throw Error(ErrorKind::kFailed, "bad write");
        if (name == "gone") throw Error(ErrorKind::kDisconnected, "database gone");
        rendered += name + ",";
      }
      batches_.push_back(rendered);
    };
  }
  void Hold() {
    std::lock_guard lock(mu_);
    held_ = true;
  }
  void Release() {
    {
      std::lock_guard lock(mu_);
      held_ = false;
    }
    changed_.notify_all();
  }
  // Blocks until `n` commits have started.
  void WaitForCalls(int n) {
    std::unique_lock lock(mu_);
    changed_.wait(lock, [&] { return calls_started_ >= n; });
  }
  std::vector<std::string> batches() {
    std::lock_guard lock(mu_);
    return batches_;
  }
  int calls() {
    std::lock_guard lock(mu_);
    return calls_started_;
  }

 private:
  std::mutex mu_;
  std::condition_variable changed_;
  bool held_ = false;
  int calls_started_ = 0;
  std::vector<std::string> batches_;
};

// Collects the outcome of writes: "ok" or the Error's kind.
class Outcomes {
 public:
  Done Expect() {
    std::lock_guard lock(mu_);
    ++expected_;
    return [this](std::exception_ptr error) {
      std::string outcome = "ok";
      if (error) {
        try {
          std::rethrow_exception(error);
        } catch (const Error& e) {
          outcome = std::string(ToString(e.kind()));
        }
      }
      std::lock_guard done_lock(mu_);
      outcomes_.push_back(outcome);
      changed_.notify_all();
    };
  }
  std::vector<std::string> Wait() {
    std::unique_lock lock(mu_);
    changed_.wait(lock, [&] { return outcomes_.size() == expected_; });
    return outcomes_;
  }

 private:
  std::mutex mu_;
  std::condition_variable changed_;
  size_t expected_ = 0;
  std::vector<std::string> outcomes_;
};

WriteOp Named(const std::string& name) { return RemoveNotifyOwedOp{name}; }

// Holds the database while a write "a" is being committed and queues `names` behind it; the
// caller releases the database, and the queued writes are then taken together (up to max_batch).
void QueueBehindACommit(GroupCommitter& committer, FakeDatabase& db, Outcomes& outcomes,
                        std::initializer_list<const char*> names) {
  db.Hold();
  committer.Submit(Named("a"), outcomes.Expect());
  db.WaitForCalls(1);
  for (const char* name : names) committer.Submit(Named(name), outcomes.Expect());
}

TEST(GroupCommitter, CommitsWritesQueuedDuringACommitInOneBatch) {
  FakeDatabase db;
  Outcomes outcomes;
  GroupCommitter committer(db.Fn(), GroupCommitOptions{});
  db.Hold();
  committer.Submit(Named("a"), outcomes.Expect());
  db.WaitForCalls(1);  // "a" is being committed; the rest queue behind it
  for (const char* name : {"b", "c", "d"}) committer.Submit(Named(name), outcomes.Expect());
  db.Release();
  EXPECT_EQ(outcomes.Wait(), (std::vector<std::string>{"ok", "ok", "ok", "ok"}));
  EXPECT_EQ(db.batches(), (std::vector<std::string>{"a,", "b,c,d,"}));
  EXPECT_EQ(committer.stats().transactions, 2U);
  EXPECT_EQ(committer.stats().writes, 4U);
}

TEST(GroupCommitter, WithoutBatchingCommitsOneWritePerTransaction) {
  FakeDatabase db;
  Outcomes outcomes;
  GroupCommitter committer(db.Fn(), GroupCommitOptions{false, 1024, 100});
  QueueBehindACommit(committer, db, outcomes, {"b", "c"});
  db.Release();
  outcomes.Wait();
  EXPECT_EQ(db.batches(), (std::vector<std::string>{"a,", "b,", "c,"}));
}

TEST(GroupCommitter, MaxBatchBoundsATransaction) {
  FakeDatabase db;
  Outcomes outcomes;
  GroupCommitter committer(db.Fn(), GroupCommitOptions{true, 2, 100});
  QueueBehindACommit(committer, db, outcomes, {"b", "c", "d", "e", "f"});
  db.Release();
  outcomes.Wait();
  EXPECT_EQ(db.batches(), (std::vector<std::string>{"a,", "b,c,", "d,e,", "f,"}));
}

TEST(GroupCommitter, ABatchIsSyncedIfAnyOfItsWritesIsSynced) {
  FakeDatabase db;
  Outcomes outcomes;
  GroupCommitter committer(db.Fn(), GroupCommitOptions{});
  db.Hold();
  committer.Submit(Named("a"), outcomes.Expect());
  db.WaitForCalls(1);
  committer.Submit(Named("b"), outcomes.Expect());
  committer.Submit(ClearOp{}, outcomes.Expect());  // kSynced
  db.Release();
  outcomes.Wait();
  EXPECT_EQ(db.batches(), (std::vector<std::string>{"a,", "!b,reg,"}));
}

TEST(GroupCommitter, AFailedBatchIsRetriedWriteByWriteSoOnlyTheBadWriteFails) {
  FakeDatabase db;
  Outcomes outcomes;
  GroupCommitter committer(db.Fn(), GroupCommitOptions{});
  QueueBehindACommit(committer, db, outcomes, {"b", "bad", "c"});
  db.Release();
  EXPECT_EQ(outcomes.Wait(), (std::vector<std::string>{"ok", "ok", "failed", "ok"}));
  EXPECT_EQ(db.batches(), (std::vector<std::string>{"a,", "b,", "c,"}));
}

// Records the batch size of each committed transaction the observer is told of, and counts
// the failed writes it is told of.
class CommitLog {
 public:
  CommitObserver Observer() {
    return [this](const CommitRecord& record) {
      std::lock_guard lock(mu_);
      EXPECT_GE(record.duration.count(), 0);
      if (record.failed) {
        failed_ += record.writes;
        return;
      }
      sizes_.push_back(record.writes);
    };
  }
  std::vector<size_t> sizes() {
    std::lock_guard lock(mu_);
    return sizes_;
  }
  size_t failed() {
    std::lock_guard lock(mu_);
    return failed_;
  }

 private:
  std::mutex mu_;
  std::vector<size_t> sizes_;
  size_t failed_ = 0;
};

TEST(GroupCommitter, TheObserverSeesEachCommittedTransactionBeforeItsWritesComplete) {
  FakeDatabase db;
  CommitLog log;
  GroupCommitter committer(db.Fn(), GroupCommitOptions{});
  committer.SetObserver(log.Observer());
  {
    Outcomes outcomes;
    db.Hold();
    committer.Submit(Named("a"), outcomes.Expect());
    db.WaitForCalls(1);
    // A batch of three that fails on "bad" is retried write by write: two commits of one.
    for (const char* name : {"b", "bad", "c"}) committer.Submit(Named(name), outcomes.Expect());
    db.Release();
    outcomes.Wait();
  }
  EXPECT_EQ(log.sizes(), (std::vector<size_t>{1, 1, 1}));
  EXPECT_EQ(log.failed(), 1U) << "the bad write, once its batch was retried write by write";

  committer.SetObserver({});
  Outcomes outcomes;
  committer.Submit(Named("d"), outcomes.Expect());
  outcomes.Wait();
  EXPECT_EQ(log.sizes().size(), 3U) << "a removed observer is not called";
}

TEST(GroupCommitter, TheObserverSeesTheBatchSize) {
  FakeDatabase db;
  CommitLog log;
  Outcomes outcomes;
  GroupCommitter committer(db.Fn(), GroupCommitOptions{});
  committer.SetObserver(log.Observer());
  QueueBehindACommit(committer, db, outcomes, {"b", "c", "d"});
  db.Release();
  outcomes.Wait();
  EXPECT_EQ(log.sizes(), (std::vector<size_t>{1, 3}));
}

TEST(GroupCommitter, ALostOrLockedDatabaseFailsTheWholeBatchWithoutRetries) {
  FakeDatabase db;
  Outcomes outcomes;
  GroupCommitter committer(db.Fn(), GroupCommitOptions{});
  QueueBehindACommit(committer, db, outcomes, {"b", "gone", "c"});
  db.Release();
  EXPECT_EQ(outcomes.Wait(),
            (std::vector<std::string>{"ok", "disconnected", "disconnected", "disconnected"}));
  EXPECT_EQ(db.batches(), (std::vector<std::string>{"a,"}));
}

TEST(GroupCommitter, WritesQueuedBehindALostDatabaseFailAtOnceUntriedAndLaterOnesAreTried) {
  FakeDatabase db;
  Outcomes outcomes;
  GroupCommitter committer(db.Fn(), GroupCommitOptions{true, 2, 100});
  // Three transactions' worth queue behind "a": the first fails for the database's reason, so
  // the other two would each wait out the same outage.
  QueueBehindACommit(committer, db, outcomes, {"gone", "b", "c", "d"});
  // The last one's message, handed over from the writer thread.
  std::promise<std::string> untried;
  committer.Submit(Named("e"), [&](std::exception_ptr error) {
    try {
      std::rethrow_exception(error);
    } catch (const Error& e) {
      untried.set_value(e.what());
    }
  });
  db.Release();
  const std::string untried_message = untried.get_future().get();
  EXPECT_EQ(outcomes.Wait(), (std::vector<std::string>{"ok", "disconnected", "disconnected",
                                                       "disconnected", "disconnected"}));
  EXPECT_EQ(db.calls(), 2) << "the writes behind the failed transaction were tried";
  EXPECT_NE(untried_message.find("not tried"), std::string::npos) << untried_message;
  EXPECT_NE(untried_message.find("database gone"), std::string::npos) << untried_message;
  // The outage is not remembered: the next write is tried.
  committer.Submit(Named("f"), outcomes.Expect());
  EXPECT_EQ(outcomes.Wait().back(), "ok");
  EXPECT_EQ(db.batches(), (std::vector<std::string>{"a,", "f,"}));
}

TEST(GroupCommitter, AWriteSubmittedByACallerThatSawTheFailureIsTried) {
  FakeDatabase db;
  Outcomes outcomes;
  GroupCommitter committer(db.Fn(), GroupCommitOptions{});
  // The failed write's caller submits its next write from its completion, as a caller blocked
  // on the failure does the moment it wakes: that write comes after the failure, not behind it.
  Done retry = outcomes.Expect();
  committer.Submit(Named("gone"), [&](std::exception_ptr error) {
    EXPECT_TRUE(error);
    committer.Submit(Named("next"), std::move(retry));
  });
  EXPECT_EQ(outcomes.Wait(), (std::vector<std::string>{"ok"}));
  EXPECT_EQ(db.batches(), (std::vector<std::string>{"next,"}));
}

TEST(GroupCommitter, ALostDatabaseMetWhileRetryingWriteByWriteFailsTheRestUntried) {
  FakeDatabase db;
  Outcomes outcomes;
  GroupCommitter committer(db.Fn(), GroupCommitOptions{});
  QueueBehindACommit(committer, db, outcomes, {"x", "bad", "gone", "y"});
  db.Release();
  EXPECT_EQ(outcomes.Wait(),
            (std::vector<std::string>{"ok", "ok", "failed", "disconnected", "disconnected"}));
  // "a", the batch, then "x", "bad" and "gone" alone; "y" is not tried.
  EXPECT_EQ(db.calls(), 5);
  EXPECT_EQ(db.batches(), (std::vector<std::string>{"a,", "x,"}));
}

TEST(GroupCommitter, WritesCompleteInSubmissionOrderWhenARetryMeetsALostDatabase) {
  FakeDatabase db;
  GroupCommitter committer(db.Fn(), GroupCommitOptions{});
  std::mutex mu;
  std::vector<std::string> completed;
  std::promise<void> all_done;
  auto record = [&](std::string name) -> Done {
    return [&, name](std::exception_ptr error) {
      std::lock_guard lock(mu);
      completed.push_back(name + (error ? "!" : ""));
      if (completed.size() == 6) all_done.set_value();
    };
  };
  db.Hold();
  committer.Submit(Named("a"), record("a"));
  db.WaitForCalls(1);
  committer.Submit(Named("x"), record("x"));
  // "bad" fails alone in the write-by-write retry; its caller then submits "z", queued while
  // the retry goes on, so behind "y" of the batch being retried.
  committer.Submit(Named("bad"), [&](std::exception_ptr error) {
    record("bad")(error);
    committer.Submit(Named("z"), record("z"));
  });
  committer.Submit(Named("gone"), record("gone"));
  committer.Submit(Named("y"), record("y"));
  db.Release();
  all_done.get_future().get();
  std::lock_guard lock(mu);
  EXPECT_EQ(completed, (std::vector<std::string>{"a", "x", "bad!", "gone!", "y!", "z!"}));
}

TEST(GroupCommitter, AFullQueueFailsNewWritesAtOnceWithOverloaded) {
  FakeDatabase db;
  Outcomes outcomes;
  GroupCommitter committer(db.Fn(), GroupCommitOptions{true, 1024, 2});
  db.Hold();
  committer.Submit(Named("a"), outcomes.Expect());
  db.WaitForCalls(1);
  committer.Submit(Named("b"), outcomes.Expect());
  committer.Submit(Named("c"), outcomes.Expect());
  bool overloaded = false;
  committer.Submit(Named("d"), [&](std::exception_ptr error) {
    try {
      std::rethrow_exception(error);
    } catch (const Error& e) {
      overloaded = e.kind() == ErrorKind::kOverloaded;
    }
  });
  EXPECT_TRUE(overloaded);  // before Submit returned
  db.Release();
  EXPECT_EQ(outcomes.Wait(), (std::vector<std::string>{"ok", "ok", "ok"}));
}

TEST(GroupCommitter, TheObserverIsToldOfEveryFailedWrite) {
  FakeDatabase db;
  CommitLog log;
  Outcomes outcomes;
  GroupCommitter committer(db.Fn(), GroupCommitOptions{true, 1024, 3});
  committer.SetObserver(log.Observer());
  // A lost database fails its whole batch; a full queue refuses a write at once.
  QueueBehindACommit(committer, db, outcomes, {"b", "gone", "c"});
  committer.Submit(Named("d"), outcomes.Expect());
  EXPECT_EQ(log.failed(), 1U) << "the write refused by the full queue";
  db.Release();
  outcomes.Wait();
  EXPECT_EQ(log.sizes(), (std::vector<size_t>{1}));
  EXPECT_EQ(log.failed(), 4U);
}

TEST(GroupCommitter, TheObserverIsToldOfTheWritesFailedUntried) {
  FakeDatabase db;
  CommitLog log;
  Outcomes outcomes;
  GroupCommitter committer(db.Fn(), GroupCommitOptions{true, 1, 100});
  committer.SetObserver(log.Observer());
  QueueBehindACommit(committer, db, outcomes, {"gone", "b", "c"});
  db.Release();
  outcomes.Wait();
  EXPECT_EQ(log.sizes(), (std::vector<size_t>{1}));
  EXPECT_EQ(log.failed(), 3U);
}

TEST(GroupCommitter, DestructionCommitsEverythingQueued) {
  FakeDatabase db;
  Outcomes outcomes;
  {
    GroupCommitter committer(db.Fn(), GroupCommitOptions{});
    for (int i = 0; i < 50; ++i) committer.Submit(Named("w"), outcomes.Expect());
  }
  EXPECT_EQ(outcomes.Wait().size(), 50U);
}

TEST(GroupCommitter, ACallbackThatThrowsDoesNotStopTheWriter) {
  FakeDatabase db;
  Outcomes outcomes;
  GroupCommitter committer(db.Fn(), GroupCommitOptions{});
  committer.Submit(Named("a"), [](std::exception_ptr) { throw Error(ErrorKind::kFailed, "x"); });
  committer.Submit(Named("b"), outcomes.Expect());
  EXPECT_EQ(outcomes.Wait(), (std::vector<std::string>{"ok"}));
}

}  // namespace
}  // namespace nlockd::store
