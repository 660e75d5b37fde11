// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>
#include <thread>

#include "store/postgres/pg_lease.hpp"

namespace nlockd::server {

// What the keeper reports as its role changes: standby (with the lease's holder and epoch as
// last seen) or active (this node, its epoch).
struct HaReport {
  bool active = false;
  std::string holder;  // "" when the lease is free or was never taken
  int64_t epoch = 0;
};

struct HaOptions {
  std::string conninfo;  // the PostgreSQL store URI
  std::string service;   // the service name (Options::name), the lease's key
  std::chrono::milliseconds lease{5000};
  std::chrono::seconds connect_timeout{5};
  std::string on_active;   // /bin/sh -c command, or ""
  std::string on_standby;  // /bin/sh -c command, or ""
  // As standby, leaves a free lease to the other nodes this long before taking it.
  std::chrono::milliseconds hold_off{0};
  // Called (on the keeper's threads) whenever what it reports changes; may be empty.
  std::function<void(const HaReport&)> on_report;
};

// Makes this process the active node of an HA service and keeps it so (docs/decisions/0017).
// The constructor waits as standby until the service's lease is free, or its holder's database
// session ended, and takes it (blocking the caller's thread); a thread of its own then renews
// it every lease / 3 and checks every kSessionCheck that its lease session (which holds the
// service's session lock) still lives. A lost session fails closed at once, since a standby
// may take the lease as soon as the session lock is free. When a renewal fails
// and the lease could be about to expire by this node's clock (or the database says it is no
// longer ours), the process stops serving the only way that is certain at once: it runs the
// standby hook and exits with kExitLeaseLost, so that it can never grant after its lease ended;
// the supervisor restarts it as a standby. Release() hands the lease over on a planned stop.
class HaLeaseKeeper {
 public:
  // The exit status of a process that lost its lease (EX_TEMPFAIL: restart me).
  static constexpr int kExitLeaseLost = 75;
  // How often the active node proves its lease session alive.
  static constexpr std::chrono::milliseconds kSessionCheck{50};
  // How long a standby that found the holder's session gone waits before taking the lease:
  // the old holder, if its process lives on, notices its lost session and stops meanwhile.
  static constexpr std::chrono::milliseconds kSessionTakeoverSettle{150};

  explicit HaLeaseKeeper(HaOptions options);
  ~HaLeaseKeeper();
  HaLeaseKeeper(const HaLeaseKeeper&) = delete;
  HaLeaseKeeper& operator=(const HaLeaseKeeper&) = delete;

  int64_t epoch() const { return epoch_; }
  const std::string& holder() const { return holder_; }

  // Runs the on_active hook (call once the service is served).
  void BecameActive();
  // Stops renewing and releases the lease, so that a standby takes over at once; runs the
  // on_standby hook. Idempotent. REQUIRES: nothing is served or written any more.
  void Release();
  // A store write was refused because the lease is no longer ours: stops at once as a lost
  // renewal does.
  [[noreturn]] void StoreLostLease(const std::string& what);

 private:
  // Tries to take the lease (a standby that found it free); true once this node holds it, with
  // epoch_ and valid_until_ set.
  bool TakeLease();
  // The lease row stayed locked: ends the transaction that holds it if the lease is free.
  void EndStaleTransactions(const std::string& why);
  void RenewLoop(std::stop_token stop);
  void Report(const HaReport& report) const;
  // Ends the process once valid_until_ passes without a renewal, even while a renewal hangs in
  // the database client (a partition): serving must stop before the lease can expire.
  void WatchDeadline(std::stop_token stop);
  [[noreturn]] void FailClosed(const std::string& why);

  const HaOptions options_;
  const std::string holder_;
  std::unique_ptr<store::PgLease> lease_;  // the renew thread's once it runs
  int64_t epoch_ = 0;

  std::mutex mutex_;
  // Both threads wait on it with their stop tokens: Release() (or the destructor) requests the
  // stop, which is also their wake-up.
  std::condition_variable_any wake_;
  // The end of the lease by this node's clock, counted from when the request that set it was
  // sent.
  std::chrono::steady_clock::time_point valid_until_;  // guarded by mutex_
  // Taken by the first FailClosed and never given back: the renewer, the deadline watcher and a
  // store write may see the loss at once, and the standby hook must run once.
  std::mutex fail_closed_;
  std::jthread renewer_;
  std::jthread deadline_watcher_;
};

// Runs command with /bin/sh -c without waiting for it (a thread of its own reaps it and logs
// its exit status); `what` names it in the log.
void RunHook(const std::string& command, const std::string& what);

}  // namespace nlockd::server
