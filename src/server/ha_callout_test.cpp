// SPDX-License-Identifier: Apache-2.0
#include "server/ha_callout.hpp"

#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil/temp_dir.hpp"

namespace nlockd::server {
namespace {

namespace fs = std::filesystem;

// The runs the callout reported, for a test to wait on (an event, not a sleep).
class Runs {
 public:
  void Add(const CalloutRun& run) {
    {
      std::lock_guard lock(mutex_);
      runs_.push_back(run);
    }
    changed_.notify_all();
  }
  std::vector<CalloutRun> WaitFor(size_t count) {
    std::unique_lock lock(mutex_);
    changed_.wait_for(lock, std::chrono::seconds(20), [&] { return runs_.size() >= count; });
    return runs_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<CalloutRun> runs_;
};

class HaCalloutTest : public ::testing::Test {
 protected:
  // An executable shell script in the test's directory.
  std::string Script(const std::string& name, const std::string& body) {
    fs::path path = dir_ / name;
    std::ofstream(path) << "#!/bin/sh\n" << body;
    ::chmod(path.c_str(), 0755);
    return path.string();
  }
  std::string Recorded() {
    std::ifstream in(dir_ / "calls");
    std::ostringstream out;
    out << in.rdbuf();
    return out.str();
  }

  testutil::TempDir temp_dir_{"ha-callout"};
  const fs::path dir_{temp_dir_.path()};
  Runs runs_;
};

TEST_F(HaCalloutTest, RunsTheProgramWithStatdsArgumentsInOrder) {
  const std::string recorder = Script("record", "echo \"$0|$*|$(cat)\" | sed 's|^.*/||' >> " +
                                                    (dir_ / "calls").string() + "\nexit 3\n");
  HaCallout callout(HaCalloutOptions{recorder}, [this](const CalloutRun& run) { runs_.Add(run); });
  callout.AddClient("client.example", "server");
  callout.SmNotify("client.example", "10.0.0.7", 5);
  callout.DelClient("client.example", "server");
  auto runs = runs_.WaitFor(3);
  ASSERT_EQ(runs.size(), 3U);
  EXPECT_EQ(runs[0].end, CalloutRun::End::kExited);
  EXPECT_EQ(runs[0].exit_status, 3);
  // Standard input is empty: `cat` reads nothing.
  EXPECT_EQ(Recorded(),
            "record|add-client client.example server|\n"
            "record|sm-notify client.example 10.0.0.7 5|\n"
            "record|del-client client.example server|\n");
}

TEST_F(HaCalloutTest, AHangingCalloutIsKilledAndTheNextEventsStillRun) {
  // Ignores SIGTERM, so only SIGKILL ends it.
  const std::string hang =
      Script("hang", "trap '' TERM\necho \"$*\" >> " + (dir_ / "calls").string() + "\nsleep 600\n");
  HaCalloutOptions options{hang};
  options.timeout = std::chrono::milliseconds(200);
  HaCallout callout(options, [this](const CalloutRun& run) { runs_.Add(run); });
  const auto begin = std::chrono::steady_clock::now();
  callout.AddClient("a.example", "server");
  callout.AddClient("b.example", "server");
  auto runs = runs_.WaitFor(2);
  ASSERT_EQ(runs.size(), 2U);
  EXPECT_EQ(runs[0].end, CalloutRun::End::kKilled);
  EXPECT_EQ(runs[1].end, CalloutRun::End::kKilled);
  EXPECT_EQ(runs[1].arguments, (std::vector<std::string>{"add-client", "b.example", "server"}));
  // Each: the timeout, then a second's grace after SIGTERM.
  EXPECT_LT(std::chrono::steady_clock::now() - begin, std::chrono::seconds(5));
  EXPECT_EQ(Recorded(), "add-client a.example server\nadd-client b.example server\n");
}

// Whether process `pid` is gone (or a zombie nobody reaped yet: it runs no more).
bool Ended(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string fields;
  if (!std::getline(stat, fields)) return true;
  const size_t end_of_name = fields.rfind(')');
  return end_of_name != std::string::npos && end_of_name + 2 < fields.size() &&
         fields[end_of_name + 2] == 'Z';
}

TEST_F(HaCalloutTest, AnOverrunEndsWhatTheCalloutStartedToo) {
  // The script's `sleep` would otherwise outlive it (and, holding the daemon's standard output,
  // keep whatever reads it waiting).
  const std::string child_file = (dir_ / "child").string();
  const std::string hang = Script("hang", "sleep 600 &\necho $! > " + child_file + "\nwait\n");
  HaCalloutOptions options{hang};
  options.timeout = std::chrono::milliseconds(200);
  HaCallout callout(options, [this](const CalloutRun& run) { runs_.Add(run); });
  callout.AddClient("a.example", "server");
  auto runs = runs_.WaitFor(1);
  ASSERT_EQ(runs.size(), 1U);
  EXPECT_EQ(runs[0].end, CalloutRun::End::kKilled);
  pid_t child = 0;
  std::ifstream(child_file) >> child;
  ASSERT_GT(child, 0);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!Ended(child) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(Ended(child)) << "the callout's sleep " << child << " still runs";
  if (!Ended(child)) ::kill(child, SIGKILL);
}

TEST_F(HaCalloutTest, PastTheQueueLimitEventsAreDropped) {
  const std::string hang = Script("hang", "sleep 600\n");
  HaCalloutOptions options{hang};
  options.max_queued = 2;
  HaCallout callout(options, [this](const CalloutRun& run) { runs_.Add(run); });
  for (int i = 0; i < 10; ++i) callout.AddClient("host" + std::to_string(i), "server");
  // One runs (hanging), two wait; the rest were dropped.
  EXPECT_GE(callout.dropped(), 7U);
  // Stop's wait ends the run in progress (SIGTERM, which sleep obeys) and drops the rest.
  const auto begin = std::chrono::steady_clock::now();
  callout.Stop(std::chrono::milliseconds(300));
  EXPECT_LT(std::chrono::steady_clock::now() - begin, std::chrono::seconds(3));
  auto runs = runs_.WaitFor(1);
  ASSERT_EQ(runs.size(), 1U);
  EXPECT_EQ(runs[0].end, CalloutRun::End::kKilled);
}

TEST_F(HaCalloutTest, AProgramThatCannotRunIsReported) {
  HaCallout callout(HaCalloutOptions{(dir_ / "absent").string()},
                    [this](const CalloutRun& run) { runs_.Add(run); });
  callout.DelClient("a.example", "server");
  auto runs = runs_.WaitFor(1);
  ASSERT_EQ(runs.size(), 1U);
  EXPECT_EQ(runs[0].end, CalloutRun::End::kNotStarted);
}

TEST_F(HaCalloutTest, StopRunsWhatIsQueuedWithinItsWait) {
  const std::string recorder = Script("record", "echo \"$*\" >> " + (dir_ / "calls").string());
  HaCallout callout(HaCalloutOptions{recorder});
  callout.AddClient("a.example", "server");
  callout.DelClient("a.example", "server");
  callout.Stop(std::chrono::seconds(10));
  EXPECT_EQ(Recorded(), "add-client a.example server\ndel-client a.example server\n");
  callout.AddClient("late.example", "server");  // after Stop: ignored
}

}  // namespace
}  // namespace nlockd::server
