// SPDX-License-Identifier: Apache-2.0
#include "cmd/nlockd/systemd_notifier.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <utility>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <systemd/sd-daemon.h>

#include "nlockd/ha.hpp"
#include "nlockd/lock_service.hpp"

namespace nlockd::cmd {

namespace {

// How often STATUS= is refreshed (and, without a shorter watchdog, the executor probed).
constexpr std::chrono::milliseconds kPollInterval{1000};

}  // namespace

SystemdNotifier::SystemdNotifier(std::shared_ptr<const HaStatus> ha) : ha_(std::move(ha)) {
  const char* socket = std::getenv("NOTIFY_SOCKET");
  enabled_ = socket != nullptr && *socket != '\0';
  uint64_t usec = 0;
  // > 0 only when WATCHDOG_USEC is set and WATCHDOG_PID, if set, names this process.
  if (enabled_ && sd_watchdog_enabled(0, &usec) > 0) watchdog_usec_ = usec;
}

SystemdNotifier::~SystemdNotifier() { StopPolling(); }

void SystemdNotifier::Attach(LockService* service) {
  std::lock_guard lock(service_mutex_);
  service_ = service;
}

void SystemdNotifier::Ready() {
  if (!enabled_) return;
  {
    std::lock_guard lock(service_mutex_);
    if (service_ != nullptr && !service_->WaitForRegistrations()) {
      spdlog::warn("nlockd ready before rpcbind holds its registrations (still trying)");
    }
  }
  Notify("READY=1\nSTATUS=" + StatusLine());
  if (!poller_.joinable()) poller_ = std::thread([this] { Poll(); });
}

void SystemdNotifier::Reloading() {
  if (!enabled_) return;
  // systemd 253 and later also want MONOTONIC_USEC; older ones ignore it.
  uint64_t now = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                           std::chrono::steady_clock::now().time_since_epoch())
                                           .count());
  Notify(fmt::format("RELOADING=1\nMONOTONIC_USEC={}\nSTATUS=reloading the configuration", now));
}

void SystemdNotifier::Stopping() {
  StopPolling();
  if (enabled_) Notify("STOPPING=1\nSTATUS=shutting down");
}

void SystemdNotifier::StopPolling() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (poller_.joinable()) poller_.join();
}

void SystemdNotifier::Poll() {
  auto interval = kPollInterval;
  if (watchdog_usec_ != 0) {
    // Ping at twice the rate systemd requires, as sd_watchdog_enabled(3) advises.
    interval = std::min(interval, std::chrono::duration_cast<std::chrono::milliseconds>(
                                      std::chrono::microseconds(watchdog_usec_ / 2)));
  }
  std::string last;
  std::unique_lock lock(mutex_);
  while (!wake_.wait_for(lock, interval, [this] { return stop_; })) {
    lock.unlock();
    std::string status = StatusLine();  // Waits for the executor: proves it runs.
    std::string message;
    if (watchdog_usec_ != 0) message = "WATCHDOG=1\n";
    if (status != last) message += "STATUS=" + status;
    if (!message.empty()) Notify(message);
    last = std::move(status);
    lock.lock();
  }
}

std::string SystemdNotifier::StatusLine() {
  std::lock_guard lock(service_mutex_);
  if (service_ == nullptr) {
    if (!ha_) return "starting";
    const HaState ha = ha_->Get();
    if (ha.holder.empty()) return "standby; waiting for the lease";
    return fmt::format("standby; the service is held by {} (epoch {})", ha.holder, ha.epoch);
  }
  Status status = service_->GetStatus();
  std::string grace = status.grace_active ? fmt::format("grace {} {:.0f}s left", status.grace_mode,
                                                        status.grace_seconds_left)
                                          : std::string("serving");
  return fmt::format("{}; {} locks, {} hosts, {} registrations", grace, status.locks, status.hosts,
                     status.registrations);
}

void SystemdNotifier::Notify(const std::string& text) {
  int result = sd_notify(0, text.c_str());
  if (result < 0) spdlog::debug("sd_notify failed errno={}", -result);
}

}  // namespace nlockd::cmd
