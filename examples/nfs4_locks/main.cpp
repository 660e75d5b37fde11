// SPDX-License-Identifier: Apache-2.0
// nfs4_locks: libnlockd's lock manager without the wire, as an NFSv4 server uses it. NFSv4
// carries LOCK, LOCKT and LOCKU in its own compound procedures and polls for blocked locks, so
// the server asks the lock table directly; sharing the table with NLM (were it routed too)
// makes NFSv3 and NFSv4 clients see each other's locks. The store is memory: (an NFSv4 server
// keeps its own client records for reclaims).
//
// Runs a short scenario and checks each answer; exits 0 when all were as expected.
#include <cstdio>
#include <future>
#include <string>
#include <vector>

#include <nlockd/nlockd.hpp>

namespace {

int failures = 0;

void Expect(bool ok, const std::string& what) {
  std::printf("%s %s\n", ok ? "ok  " : "FAIL", what.c_str());
  if (!ok) ++failures;
}

// The service completes on its own thread; a synchronous caller waits for the answer.
template <typename T, typename Start>
T Wait(Start start) {
  std::promise<T> promise;
  start([&promise](T value) { promise.set_value(std::move(value)); });
  return promise.get_future().get();
}

}  // namespace

int main() {
  nlockd::Options options;
  options.store = "memory:";
  options.grace = std::chrono::seconds(0);  // a fresh start: nothing to reclaim
  options.rpcbind_register = false;
  nlockd::LockService locks(options);
  locks.Start();

  // NFSv4 lock owners: the client id as the host, the lock-owner bytes as the handle.
  const nlockd::LockOwner alice{"nfs4:client-1", 0, "lock-owner-a"};
  const nlockd::LockOwner bob{"nfs4:client-2", 0, "lock-owner-b"};
  const std::string file = "fh:export1:inode42";

  auto lock = [&](const nlockd::LockOwner& owner, uint64_t offset, uint64_t length, bool write) {
    nlockd::LocalLockRequest request{file, owner, {offset, length}, write, false};
    return Wait<nlockd::LockAnswer>([&](auto done) { locks.Lock(request, done); });
  };

  // LOCK: alice writes bytes 0-99; bob's overlapping write lock is denied, with alice as holder.
  Expect(lock(alice, 0, 100, true).result == nlockd::LockResult::kGranted, "alice locks 0-99");
  nlockd::LockAnswer denied = lock(bob, 50, 10, true);
  Expect(denied.result == nlockd::LockResult::kDenied && denied.holder &&
             denied.holder->owner.handle == "lock-owner-a",
         "bob's write lock on 50-59 is denied, alice holds it");

  // LOCKT for bob elsewhere: free.
  nlockd::LocalLockRequest test{file, bob, {200, 10}, true, false};
  Expect(Wait<nlockd::LockAnswer>([&](auto done) { locks.Test(test, done); }).result ==
             nlockd::LockResult::kGranted,
         "bob may lock 200-209");

  // I/O check of the NFS server: does bob's write of 10-19 meet a lock of someone else?
  nlockd::ConflictQuery query{file, {10, 10}, true, bob.host};
  auto conflicts =
      Wait<std::vector<nlockd::HeldLock>>([&](auto done) { locks.FindConflicts(query, done); });
  Expect(conflicts.size() == 1 && conflicts[0].owner.host == alice.host,
         "a write of 10-19 by bob conflicts with alice's lock");

  // LOCKU: alice unlocks; bob's lock is granted now.
  Expect(Wait<nlockd::LockResult>([&](auto done) {
           locks.Unlock(file, alice, {0, 0}, done);
         }) == nlockd::LockResult::kGranted,
         "alice unlocks the file");
  Expect(lock(bob, 50, 10, true).result == nlockd::LockResult::kGranted, "bob locks 50-59");

  // Client 2's lease expired: everything it holds goes.
  Expect(Wait<size_t>([&](auto done) { locks.ReleaseHost(bob.host, done); }) == 1,
         "bob's client expired: its lock is released");

  // REMOVE of a locked file: the server drops its locks.
  Expect(lock(alice, 0, 0, false).result == nlockd::LockResult::kGranted, "alice read-locks all");
  nlockd::FileRelease released =
      Wait<nlockd::FileRelease>([&](auto done) { locks.ReleaseFile(file, done); });
  Expect(released.locks == 1, "removing the file releases alice's lock");
  Expect(locks.GetStatus().locks == 0, "no lock left");

  locks.Shutdown();
  std::printf("%s\n", failures == 0 ? "all ok" : "failures");
  return failures == 0 ? 0 : 1;
}
