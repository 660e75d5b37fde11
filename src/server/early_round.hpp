// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <asio/any_io_executor.hpp>
#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>

#include "base/clock.hpp"
#include "nsm/notifier.hpp"
#include "rpc/client.hpp"
#include "server/early_notify_file.hpp"

// A status monitor alone announcing a new boot before its store opens, as sm-notify does
// before rpc.statd runs: SM_NOTIFY with the next state after the early-notify file's, once to
// each host the file lists. The store's own round follows, with that same state, and tells the
// hosts this one did not reach (docs/architecture.md, "The early round").
namespace nlockd::server {

class EarlyRound {
 public:
  // Sends SM_NOTIFY(our_name, state) once to each of `hosts` (one attempt each, within
  // options.attempt_deadline) on a thread of its own, and returns at once.
  EarlyRound(std::string our_name, int32_t state, std::vector<nsm::NotifyTarget> hosts,
             nsm::NotifierOptions options);
  // Cancels what is still in flight (bounded by the notifier's shutdown) and joins the thread.
  ~EarlyRound();
  EarlyRound(const EarlyRound&) = delete;
  EarlyRound& operator=(const EarlyRound&) = delete;

  int32_t state() const { return state_; }
  size_t host_count() const { return host_count_; }
  // Posts `done` to `executor` once every host answered or its attempt failed (at once if that
  // is already so).
  void WhenFinished(asio::any_io_executor executor, std::function<void()> done);
  // Blocks until every host answered or its attempt failed, or `limit` passed; true if every
  // host's attempt ended.
  bool WaitFinished(std::chrono::milliseconds limit);
  // The hosts that answered so far (mon_names as the file gives them).
  std::vector<std::string> Answered() const;

 private:
  void HostEnded(const std::string& mon_name, bool answered);
  void Stop();

  const int32_t state_;
  const size_t host_count_;
  asio::io_context io_{1};
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work_;
  SteadyClock clock_;
  rpc::Client client_;
  nsm::Notifier notifier_;
  mutable std::mutex mutex_;
  std::vector<std::string> answered_;  // guarded by mutex_
  size_t ended_ = 0;                   // guarded by mutex_
  std::condition_variable all_ended_;  // with mutex_
  std::function<void()> on_finished_;  // guarded by mutex_; posted to finished_executor_
  asio::any_io_executor finished_executor_;
  bool stopped_ = false;  // io thread only
  std::thread thread_;
};

// How long a start waits at most for its early round to end before it goes on (opens the
// store): on a machine with one slow CPU, as at a boot under emulation, the rest of the start
// would otherwise take the CPU from the round's calls. A host that does not answer holds the
// start no longer than this.
inline constexpr std::chrono::milliseconds kEarlyRoundLead{300};

// The early round of a status monitor alone whose start finds `file` written on another boot
// than `boot_id`: reserves the next state in the file, then sends it, and returns once every
// host answered or its attempt failed, or after `lead`. nullptr (logged) when there is nothing
// to announce early or it cannot be done safely (no boot id); the store's round then announces
// the boot as it always does.
// REQUIRES: this process holds the store's lock (store::SqliteStoreLock) since before `file`
// was read, and keeps it until the store has its state.
std::unique_ptr<EarlyRound> BeginEarlyRound(EarlyNotifyFile& file, const std::string& boot_id,
                                            const std::string& our_name,
                                            nsm::NotifierOptions options,
                                            std::chrono::milliseconds lead = kEarlyRoundLead);

}  // namespace nlockd::server
