// SPDX-License-Identifier: Apache-2.0
// nlockd in rpc.statd's place and back, with Debian's own rpc.statd and sm-notify (nfs-common)
// on the same state directory. On the server host: rpc.statd (or nlockd --serve nsm with
// --statd-state-directory) and a local lock manager (nsm_status_server as program 100021,
// procedure 16, the kernel lockd's callback). Client host 1 plays the monitored NFS client.
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
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

namespace fs = std::filesystem;

constexpr auto kWait = std::chrono::seconds(30);
constexpr int kClient = 1;

using testutil::TempDir;

int32_t ReadState(const std::string& file) {
  int32_t state = 0;
  std::ifstream(file, std::ios::binary).read(reinterpret_cast<char*>(&state), sizeof state);
  return state;
}

void WriteState(const std::string& file, int32_t state) {
  std::ofstream(file, std::ios::binary).write(reinterpret_cast<const char*>(&state), sizeof state);
}

std::string ReadFile(const std::string& file) {
  std::ifstream in(file);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

class StatdHandover : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testutil::NetNamespace::Available()) GTEST_SKIP() << "needs root and ip netns";
    hosts_ = std::make_unique<NsmHosts>(1);
    // Root owns the directory, so statd and sm-notify keep running as root.
    fs::create_directory(statd_dir_.path() + "/sm");
    fs::create_directory(statd_dir_.path() + "/sm.bak");
    // nlockd looks for statd's pid files here (every test process has a /run of its own).
    setenv("NLOCKD_STATD_RUN_DIR", run_dir_.path().c_str(), 1);
    // An ha_callout that records its arguments.
    callout_ = nlockd_dir_.path() + "/callout";
    std::ofstream(callout_) << "#!/bin/sh\necho \"$*\" >> " << nlockd_dir_.path()
                            << "/callout.log\n";
    fs::permissions(callout_, fs::perms::owner_all);
  }

  std::string CalloutLog() const { return ReadFile(nlockd_dir_.path() + "/callout.log"); }
  void TearDown() override { unsetenv("NLOCKD_STATD_RUN_DIR"); }

  // The server host's status monitor answers NULL through its rpcbind (or stopped answering).
  bool WaitForStatusMonitor(bool up) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < deadline) {
      const bool answers =
          hosts_->RunOnServer({"rpcinfo", "-T", "udp", "127.0.0.1", "100024", "1"}).first == 0;
      if (answers == up) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

  // Calls the server host's status monitor from its loopback, as its lock manager does.
  std::vector<std::string> OnServer(const std::vector<std::string>& operations) {
    return hosts_->CallLocalMonitor(NSM_CLIENT_BINARY, NsmHosts::kServerHost, operations);
  }

  int32_t StatOnServer() {
    // rpc.statd answers stat_fail for a name it cannot resolve, with its state all the same.
    return NsmHosts::StateOf(OnServer({"stat name=127.0.0.1"}));
  }

  std::vector<std::string> NlockdArgs() const {
    return {"--statd-ha-callout",
            callout_,
            "--serve",
            "nsm",
            "--store",
            "sqlite:" + nlockd_dir_.path() + "/nlockd.db",
            "--name",
            NsmHosts::ServerAddress(kClient),
            "--statd-state-directory",
            statd_dir_.path()};
  }

  TempDir statd_dir_;
  TempDir nlockd_dir_;
  TempDir run_dir_;
  std::string callout_;
  std::unique_ptr<NsmHosts> hosts_;
};

// rpc.statd records a registration and is stopped on the same boot; nlockd takes its place on
// that directory: the registration (my_id and priv) is nlockd's, the host in sm.bak/ is owed a
// notification, the state number is statd's, and nobody is told of a reboot.
TEST_F(StatdHandover, NlockdTakesOverWhatDebiansStatdRecorded) {
  const std::string client = NsmHosts::ClientAddress(kClient);
  WriteState(statd_dir_.path() + "/state", 41);
  // A host sm-notify did not reach before the switch.
  std::ofstream(statd_dir_.path() + "/sm.bak/10.198.1.99")
      << "0100007f 000186b5 00000004 00000010 " << std::string(32, '0')
      << " 10.198.1.99 server-node\n";
  auto* statd = hosts_->StartOnServer({"rpc.statd", "-F", "-L", "-d", "-P", statd_dir_.path()});
  ASSERT_TRUE(WaitForStatusMonitor(true)) << statd->output();
  auto mon =
      OnServer({"mon name=" + client + " my_name=server-node prog=100021 vers=4 proc=16 priv0=42"});
  ASSERT_EQ(mon, std::vector<std::string>{"mon res=succ state=41"}) << statd->output();
  ASSERT_TRUE(fs::exists(statd_dir_.path() + "/sm/" + client)) << statd->output();
  ASSERT_TRUE(statd->Stop(SIGTERM, kWait).has_value());
  ASSERT_TRUE(WaitForStatusMonitor(false));
  std::ofstream(run_dir_.path() + "/rpc.statd.pid");  // statd leaves it, emptied, until reboot

  auto* callbacks = hosts_->StartOnServer({NSM_STATUS_SERVER_BINARY, "100021", "4"});
  ASSERT_TRUE(callbacks->WaitForLine(std::regex("^ready udp="), kWait)) << callbacks->output();
  ASSERT_TRUE(hosts_->StartNlockd(NlockdArgs()));
  const std::string& log = hosts_->nlockd().process().output();
  EXPECT_TRUE(std::regex_search(log, std::regex("took over rpc.statd's files in \\S+: 1 "
                                                "registrations, 1 hosts owed a notification, "
                                                "state 41; statd ran on this boot")))
      << log;
  EXPECT_EQ(StatOnServer(), 41);
  EXPECT_TRUE(fs::exists(statd_dir_.path() + "/nlockd.held"));
  EXPECT_EQ(ReadState(statd_dir_.path() + "/state"), 41);

  // The client reboots: nlockd calls the lock manager back with statd's priv.
  auto [status, lines] =
      hosts_->Run(kClient, {NSM_CLIENT_BINARY, "--server", NsmHosts::ServerAddress(kClient),
                            "notify name=" + client + " state=7"});
  EXPECT_EQ(status, 0) << ::testing::PrintToString(lines);
  auto callback = callbacks->WaitForLine(
      std::regex("^STATUS proc=16 mon_name=" + client + " state=7 priv0=42"), kWait);
  EXPECT_TRUE(callback) << callbacks->output() << "--- nlockd:\n" << log;
  ASSERT_EQ(hosts_->nlockd().Stop(), 0);
  EXPECT_EQ(CalloutLog(), "sm-notify " + client + " " + client + " 7\n");
}

