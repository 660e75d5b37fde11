// SPDX-License-Identifier: Apache-2.0
#include "store/testing/crash_test_util.hpp"

#include <set>
#include <vector>

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "store/open_store.hpp"
#include "store/testing/store_test_util.hpp"

namespace nlockd::store::testutil {
namespace {

// How long the child may go without acknowledging anything before the test gives up on it.
constexpr int kStallMillis = 30000;

}  // namespace

namespace {

void RunCrashTestOf(const std::string& uri, int min_acks, bool locks) {
  const std::string node = UniqueNodeId("crash");
  std::string child = NLOCKD_STORE_CRASH_CHILD;
  std::string uri_arg = uri;
  std::string node_arg = node;
  std::string locks_arg = "locks";
  std::vector<char*> argv{child.data(), uri_arg.data(), node_arg.data(), nullptr, nullptr};
  if (locks) argv[3] = locks_arg.data();

  int fds[2];
  ASSERT_EQ(pipe2(fds, O_CLOEXEC), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {  // only async-signal-safe calls until exec
    dup2(fds[1], STDOUT_FILENO);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(fds[1]);

  std::set<int> acknowledged;
  std::string pending;
  bool killed = false;
  for (;;) {
    pollfd readable{fds[0], POLLIN, 0};
    const int ready = poll(&readable, 1, kStallMillis);
    if (ready == 0) {
      ADD_FAILURE() << "store_crash_child stalled after " << acknowledged.size() << " acks";
      kill(pid, SIGKILL);
      killed = true;
      continue;
    }
    char buffer[4096];
    const ssize_t n = read(fds[0], buffer, sizeof buffer);
    if (n <= 0) {
      break;  // the child is dead and everything it wrote is read
    }
    pending.append(buffer, static_cast<size_t>(n));
    for (size_t end = pending.find('\n'); end != std::string::npos; end = pending.find('\n')) {
      acknowledged.insert(std::stoi(pending.substr(0, end)));
      pending.erase(0, end + 1);
    }
    if (!killed && acknowledged.size() >= static_cast<size_t>(min_acks)) {
      kill(pid, SIGKILL);  // mid-load: more writes are queued and in flight
      killed = true;
    }
  }
  close(fds[0]);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
      << "store_crash_child exited by itself (status " << status << "); see its stderr";
  ASSERT_GE(acknowledged.size(), static_cast<size_t>(min_acks));

  StoreOptions options;
  options.node_id = node;
  options.boot_id = "crash-test-boot";
  std::unique_ptr<Store> store = OpenStore(uri, options);
  EXPECT_FALSE(store->startup().previous_run_clean);
  EXPECT_TRUE(store->startup().lock_table_complete);  // same boot
  std::set<std::string> stored;
  const LoadedState loaded = store->LoadAll();
  for (const Registration& r : loaded.registrations) {
    stored.insert(r.mon_name);
  }
  for (const LockRecord& l : loaded.locks) {
    stored.insert("host-" + std::to_string(l.offset));
  }
  size_t missing = 0;
  for (int id : acknowledged) {
    if (stored.count("host-" + std::to_string(id)) == 0) {
      ++missing;
    }
  }
  EXPECT_EQ(missing, 0U) << "of " << acknowledged.size() << " acknowledged writes";
  EXPECT_GE(stored.size(), acknowledged.size());
  ::testing::Test::RecordProperty("acknowledged", static_cast<int>(acknowledged.size()));
  ::testing::Test::RecordProperty("stored", static_cast<int>(stored.size()));
}

}  // namespace

void RunCrashTest(const std::string& uri, int min_acks) { RunCrashTestOf(uri, min_acks, false); }

void RunLockCrashTest(const std::string& uri, int min_acks) { RunCrashTestOf(uri, min_acks, true); }

StoreChild::~StoreChild() {
  if (pid > 0) KillNine();
  if (out >= 0) close(out);
  if (err >= 0) close(err);
}

void StoreChild::KillNine() {
  if (pid <= 0) return;
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  pid = -1;
}

bool StoreChild::AwaitFirstAck() const {
  pollfd readable{out, POLLIN, 0};
  if (poll(&readable, 1, kStallMillis) <= 0) return false;
  char c = 0;
  return read(out, &c, 1) == 1;
}

int StoreChild::AwaitExit(std::string* stderr_text) {
  char buffer[4096];
  for (;;) {
    const ssize_t n = read(err, buffer, sizeof buffer);
    if (n <= 0) break;
    stderr_text->append(buffer, static_cast<size_t>(n));
  }
  int status = 0;
  waitpid(pid, &status, 0);
  pid = -1;
  return status;
}

void StartStoreChild(const std::string& uri, const std::string& node, StoreChild& child) {
  std::string program = NLOCKD_STORE_CRASH_CHILD;
  std::string uri_arg = uri;
  std::string node_arg = node;
  std::vector<char*> argv{program.data(), uri_arg.data(), node_arg.data(), nullptr};
  int out[2];
  int err[2];
  ASSERT_EQ(pipe2(out, O_CLOEXEC), 0);
  ASSERT_EQ(pipe2(err, O_CLOEXEC), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {  // only async-signal-safe calls until exec
    dup2(out[1], STDOUT_FILENO);
    dup2(err[1], STDERR_FILENO);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(out[1]);
  close(err[1]);
  child.pid = pid;
  child.out = out[0];
  child.err = err[0];
}

}  // namespace nlockd::store::testutil
