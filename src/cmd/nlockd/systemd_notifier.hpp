#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

namespace nlockd {
class LockService;
}

namespace nlockd::cmd {

// Tells systemd (Type=notify, through libsystemd's sd_notify) what the daemon is doing:
// READY=1 once it listens and registered, STATUS= with the grace phase (polled every second),
// RELOADING=1 around a reload, STOPPING=1 at shutdown, and WATCHDOG=1 when the unit sets
// WatchdogSec. Each ping follows a status read that runs on the service's executor, so a wedged
// executor stops the pings and systemd restarts the daemon. Does nothing without NOTIFY_SOCKET.
// `service` must outlive the notifier; the methods are called from the main thread.
class SystemdNotifier {
 public:
  explicit SystemdNotifier(LockService& service);
  ~SystemdNotifier();  // Stops the poller.
  SystemdNotifier(const SystemdNotifier&) = delete;
  SystemdNotifier& operator=(const SystemdNotifier&) = delete;

  // REQUIRES: the service listens and Start() returned. Starts the poller the first time.
  void Ready();
  void Reloading();
  // Stops the poller before the service shuts down (its status is no longer read).
  void Stopping();

 private:
  // Ends the status and watchdog thread (idempotent).
  void StopPolling();
  void Poll();
  // One STATUS= line from the service's status (blocks on its executor).
  std::string StatusLine();
  void Notify(const std::string& text);

  LockService& service_;
  bool enabled_ = false;
  uint64_t watchdog_usec_ = 0;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread poller_;
};

}  // namespace nlockd::cmd
