#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "store/sqlite/sqlite_db.hpp"

namespace nlockd::store {

// Copies the WAL back into the database file on a thread and connection of its own, so that the
// writer's commits never wait for a checkpoint. SQLite's automatic checkpoint runs inside the
// commit that crosses its threshold and syncs the database file there: 100-250 ms on the
// project's VM, during which every lock-journal write (and so every LOCK answer) waited.
//
// Attach() replaces the writer connection's automatic checkpoint with a hook that wakes this
// thread once the WAL holds `threshold_frames` frames; the thread then runs a PASSIVE checkpoint,
// which never blocks the writer. The writer's next transaction starts the WAL over once every
// frame is copied (and truncates the file to its journal_size_limit).
class WalCheckpointer {
 public:
  // Opens its own connection to `path` with the given synchronous level (what makes the
  // checkpoint durable) and starts the thread.
  WalCheckpointer(const std::string& path, const char* synchronous, int threshold_frames);
  // Stops the thread; a checkpoint under way finishes first. Detach the writer before.
  ~WalCheckpointer();
  WalCheckpointer(const WalCheckpointer&) = delete;
  WalCheckpointer& operator=(const WalCheckpointer&) = delete;

  // Installs the hook on the writer connection (call on the writer's thread, before it commits).
  void Attach(SqliteDb& writer);
  // Removes it again.
  static void Detach(SqliteDb& writer);

  // Checkpoints that copied every frame, since start; waits up to `timeout` for at least `n`.
  uint64_t WaitForCompleteCheckpoints(uint64_t n, std::chrono::milliseconds timeout);

 private:
  static int OnCommit(void* self, struct sqlite3* db, const char* name, int frames);
  void Run();

  SqliteDb db_;
  const int threshold_frames_;
  std::mutex mu_;  // guards the three below
  std::condition_variable wake_;          // the thread: a checkpoint is due, or stop
  std::condition_variable checkpointed_;  // WaitForCompleteCheckpoints
  bool due_ = false;
  bool stopping_ = false;
  uint64_t complete_ = 0;
  std::thread thread_;  // last: started when the rest is ready
};

}  // namespace nlockd::store
