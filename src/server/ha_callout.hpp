// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "nsm/status_receiver.hpp"

namespace nlockd::server {

struct HaCalloutOptions {
  std::string program;  // an executable, run without a shell
  // How long one run may take; then it gets SIGTERM, and SIGKILL a second later. rpc.statd
  // waits without a bound, so a hung callout stops its NSM service; here a hung one holds back
  // only the events queued after it, and only this long.
  std::chrono::milliseconds timeout{10'000};
  // Events waiting at most; past it new ones are dropped with a warning, so that a flood of
  // SM_MON or SM_NOTIFY behind a slow callout cannot take all memory.
  size_t max_queued = 10'000;
};

// How one run of the callout ended.
struct CalloutRun {
  std::vector<std::string> arguments;  // after the program
  enum class End { kExited, kKilled, kNotStarted } end = End::kExited;
  int exit_status = 0;  // kExited: the status; a signal's death is 128 + its number
};

// rpc.statd's --ha-callout: the program is run with statd's arguments (the program, then
//   add-client MON_NAME MY_NAME       a registration made, or its cookie changed (SM_MON)
//   del-client MON_NAME MY_NAME       a registration removed (SM_UNMON, SM_UNMON_ALL)
//   sm-notify MON_NAME ADDRESS STATE  an SM_NOTIFY received, from ADDRESS (numeric)
// ) so that clustered NFS servers (CTDB and the like) can follow the monitor list. Runs happen
// on a thread of its own, one at a time in the order the events came, each bounded by
// `timeout`: the NSM executor only queues (never blocks). Standard input is /dev/null; output
// goes where nlockd's does; the environment is nlockd's.
class HaCallout final : public nsm::MonitorEvents {
 public:
  // `on_run` (may be empty) hears each run's end, on the callout's thread; must not block.
  explicit HaCallout(HaCalloutOptions options, std::function<void(const CalloutRun&)> on_run = {});
  ~HaCallout() override;
  HaCallout(const HaCallout&) = delete;
  HaCallout& operator=(const HaCallout&) = delete;

  // Queue an event; thread-safe, never blocks. Ignored once Stop() began.
  void AddClient(const std::string& mon_name, const std::string& my_name);
  void DelClient(const std::string& mon_name, const std::string& my_name);
  void SmNotify(const std::string& mon_name, const std::string& address, int32_t state);

  // nsm::MonitorEvents, from the NSM executor.
  void ClientAdded(const std::string& mon_name, const std::string& my_name) override {
    AddClient(mon_name, my_name);
  }
  void ClientRemoved(const std::string& mon_name, const std::string& my_name) override {
    DelClient(mon_name, my_name);
  }
  void NotifyReceived(const std::string& mon_name, const std::string& address,
                      int32_t state) override {
    SmNotify(mon_name, address, state);
  }

  // Runs what is queued for at most `wait`, then kills the run in progress and drops the rest
  // (logged). Idempotent; the destructor calls it with no wait.
  void Stop(std::chrono::milliseconds wait);

  uint64_t dropped() const;

 private:
  void Enqueue(std::vector<std::string> arguments);
  void Loop(std::stop_token stop);
  CalloutRun RunOne(std::vector<std::string> arguments, const std::stop_token& stop);

  const HaCalloutOptions options_;
  const std::function<void(const CalloutRun&)> on_run_;
  mutable std::mutex mutex_;
  // The thread waits on it with its stop token: Stop()'s stop request is also its wake-up.
  std::condition_variable_any changed_;
  std::deque<std::vector<std::string>> queue_;  // guarded by mutex_
  // Set by Stop(), before it requests the stop: when waiting ends (the run in progress is then
  // killed).
  std::optional<std::chrono::steady_clock::time_point> stop_by_;  // guarded by mutex_
  uint64_t dropped_ = 0;                                          // guarded by mutex_
  // An eventfd that the stop request writes (a stop_callback), so that a run's poll wakes too.
  int wake_fd_ = -1;
  std::jthread thread_;
};

}  // namespace nlockd::server
