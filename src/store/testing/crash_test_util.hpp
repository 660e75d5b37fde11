// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <string>

#include <sys/types.h>

namespace nlockd::store::testutil {

// The crash test: runs store_crash_child against the store at uri, kills it with SIGKILL once
// it has acknowledged at least min_acks durable registrations (so, mid-load), then reopens the
// store and checks (with gtest assertions) that every acknowledged registration is there.
void RunCrashTest(const std::string& uri, int min_acks);
// The same with lock-table writes (ApplyLockChanges): every acknowledged lock must be there.
void RunLockCrashTest(const std::string& uri, int min_acks);

// store_crash_child running against a store, its stdout and stderr on pipes. The destructor
// kills it (SIGKILL) if it still runs and reaps it.
struct StoreChild {
  pid_t pid = -1;
  int out = -1;  // its stdout: one acknowledged registration per line
  int err = -1;  // its stderr
  StoreChild() = default;
  StoreChild(const StoreChild&) = delete;
  StoreChild& operator=(const StoreChild&) = delete;
  ~StoreChild();
  // Waits (up to 30 s) for its first acknowledged write, i.e. until it holds the store open;
  // false if it exited first.
  bool AwaitFirstAck() const;
  // Waits for it to exit by itself; returns its wait status and everything it wrote to stderr.
  int AwaitExit(std::string* stderr_text);
  // Kills it with SIGKILL and reaps it.
  void KillNine();
};
void StartStoreChild(const std::string& uri, const std::string& node, StoreChild& child);

}  // namespace nlockd::store::testutil
