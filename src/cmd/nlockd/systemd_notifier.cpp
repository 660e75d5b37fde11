// SPDX-License-Identifier: Apache-2.0
#include "cmd/nlockd/systemd_notifier.hpp"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <optional>
#include <string_view>
#include <utility>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "nlockd/ha.hpp"
#include "nlockd/lock_service.hpp"

namespace nlockd::cmd {

namespace {

// How often STATUS= is refreshed (and, without a shorter watchdog, the executor probed).
constexpr std::chrono::milliseconds kPollInterval{1000};

// A whole decimal number, or nullopt (empty, signs, trailing bytes, overflow).
template <typename Number>
std::optional<Number> ParseNumber(std::string_view text) {
  Number value{};
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return value;
}

}  // namespace

std::optional<NotifyAddress> NotifyAddress::Parse(std::string_view name) {
  NotifyAddress address;
  address.address_.sun_family = AF_UNIX;
  // The name and, for a path, its terminating NUL must fit sun_path; an abstract name (systemd
  // writes it with a leading '@') is the bytes after a NUL, without one at the end.
  if (name.size() < 2 || name.size() >= sizeof address.address_.sun_path) return std::nullopt;
  if (name.front() == '/') {
    name.copy(address.address_.sun_path, name.size());
    address.length_ = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name.size() + 1);
  } else if (name.front() == '@') {
    name.substr(1).copy(address.address_.sun_path + 1, name.size() - 1);
    address.length_ = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name.size());
  } else {
    return std::nullopt;
  }
  return address;
}

int NotifyAddress::Send(std::string_view text) const {
  const int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return errno;
  const ssize_t sent = sendto(fd, text.data(), text.size(), MSG_NOSIGNAL,
                              reinterpret_cast<const sockaddr*>(&address_), length_);
  const int error = sent < 0 ? errno : 0;
  close(fd);
  return error;
}

uint64_t WatchdogUsec(const char* usec, const char* pid, pid_t self) {
  if (usec == nullptr) return 0;
  const auto interval = ParseNumber<uint64_t>(usec);
  if (!interval) return 0;
  if (pid != nullptr) {
    const auto owner = ParseNumber<pid_t>(pid);
    if (!owner || *owner != self) return 0;
  }
  return *interval;
}

SystemdNotifier::SystemdNotifier(std::shared_ptr<const HaStatus> ha) : ha_(std::move(ha)) {
  const char* socket = std::getenv("NOTIFY_SOCKET");
  if (socket == nullptr || *socket == '\0') return;
  address_ = NotifyAddress::Parse(socket);
  if (!address_) {
    spdlog::warn(
        "NOTIFY_SOCKET={} is neither a path nor an abstract socket (@name): systemd is "
        "not told this daemon's state",
        socket);
    return;
  }
  enabled_ = true;
  // Read once at start, as NOTIFY_SOCKET is, before any thread could change the environment.
  const char* usec = std::getenv("WATCHDOG_USEC");  // NOLINT(concurrency-mt-unsafe)
  const char* pid = std::getenv("WATCHDOG_PID");    // NOLINT(concurrency-mt-unsafe)
  watchdog_usec_ = WatchdogUsec(usec, pid, getpid());
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
  const int error = address_->Send(text);
  if (error != 0) spdlog::debug("systemd notification failed errno={}", error);
}

}  // namespace nlockd::cmd
