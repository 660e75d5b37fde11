#include "store/sqlite/wal_checkpointer.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sqlite3.h>

namespace nlockd::store {

WalCheckpointer::WalCheckpointer(const std::string& path, const char* synchronous,
                                 int threshold_frames)
    : db_(path), threshold_frames_(threshold_frames) {
  db_.Exec(fmt::format("PRAGMA synchronous = {}", synchronous));
  thread_ = std::thread([this] { Run(); });
}

WalCheckpointer::~WalCheckpointer() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_one();
  thread_.join();
}

void WalCheckpointer::Attach(SqliteDb& writer) { sqlite3_wal_hook(writer.get(), &OnCommit, this); }

void WalCheckpointer::Detach(SqliteDb& writer) { sqlite3_wal_hook(writer.get(), nullptr, nullptr); }

int WalCheckpointer::OnCommit(void* self, sqlite3* /*db*/, const char* /*name*/, int frames) {
  auto& checkpointer = *static_cast<WalCheckpointer*>(self);
  if (frames < checkpointer.threshold_frames_) return SQLITE_OK;
  {
    std::lock_guard lock(checkpointer.mu_);
    if (checkpointer.due_) return SQLITE_OK;
    checkpointer.due_ = true;
  }
  checkpointer.wake_.notify_one();
  return SQLITE_OK;
}

uint64_t WalCheckpointer::WaitForCompleteCheckpoints(uint64_t n,
                                                     std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  checkpointed_.wait_for(lock, timeout, [&] { return complete_ >= n; });
  return complete_;
}

void WalCheckpointer::Run() {
  for (;;) {
    {
      std::unique_lock lock(mu_);
      wake_.wait(lock, [this] { return due_ || stopping_; });
      if (stopping_) return;
    }
    int frames = 0;
    int copied = 0;
    const int rc = sqlite3_wal_checkpoint_v2(db_.get(), nullptr, SQLITE_CHECKPOINT_PASSIVE,
                                             &frames, &copied);
    if (rc != SQLITE_OK && rc != SQLITE_BUSY) {
      spdlog::warn("store: WAL checkpoint of {} failed: {}", db_.path(), sqlite3_errstr(rc));
    }
    {
      std::lock_guard lock(mu_);
      due_ = false;
      if (rc == SQLITE_OK && copied == frames) ++complete_;
    }
    checkpointed_.notify_all();
  }
}

}  // namespace nlockd::store
