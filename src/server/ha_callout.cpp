// SPDX-License-Identifier: Apache-2.0
#include "server/ha_callout.hpp"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <spawn.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/error.hpp"
#include "base/logging.hpp"

extern char** environ;

namespace nlockd::server {
namespace {

// After SIGTERM, how long a callout has to exit before SIGKILL.
constexpr std::chrono::milliseconds kTermGrace{1000};

int PidFd(pid_t pid) { return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)); }

int MillisUntil(std::chrono::steady_clock::time_point when) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      when - std::chrono::steady_clock::now());
  return static_cast<int>(std::clamp<int64_t>(left.count(), 0, 60'000));
}

std::string Joined(const std::vector<std::string>& arguments) {
  return fmt::format("{}", fmt::join(arguments, " "));
}

}  // namespace

HaCallout::HaCallout(HaCalloutOptions options, std::function<void(const CalloutRun&)> on_run)
    : options_(std::move(options)), on_run_(std::move(on_run)) {
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd_ < 0) {
    throw Error(ErrorKind::kFailed, fmt::format("ha_callout: eventfd: {}", std::strerror(errno)));
  }
  thread_ = std::jthread([this](std::stop_token stop) { Loop(std::move(stop)); });
}

HaCallout::~HaCallout() {
  Stop(std::chrono::milliseconds(0));
  ::close(wake_fd_);
}

void HaCallout::AddClient(const std::string& mon_name, const std::string& my_name) {
  Enqueue({"add-client", mon_name, my_name});
}

void HaCallout::DelClient(const std::string& mon_name, const std::string& my_name) {
  Enqueue({"del-client", mon_name, my_name});
}

void HaCallout::SmNotify(const std::string& mon_name, const std::string& address, int32_t state) {
  Enqueue({"sm-notify", mon_name, address, std::to_string(state)});
}

void HaCallout::Enqueue(std::vector<std::string> arguments) {
  {
    std::lock_guard lock(mutex_);
    if (stop_by_) return;
    if (queue_.size() >= options_.max_queued) {
      // Warned once per hundred drops: the flood that fills the queue would fill the log too.
      if (dropped_++ % 100 == 0) {
        spdlog::warn("ha_callout queue full ({} waiting): {} dropped; {} dropped so far",
                     queue_.size(), LogValue(Joined(arguments)), dropped_);
      }
      return;
    }
    queue_.push_back(std::move(arguments));
  }
  changed_.notify_one();
}

uint64_t HaCallout::dropped() const {
  std::lock_guard lock(mutex_);
  return dropped_;
}

void HaCallout::Stop(std::chrono::milliseconds wait) {
  {
    std::lock_guard lock(mutex_);
    if (!stop_by_) stop_by_ = std::chrono::steady_clock::now() + wait;
  }
  // Wakes the wait for an event, and (through the eventfd) a run in progress, which re-reads
  // its deadline.
  thread_.request_stop();
  if (thread_.joinable()) thread_.join();
}

void HaCallout::Loop(std::stop_token stop) {
  const std::stop_callback wake_run(stop, [this] {
    const uint64_t one = 1;
    (void)!::write(wake_fd_, &one, sizeof one);
  });
  for (;;) {
    std::vector<std::string> arguments;
    {
      std::unique_lock lock(mutex_);
      changed_.wait(lock, stop, [this] { return !queue_.empty(); });
      if (queue_.empty() ||
          (stop.stop_requested() && std::chrono::steady_clock::now() >= *stop_by_)) {
        if (!queue_.empty()) {
          spdlog::warn("ha_callout stopping: {} events not run", queue_.size());
        }
        return;
      }
      arguments = std::move(queue_.front());
      queue_.pop_front();
    }
    CalloutRun run = RunOne(std::move(arguments), stop);
    if (on_run_) on_run_(run);
  }
}

CalloutRun HaCallout::RunOne(std::vector<std::string> arguments, const std::stop_token& stop) {
  CalloutRun run;
  run.arguments = std::move(arguments);
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(options_.program.c_str()));
  for (std::string& argument : run.arguments) argv.push_back(argument.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  // The daemon blocks its signals in every thread (it takes them with sigwait): the callout
  // starts with none blocked and default dispositions, as a program expects.
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  sigset_t none;
  sigemptyset(&none);
  sigset_t all;
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attributes, &none);
  posix_spawnattr_setsigdefault(&attributes, &all);
  // A process group of its own, so that a callout that overruns is stopped with everything it
  // started (a script's `sleep`, a pipeline): those would otherwise live on, holding the
  // daemon's output open.
  posix_spawnattr_setpgroup(&attributes, 0);
  posix_spawnattr_setflags(&attributes,
                           POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
  pid_t pid = 0;
  const int spawned =
      posix_spawn(&pid, options_.program.c_str(), &actions, &attributes, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  if (spawned != 0) {
    spdlog::warn("ha_callout {} cannot run: {}", LogValue(options_.program),
                 std::strerror(spawned));
    run.end = CalloutRun::End::kNotStarted;
    return run;
  }

  const int pidfd = PidFd(pid);
  auto deadline = std::chrono::steady_clock::now() + options_.timeout;
  bool terminated = false;
  bool reaped = false;
  int status = 0;
  for (;;) {
    {
      std::lock_guard lock(mutex_);
      if (stop.stop_requested()) deadline = std::min(deadline, *stop_by_);
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      if (terminated) {
        ::kill(-pid, SIGKILL);
        break;
      }
      spdlog::warn("ha_callout {} {} still running after {} ms: terminated",
                   LogValue(options_.program), LogValue(Joined(run.arguments)),
                   options_.timeout.count());
      ::kill(-pid, SIGTERM);
      terminated = true;
      deadline = std::chrono::steady_clock::now() + kTermGrace;
      continue;
    }
    if (pidfd < 0) {
      // No pidfd (a kernel before 5.3): poll the child every 10 ms.
      if (::waitpid(pid, &status, WNOHANG) == pid) {
        reaped = true;
        break;
      }
      ::usleep(10'000);
      continue;
    }
    pollfd fds[2] = {{pidfd, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    const int ready = ::poll(fds, 2, MillisUntil(deadline));
    if (ready > 0 && (fds[0].revents & POLLIN) != 0) break;
    if (ready > 0 && (fds[1].revents & POLLIN) != 0) {
      uint64_t value = 0;
      (void)!::read(wake_fd_, &value, sizeof value);
    }
  }
  while (!reaped && ::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (pidfd >= 0) ::close(pidfd);
  if (terminated) {
    run.end = CalloutRun::End::kKilled;
  } else if (WIFEXITED(status)) {
    run.exit_status = WEXITSTATUS(status);
    if (run.exit_status != 0) {
      spdlog::info("ha_callout {} {} exited with status {}", LogValue(options_.program),
                   LogValue(Joined(run.arguments)), run.exit_status);
    }
  } else if (WIFSIGNALED(status)) {
    run.exit_status = 128 + WTERMSIG(status);
    spdlog::warn("ha_callout {} {} killed by signal {}", LogValue(options_.program),
                 LogValue(Joined(run.arguments)), WTERMSIG(status));
  }
  return run;
}

}  // namespace nlockd::server
