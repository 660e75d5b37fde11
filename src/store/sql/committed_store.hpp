// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <memory>
#include <utility>

#include "store/sql/group_commit.hpp"
#include "store/store.hpp"

namespace nlockd::store {

// What the SQL stores (SQLite, PostgreSQL) share: the StartupInfo of this run, and the
// GroupCommitter whose thread runs every write. A derived store records the run
// (set_startup), starts the committer last in its constructor and stops it first in its
// destructor, so that the writer thread never runs while the store's own members are being
// made or destroyed.
class CommittedStore : public Store {
 public:
  const StartupInfo& startup() const final { return startup_; }
  GroupCommitter::Stats writer_stats() const { return committer_->stats(); }
  void SetCommitObserver(CommitObserver observer) final {
    committer_->SetObserver(std::move(observer));
  }

 protected:
  void Submit(WriteOp op, Done done) final { committer_->Submit(std::move(op), std::move(done)); }
  void set_startup(StartupInfo startup) { startup_ = std::move(startup); }
  // REQUIRES: the last step of the derived constructor.
  void StartCommitter(GroupCommitter::CommitFn commit, GroupCommitOptions options) {
    committer_ = std::make_unique<GroupCommitter>(std::move(commit), options);
  }
  // Commits every queued write, then stops the writer thread. REQUIRES: the first step of the
  // derived destructor.
  void StopCommitter() { committer_.reset(); }

 private:
  StartupInfo startup_;
  std::unique_ptr<GroupCommitter> committer_;
};

}  // namespace nlockd::store
