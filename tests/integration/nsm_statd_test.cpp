// SPDX-License-Identifier: Apache-2.0
// nlockd's restart notification against Debian's rpc.statd (nfs-common) as a peer's status
// monitor: peer host P (client host 1) runs its own rpcbind, rpc.statd and a local "lock
// manager" (nsm_status_server serving program 100021, procedure 16), which asks P's statd to
// monitor nlockd's host. When nlockd restarts, or is told SM_SIMU_CRASH, its SM_NOTIFY must reach
// P's statd, and statd must call the registered callback with nlockd's new state and the priv.
#include <chrono>
#include <csignal>
#include <filesystem>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "integration/nsm_hosts.hpp"
#include "testutil/netns.hpp"
#include "testutil/temp_dir.hpp"

namespace nlockd::integration {
namespace {

constexpr auto kWait = std::chrono::seconds(30);
constexpr int kPeer = 1;

using testutil::TempDir;

class NsmStatdPeer : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testutil::NetNamespace::Available()) GTEST_SKIP() << "needs root and ip netns";
    hosts_ = std::make_unique<NsmHosts>(1);
    // The state directory is root's, so statd keeps running as root (it drops privileges to
    // the directory's owner). -L: no sm-notify at start; -F: foreground, -d: log to stderr.
    std::filesystem::create_directory(statd_dir_.path() + "/sm");
    std::filesystem::create_directory(statd_dir_.path() + "/sm.bak");
    callbacks_ = hosts_->Start(kPeer, {NSM_STATUS_SERVER_BINARY, "100021", "4"});
    ASSERT_TRUE(callbacks_->WaitForLine(std::regex("^ready udp="), kWait)) << callbacks_->output();
    statd_ = hosts_->Start(kPeer, {"rpc.statd", "-F", "-L", "-d", "-P", statd_dir_.path()});
    ASSERT_TRUE(WaitForStatd()) << statd_->output();
  }

  // rpc.statd is up once it answers NULL through P's rpcbind.
  bool WaitForStatd() {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < deadline) {
      if (hosts_->Run(kPeer, {"rpcinfo", "-T", "udp", "127.0.0.1", "100024", "1"}).first == 0) {
        return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

  // Calls P's statd from P's loopback, as P's lock manager does.
  std::vector<std::string> StatdOnPeer(const std::vector<std::string>& operations) {
    return hosts_->CallLocalMonitor(NSM_CLIENT_BINARY, kPeer, operations);
  }

  std::vector<std::string> NlockdOnServer(const std::vector<std::string>& operations) {
    return hosts_->CallLocalMonitor(NSM_CLIENT_BINARY, NsmHosts::kServerHost, operations);
  }

  int32_t NlockdState() { return NsmHosts::StateOf(NlockdOnServer({"stat name=x"})); }

  std::string Diagnostics() {
    return "--- statd:\n" + statd_->output() + "--- callbacks:\n" + callbacks_->output() +
           "--- nlockd:\n" + hosts_->nlockd().process().output();
  }

  TempDir statd_dir_;
  TempDir nlockd_dir_;
  std::unique_ptr<NsmHosts> hosts_;
  testutil::Subprocess* callbacks_ = nullptr;
  testutil::Subprocess* statd_ = nullptr;
};

// What rpc.statd 2.6.2 accepts as a registration (from loopback): any my_vers, but only NLM's
// program and procedure 16 as the callback ("Attempt to register callback to P/Q" otherwise).
TEST_F(NsmStatdPeer, StatdAcceptsOnlyNlmProcedure16AsTheCallback) {
  const std::string nlockd = NsmHosts::ServerAddress(kPeer);
  auto lines = StatdOnPeer({"mon name=" + nlockd + " my_name=127.0.0.1 prog=100021 vers=4 proc=16",
                            "mon name=" + nlockd + " my_name=127.0.0.1 prog=100021 vers=1 proc=16",
                            "mon name=" + nlockd + " my_name=127.0.0.1 prog=300100 vers=1 proc=16",
                            "mon name=" + nlockd + " my_name=127.0.0.1 prog=100021 vers=4 proc=1"});
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_TRUE(std::regex_match(lines[0], std::regex("mon res=succ state=\\d+"))) << lines[0];
  EXPECT_TRUE(std::regex_match(lines[1], std::regex("mon res=succ state=\\d+"))) << lines[1];
  EXPECT_TRUE(std::regex_match(lines[2], std::regex("mon res=fail state=-?\\d+"))) << lines[2];
  EXPECT_TRUE(std::regex_match(lines[3], std::regex("mon res=fail state=-?\\d+"))) << lines[3];
  EXPECT_TRUE(statd_->WaitForLine(std::regex("Attempt to register callback to 300100/16"), kWait))
      << statd_->output();
  EXPECT_TRUE(statd_->WaitForLine(std::regex("Attempt to register callback to 100021/1"), kWait))
      << statd_->output();
}

TEST_F(NsmStatdPeer, NlockdRestartAndSimuCrashReachStatdWhichCallsBackTheMonitor) {
  const std::string nlockd_address = NsmHosts::ServerAddress(kPeer);
  const std::string peer_address = NsmHosts::ClientAddress(kPeer);
  const std::vector<std::string> nlockd_args{
      "--store", "sqlite:" + nlockd_dir_.path() + "/nlockd.db", "--name", nlockd_address};
  ASSERT_TRUE(hosts_->StartNlockd(nlockd_args));
  // nlockd's local lock manager monitors P (by address), so nlockd will notify P's statd.
  EXPECT_EQ(NlockdOnServer({"mon name=" + peer_address}).at(0).substr(0, 12), "mon res=succ");
  // P's lock manager asks P's statd to watch nlockd's host.
  auto mon = StatdOnPeer(
      {"mon name=" + nlockd_address + " my_name=127.0.0.1 prog=100021 vers=4 proc=16 priv0=42"});
  ASSERT_EQ(mon.size(), 1u);
  ASSERT_TRUE(std::regex_match(mon[0], std::regex("mon res=succ state=\\d+"))) << mon[0];

  ASSERT_EQ(hosts_->nlockd().Stop(), 0);
  ASSERT_TRUE(hosts_->StartNlockd(nlockd_args));
  int32_t restarted = NlockdState();
  EXPECT_EQ(restarted % 2, 1);
  std::regex callback("^STATUS proc=(\\d+) mon_name=(\\S+) state=(-?\\d+) priv0=(\\d+)");
  auto first = callbacks_->WaitForLine(callback, kWait);
  ASSERT_TRUE(first) << Diagnostics();
  EXPECT_EQ((*first)[0].str(), "STATUS proc=16 mon_name=" + nlockd_address +
                                   " state=" + std::to_string(restarted) + " priv0=42");
  // The log is read from nlockd's pipe: the line may come after the callback did.
  EXPECT_TRUE(hosts_->nlockd().process().LoggedOrWaitFor(
      std::regex("nsm notifying 1 hosts of state " + std::to_string(restarted)), kWait))
      << Diagnostics();
  // The round began once rpcbind held nlockd's registrations: a peer answering at once finds it.
  const std::string& log = hosts_->nlockd().process().output();
  EXPECT_LT(log.find("programs with rpcbind"), log.find("nsm notifying")) << Diagnostics();

  // SM_SIMU_CRASH from nlockd's loopback: the next odd state goes round again.
  EXPECT_EQ(NlockdOnServer({"simu_crash"}), (std::vector<std::string>{"simu_crash ok"}));
  auto second = callbacks_->WaitForLine(callback, kWait);
  ASSERT_TRUE(second) << Diagnostics();
  EXPECT_EQ((*second)[0].str(), "STATUS proc=16 mon_name=" + nlockd_address +
                                    " state=" + std::to_string(restarted + 2) + " priv0=42");
  EXPECT_EQ(NlockdState(), restarted + 2);
  EXPECT_EQ(hosts_->nlockd().Stop(), 0);
}

// With notify.hold the restart round waits for SIGUSR2 (systemd sends it once nfsd runs), and
// goes out when the hold ends without one.
TEST_F(NsmStatdPeer, AHeldRestartNotificationGoesOutOnSigusr2OrWhenTheHoldEnds) {
  const std::string nlockd_address = NsmHosts::ServerAddress(kPeer);
  const std::string peer_address = NsmHosts::ClientAddress(kPeer);
  std::vector<std::string> args{"--store",       "sqlite:" + nlockd_dir_.path() + "/nlockd.db",
                                "--name",        nlockd_address,
                                "--notify-hold", "600"};
  ASSERT_TRUE(hosts_->StartNlockd(args));
  EXPECT_EQ(NlockdOnServer({"mon name=" + peer_address}).at(0).substr(0, 12), "mon res=succ");
  auto mon = StatdOnPeer(
      {"mon name=" + nlockd_address + " my_name=127.0.0.1 prog=100021 vers=4 proc=16 priv0=7"});
  ASSERT_TRUE(std::regex_match(mon.at(0), std::regex("mon res=succ state=\\d+"))) << mon[0];
  std::regex callback("^STATUS proc=16 mon_name=\\S+ state=(-?\\d+) priv0=7");

  ASSERT_EQ(hosts_->nlockd().Stop(), 0);
  ASSERT_TRUE(hosts_->StartNlockd(args));
  testutil::Subprocess& nlockd = hosts_->nlockd().process();
  ASSERT_TRUE(nlockd.LoggedOrWaitFor(std::regex("nsm holding the restart notification"), kWait))
      << Diagnostics();
  // Held: nlockd answers, and has sent nothing.
  const int32_t held = NlockdState();
  EXPECT_EQ(nlockd.output().find("nsm notifying"), std::string::npos) << Diagnostics();
  EXPECT_EQ(callbacks_->output().find("STATUS"), std::string::npos) << Diagnostics();
  ASSERT_EQ(kill(nlockd.pid(), SIGUSR2), 0);
  auto told = callbacks_->WaitForLine(callback, kWait);
  ASSERT_TRUE(told) << Diagnostics();
  EXPECT_EQ((*told)[1].str(), std::to_string(held));
  EXPECT_EQ(nlockd.output().find("nobody said"), std::string::npos) << Diagnostics();

  // A hold nobody ends: the round goes out when it passes.
  ASSERT_EQ(hosts_->nlockd().Stop(), 0);
  args.back() = "1";
  ASSERT_TRUE(hosts_->StartNlockd(args));
  auto late = callbacks_->WaitForLine(callback, kWait);
  ASSERT_TRUE(late) << Diagnostics();
  EXPECT_EQ((*late)[1].str(), std::to_string(NlockdState()));
  EXPECT_TRUE(hosts_->nlockd().process().LoggedOrWaitFor(
      std::regex("nobody said to send the restart notification in 1 s"), kWait))
      << Diagnostics();
  EXPECT_EQ(hosts_->nlockd().Stop(), 0);
}

}  // namespace
}  // namespace nlockd::integration
