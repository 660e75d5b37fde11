// SPDX-License-Identifier: Apache-2.0
#include "server/ha_lease_keeper.hpp"

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <optional>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <spdlog/spdlog.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/error.hpp"

extern char** environ;

namespace nlockd::server {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

std::string Holder() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) host[0] = '?';
  return fmt::format("nlockd pid {} on {}", getpid(), host);
}

// How often a standby looks at the lease (two short queries): a thirtieth of it, at least
// every 200 ms, so that a lease whose holder's session ended or that was released is taken
// within that, and an expired one within lease + that.
milliseconds PollEvery(milliseconds lease) {
  return std::clamp(lease / 30, milliseconds(50), milliseconds(200));
}

// The margin kept before the lease's end by this node's clock: stopping then leaves room for
// the two clocks running at slightly different rates and for exiting.
milliseconds SafetyMargin(milliseconds lease) {
  return std::clamp(lease / 10, milliseconds(50), milliseconds(500));
}

// Sleeps for `timeout` as a standby. A SIGTERM or SIGINT meanwhile (the daemon blocks them
// for its signal thread, which does not run yet) ends the process at once: a standby holds
// nothing that needs a clean stop.
void StandbyPause(milliseconds timeout) {
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  sigset_t blocked;
  pthread_sigmask(SIG_BLOCK, nullptr, &blocked);
  if (sigismember(&blocked, SIGTERM) != 1) {
    std::this_thread::sleep_for(timeout);  // not blocked: a signal takes its default action
    return;
  }
  const auto secs = std::chrono::duration_cast<std::chrono::seconds>(timeout);
  const timespec wait{static_cast<time_t>(secs.count()),
                      static_cast<long>((timeout - secs).count() * 1'000'000)};
  const int got = sigtimedwait(&stop, nullptr, &wait);
  if (got == SIGTERM || got == SIGINT) {
    spdlog::info("ha: stopped while standby (signal {})", got);
    spdlog::default_logger()->flush();
    std::_Exit(EXIT_SUCCESS);
  }
}

}  // namespace

void RunHook(const std::string& command, const std::string& what) {
  if (command.empty()) return;
  const char* argv[] = {"/bin/sh", "-c", command.c_str(), nullptr};
  pid_t pid = 0;
  const int error =
      posix_spawn(&pid, "/bin/sh", nullptr, nullptr, const_cast<char**>(argv), environ);
  if (error != 0) {
    spdlog::error("ha: cannot run the {} hook: {}", what, std::strerror(error));
    return;
  }
  spdlog::info("ha: running the {} hook (pid {})", what, pid);
  std::thread([pid, what] {
    int status = 0;
    if (waitpid(pid, &status, 0) != pid) return;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
      spdlog::info("ha: the {} hook succeeded", what);
    } else {
      spdlog::warn("ha: the {} hook failed (wait status {})", what, status);
    }
  }).detach();
}

