// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>

namespace nlockd {
class HaStatus;
class LockService;
}  // namespace nlockd

namespace nlockd::cmd {

// Where systemd listens for a service's notifications (sd_notify(3)'s protocol: each one is a
// single datagram of newline-separated VAR=value lines to the AF_UNIX datagram socket that
// NOTIFY_SOCKET names). Written in-tree because libsystemd, for these few bytes, brought six
// more shared libraries to every start.
class NotifyAddress {
 public:
  // A path ("/run/systemd/notify") or an abstract name ("@..."); nullopt for anything else (and
  // for a name sun_path cannot hold).
  static std::optional<NotifyAddress> Parse(std::string_view name);
  // Sends `text` as one datagram; 0 or the errno of the failure.
  int Send(std::string_view text) const;

 private:
  NotifyAddress() = default;
  sockaddr_un address_{};
  socklen_t length_ = 0;
};

// The watchdog interval systemd set, in microseconds: WATCHDOG_USEC when it is a positive whole
// number and WATCHDOG_PID, if set, is `self` (a child that inherited the variables must not ping
// for its parent); otherwise 0, no watchdog. As sd_watchdog_enabled(3), leaving both set.
uint64_t WatchdogUsec(const char* usec, const char* pid, pid_t self);

// Tells systemd (Type=notify, through NotifyAddress) what the daemon is doing:
// READY=1 once it listens and registered (or, with ha, once it waits as standby: a standby is a
// running node, and systemd's start timeout must not kill it), STATUS= with the grace phase or
// the standby's holder (polled every second), RELOADING=1 around a reload, STOPPING=1 at
// shutdown, and WATCHDOG=1 when the unit sets WatchdogSec. While a service is attached each
// ping follows a status read that runs on the service's executor, so a wedged executor stops
// the pings and systemd restarts the daemon. Does nothing without a usable NOTIFY_SOCKET. The
// methods are called from the main thread.
class SystemdNotifier {
 public:
  // `ha`: the HA status a standby reports (null without ha).
  explicit SystemdNotifier(std::shared_ptr<const HaStatus> ha = nullptr);
  ~SystemdNotifier();  // Stops the poller.
  SystemdNotifier(const SystemdNotifier&) = delete;
  SystemdNotifier& operator=(const SystemdNotifier&) = delete;

  // The service whose status is reported from now on; null detaches it (the standby's status
  // is reported). Waits for a status read in progress, so the service may be shut down after.
  void Attach(LockService* service);
  // READY=1, once the attached service's rpcbind registrations are done (at most the 2 s the
  // restart notification waits for them too). REQUIRES: the attached service listens and
  // Start() returned, or, with ha, none is attached (the node waits as standby). Starts the
  // poller the first time.
  void Ready();
  void Reloading();
  // Stops the poller before the service shuts down (its status is no longer read).
  void Stopping();

 private:
  // Ends the status and watchdog thread (idempotent).
  void StopPolling();
  void Poll();
  // One STATUS= line from the service's status (blocks on its executor), or the standby's.
  std::string StatusLine();
  void Notify(const std::string& text);

  const std::shared_ptr<const HaStatus> ha_;
  std::optional<NotifyAddress> address_;  // set when enabled_
  bool enabled_ = false;
  uint64_t watchdog_usec_ = 0;
  std::mutex service_mutex_;        // held while the attached service's status is read
  LockService* service_ = nullptr;  // guarded by service_mutex_
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread poller_;
};

}  // namespace nlockd::cmd