// nlockd monitors a host for the lock manager and stops cleanly: sm/ and state are statd's
// again, and Debian's sm-notify, run on them as at the next boot, tells the client's statd of
// a newer odd state, which calls the client's lock manager back.
TEST_F(StatdHandover, StatdAndSmNotifyContinueFromWhatNlockdGaveBack) {
  const std::string server = NsmHosts::ServerAddress(kClient);
  const std::string client = NsmHosts::ClientAddress(kClient);
  ASSERT_TRUE(hosts_->StartNlockd(NlockdArgs()));
  const int32_t served = StatOnServer();
  EXPECT_EQ(served % 2, 1);
  EXPECT_EQ(ReadState(statd_dir_.path() + "/state"), served);  // kept current while running
  ASSERT_EQ(OnServer({"mon name=" + client + " my_name=" + server +
                      " prog=100021 vers=4 proc=16 priv0=9"})
                .at(0)
                .substr(0, 12),
            "mon res=succ");
  ASSERT_EQ(hosts_->nlockd().Stop(), 0);
  // The callout ran for the SM_MON (a clean stop runs what is queued).
  EXPECT_EQ(CalloutLog(), "add-client " + client + " " + server + "\n");
  EXPECT_FALSE(fs::exists(statd_dir_.path() + "/nlockd.held"));
  EXPECT_EQ(ReadState(statd_dir_.path() + "/state"), served);
  EXPECT_NE(ReadFile(statd_dir_.path() + "/sm/" + client).find(" " + client + " " + server + "\n"),
            std::string::npos);

  // Debian's rpc.statd starts on the files and continues with the same state.
  auto* statd = hosts_->StartOnServer({"rpc.statd", "-F", "-L", "-d", "-P", statd_dir_.path()});
  ASSERT_TRUE(WaitForStatusMonitor(true)) << statd->output();
  EXPECT_EQ(StatOnServer(), served);
  ASSERT_TRUE(statd->Stop(SIGTERM, kWait).has_value());

  // The client's statd monitors the server for the client's lock manager.
  auto* client_callbacks = hosts_->Start(kClient, {NSM_STATUS_SERVER_BINARY, "100021", "4"});
  ASSERT_TRUE(client_callbacks->WaitForLine(std::regex("^ready udp="), kWait));
  TempDir client_statd_dir;
  fs::create_directory(client_statd_dir.path() + "/sm");
  fs::create_directory(client_statd_dir.path() + "/sm.bak");
  auto* client_statd =
      hosts_->Start(kClient, {"rpc.statd", "-F", "-L", "-d", "-P", client_statd_dir.path()});
  auto started = std::chrono::steady_clock::now();
  while (hosts_->Run(kClient, {"rpcinfo", "-T", "udp", "127.0.0.1", "100024", "1"}).first != 0) {
    ASSERT_LT(std::chrono::steady_clock::now() - started, kWait) << client_statd->output();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  auto [status, mon] = hosts_->Run(
      kClient, {NSM_CLIENT_BINARY, "--server", "127.0.0.1",
                "mon name=" + server + " my_name=127.0.0.1 prog=100021 vers=4 proc=16 priv0=5"});
  ASSERT_EQ(status, 0) << ::testing::PrintToString(mon);

  // The next boot's sm-notify on the server's files.
  auto [notified, notify_lines] =
      hosts_->RunOnServer({"sm-notify", "-d", "-P", statd_dir_.path(), "-m", "1"});
  EXPECT_EQ(notified, 0) << ::testing::PrintToString(notify_lines);
  auto callback = client_callbacks->WaitForLine(
      std::regex("^STATUS proc=16 mon_name=" + server + " state=(\\d+) priv0=5"), kWait);
  ASSERT_TRUE(callback) << client_callbacks->output() << "--- client statd:\n"
                        << client_statd->output() << "--- sm-notify:\n"
                        << ::testing::PrintToString(notify_lines);
  const int32_t announced = std::stoi((*callback)[1].str());
  EXPECT_EQ(announced, served + 2);
  EXPECT_EQ(ReadState(statd_dir_.path() + "/state"), served + 2);
}

}  // namespace
}  // namespace nlockd::integration