HaLeaseKeeper::HaLeaseKeeper(HaOptions options) : options_(std::move(options)), holder_(Holder()) {
  const milliseconds poll = PollEvery(options_.lease);
  std::string last_seen;
  std::optional<HaReport> last_report;
  auto report = [&](const HaReport& now) {
    if (last_report && last_report->holder == now.holder && last_report->epoch == now.epoch) {
      return;
    }
    last_report = now;
    Report(now);
  };
  report(HaReport{false, "", 0});
  // After a planned release this node lets a standby take the service first; if none does
  // within the hold-off, it takes the service back.
  const Clock::time_point hold_off_end = Clock::now() + options_.hold_off;
  if (options_.hold_off.count() > 0) {
    spdlog::info("ha: leaving the lease of service '{}' to another node for {} ms",
                 options_.service, options_.hold_off.count());
  }
  for (;;) {
    try {
      if (!lease_) {
        lease_ = std::make_unique<store::PgLease>(options_.conninfo, options_.connect_timeout,
                                                  options_.service, holder_,
                                                  store::LeaseSessionLimits(options_.lease));
      }
      // Holding the session lock while the holder is said to hold it too means its session
      // ended: the process died (kill -9, a crash) or lost its connection.
      const bool locked = lease_->LockSession();
      std::optional<store::LeaseView> view = lease_->Read();
      const bool may_take = Clock::now() >= hold_off_end;
      const bool session_gone =
          may_take && locked && view && view->live && view->session_locked && !view->holder.empty();
      if (session_gone) {
        spdlog::info(
            "ha: the database session of the holder of service '{}' ({}, epoch {}) "
            "ended; taking the lease over",
            options_.service, view->holder, view->epoch);
        // The holder, if its process lives on, notices its lost session within kSessionCheck
        // and stops before this node serves.
        std::this_thread::sleep_for(kSessionTakeoverSettle);
      }
      if (may_take && (!view || !view->live || session_gone)) {
        if (TakeLease()) break;
        view = lease_->Read();
      }
      if (locked) lease_->UnlockSession();  // for the holder, which takes it at its renewal
      const std::string seen =
          !view                  ? "the lease was never taken"
          : view->holder.empty() ? fmt::format("the lease is free (epoch {})", view->epoch)
                                 : fmt::format("held by {} (epoch {})", view->holder, view->epoch);
      report(HaReport{false, view && view->live ? view->holder : "", view ? view->epoch : 0});
      if (seen != last_seen) {
        spdlog::info("ha: standby for service '{}': {}; waiting for the lease", options_.service,
                     seen);
        last_seen = seen;
      }
    } catch (const Error& e) {
      // A node that cannot reach the database never becomes active.
      const std::string seen = fmt::format("database unreachable: {}", e.what());
      if (seen != last_seen) {
        spdlog::warn("ha: standby for service '{}': {}", options_.service, e.what());
        last_seen = seen;
      }
      if (e.kind() != ErrorKind::kDisconnected && e.kind() != ErrorKind::kOverloaded) throw;
    }
    StandbyPause(poll);
  }
  spdlog::info("ha: took the lease of service '{}' at epoch {} ({} ms)", options_.service, epoch_,
               options_.lease.count());
  Report(HaReport{true, holder_, epoch_});
  renewer_ = std::jthread([this](std::stop_token stop) { RenewLoop(std::move(stop)); });
  deadline_watcher_ =
      std::jthread([this](std::stop_token stop) { WatchDeadline(std::move(stop)); });
}

bool HaLeaseKeeper::TakeLease() {
  for (int attempt = 0;; ++attempt) {
    const Clock::time_point sent = Clock::now();
    std::optional<store::LeaseGrant> grant;
    try {
      grant = lease_->TryAcquire(options_.lease);
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::kOverloaded) throw;
      if (attempt > 0) return false;  // still locked: again at the next look
      // The lease row stayed locked past the lease connection's lock timeout: by a transaction
      // of an earlier holder whose connection was cut before its COMMIT (the server keeps it
      // open until its TCP timeouts end it). It never committed; end it and try again.
      EndStaleTransactions(e.what());
      continue;
    }
    if (!grant) return false;
    // The database started the lease's time no earlier than it began the request, which was
    // after `sent`: counting grant->valid_for from `sent` never outlasts the database's expiry.
    const Clock::time_point valid_until = sent + grant->valid_for - SafetyMargin(options_.lease);
    const milliseconds left = std::chrono::duration_cast<milliseconds>(valid_until - Clock::now());
    if (left < options_.lease / 2) {
      // The answer came so late (a partition between the request and its answer) that the
      // lease could run out before the first renewal: give it back and start over.
      spdlog::warn(
          "ha: took the lease of service '{}' at epoch {} but the answer came too late ({} ms "
          "of it left by this node's clock); releasing it",
          options_.service, grant->epoch, left.count());
      lease_->Release(grant->epoch);
      return false;
    }
    epoch_ = grant->epoch;
    {
      std::lock_guard lock(mutex_);
      valid_until_ = valid_until;
    }
    return true;
  }
}

void HaLeaseKeeper::EndStaleTransactions(const std::string& why) {
  try {
    const std::vector<int> ended = lease_->EndStaleTransactions();
    if (ended.empty()) {
      spdlog::warn("ha: the lease row of service '{}' is locked ({}); waiting for it",
                   options_.service, why);
      return;
    }
    for (int pid : ended) {
      spdlog::warn(
          "ha: ended the stranded transaction of an earlier holder of service '{}' that kept the "
          "lease row locked (PostgreSQL server process {})",
          options_.service, pid);
    }
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::kDisconnected) throw;
    spdlog::warn(
        "ha: the lease row of service '{}' is locked by a stranded transaction that this "
        "node cannot end ({}); waiting for the server to end it",
        options_.service, e.what());
  }
}

void HaLeaseKeeper::Report(const HaReport& report) const {
  if (options_.on_report) options_.on_report(report);
}

// The threads' stop requests wake their waits; std::jthread joins them.
HaLeaseKeeper::~HaLeaseKeeper() = default;

void HaLeaseKeeper::BecameActive() { RunHook(options_.on_active, "ha_on_active"); }

void HaLeaseKeeper::Release() {
  // Made by the first Release() only.
  const bool first = renewer_.request_stop();
  deadline_watcher_.request_stop();
  if (!first) return;
  if (renewer_.joinable()) renewer_.join();
  if (deadline_watcher_.joinable()) deadline_watcher_.join();
  try {
    lease_->Release(epoch_);
    spdlog::info("ha: released the lease of service '{}' (epoch {})", options_.service, epoch_);
    Report(HaReport{false, "", epoch_});
  } catch (const Error& e) {
    spdlog::warn("ha: cannot release the lease (a standby takes over once it expires): {}",
                 e.what());
  }
  RunHook(options_.on_standby, "ha_on_standby");
}

void HaLeaseKeeper::RenewLoop(std::stop_token stop) {
  const milliseconds every = options_.lease / 3;
  const milliseconds retry = PollEvery(options_.lease);
  Clock::time_point next_renewal = Clock::now() + every;
  {
    // A lease taken after a wait has less than a whole lease left.
    std::lock_guard lock(mutex_);
    next_renewal = std::min(next_renewal, valid_until_ - every);
  }
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      const Clock::time_point wake = std::min(next_renewal, Clock::now() + kSessionCheck);
      wake_.wait_until(lock, stop, wake, [] { return false; });
      if (stop.stop_requested()) return;
    }
    try {
      if (Clock::now() < next_renewal) {
        lease_->Ping();
        continue;
      }
      // The database computes the new expiry after it receives the request, so the lease is
      // ours at least until `sent` + lease by this node's clock.
      const Clock::time_point sent = Clock::now();
      if (!lease_->Renew(epoch_, options_.lease)) {
        FailClosed("the database says the lease is no longer ours");
      }
      {
        std::lock_guard lock(mutex_);
        valid_until_ = sent + options_.lease - SafetyMargin(options_.lease);
      }
      next_renewal = sent + every;
    } catch (const Error& e) {
      if (e.kind() == ErrorKind::kDisconnected) {
        // With the session went the session lock: a standby may hold the lease already, and
        // nothing proves it is still ours.
        FailClosed(fmt::format("lost the database session that holds the lease: {}", e.what()));
      }
      spdlog::warn("ha: renewing the lease failed, retrying: {}", e.what());
      next_renewal = Clock::now() + retry;
    }
  }
}

void HaLeaseKeeper::StoreLostLease(const std::string& what) {
  FailClosed(fmt::format("a store write was refused: {}", what));
}

void HaLeaseKeeper::WatchDeadline(std::stop_token stop) {
  std::unique_lock lock(mutex_);
  for (;;) {
    // Wakes at the deadline known now; a renewal meanwhile moved it, and the wait goes on.
    wake_.wait_until(lock, stop, valid_until_, [this] { return Clock::now() >= valid_until_; });
    if (stop.stop_requested()) return;
    if (Clock::now() >= valid_until_) {
      lock.unlock();
      FailClosed("could not renew the lease before it could expire");
    }
  }
}

void HaLeaseKeeper::FailClosed(const std::string& why) {
  // A second caller waits here until the first one's _Exit ends the process.
  fail_closed_.lock();  // never unlocked
  spdlog::critical(
      "ha: lost the lease of service '{}' (epoch {}): {}; stopping at once so that this node "
      "never serves without it (exit status {})",
      options_.service, epoch_, why, kExitLeaseLost);
  Report(HaReport{false, "", epoch_});
  RunHook(options_.on_standby, "ha_on_standby");
  spdlog::default_logger()->flush();
  std::_Exit(kExitLeaseLost);
}

}  // namespace nlockd::server
