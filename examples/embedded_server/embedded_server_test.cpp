// SPDX-License-Identifier: Apache-2.0
// embedded_server end to end: client hosts in network namespaces talk to the example host on
// its one port (4045, TCP and UDP) only, through rpcgen's NLM clients, Debian's sm-notify and
// the toy file client. NLM and NSM reach libnlockd through the host's transport, so this checks
// the embedding API the way an NFS server uses it: lock, conflict, a blocked lock granted by
// callback, a client reboot, a removed file losing its locks, a restart with reclaim, and a
// client pipelining far past the host's limit of calls in flight on one connection.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "integration/test_hosts.hpp"
#include "testutil/netns.hpp"
#include "testutil/temp_dir.hpp"

namespace example {
namespace {

using nlockd::integration::TestHosts;
constexpr auto kWait = std::chrono::seconds(30);

using nlockd::testutil::TempDir;

class EmbeddedServer : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!nlockd::testutil::NetNamespace::Available()) GTEST_SKIP() << "needs root and ip netns";
    hosts_ = std::make_unique<TestHosts>(EMBEDDED_SERVER_BINARY, "emb", 193, 2);
  }

  bool Start(std::vector<std::string> args) {
    args.insert(args.end(), {"--admin-listen", "off", "--granted-callback", "sync"});
    return hosts_->StartNlockd(args);
  }

  // One NLM operation of nlm_client on client host `client` (the server's port through its
  // rpcbind, where libnlockd registered NLM at the host's port).
  std::string Nlm(int client, const std::string& operation) {
    auto [status, lines] = hosts_->Run(
        client, {NLM_CLIENT_BINARY, "--server", hosts_->ServerAddressOf(client), operation});
    EXPECT_EQ(status, 0) << ::testing::PrintToString(lines);
    return lines.empty() ? "(no output)" : lines.back();
  }

  std::string FileCall(int client, const std::string& verb, const std::string& name) {
    auto [status, lines] = hosts_->Run(
        client, {TOY_FILE_CLIENT_BINARY, hosts_->ServerAddressOf(client), "4045", verb, name});
    EXPECT_EQ(status, 0) << ::testing::PrintToString(lines);
    return lines.empty() ? "(no output)" : lines.back();
  }

  // The handle the host's own program gives for `name` ("fh=..." -> "...").
  std::string Lookup(int client, const std::string& name) {
    std::string line = FileCall(client, "lookup", name);
    return line.rfind("fh=", 0) == 0 ? line.substr(3) : line;
  }

  // Client `client` reboots: its statd records say it monitored the server; sm-notify, as at
  // boot, tells the server's status monitor (libnlockd's NSM, on the host's port).
  void RebootNotify(int client, int32_t state) {
    const std::string dir = state_dir_.path() + "/client" + std::to_string(client);
    auto [status, lines] = hosts_->Run(
        client,
        nlockd::integration::PrepareRebootNotify(dir, hosts_->ServerAddressOf(client),
                                                 "client" + std::to_string(client), state),
        std::chrono::seconds(90));
    EXPECT_EQ(status, 0) << ::testing::PrintToString(lines);
  }

  TempDir state_dir_;
  std::unique_ptr<TestHosts> hosts_;
};

TEST_F(EmbeddedServer, LocksConflictsACallbackGrantARebootAndARemovedFile) {
  ASSERT_TRUE(Start({}));
  auto* callbacks = hosts_->Start(2, {NLM_CALLBACK_SERVER_BINARY});
  ASSERT_TRUE(callbacks->WaitForLine(std::regex(R"(^ready udp=\d+ tcp=\d+)"), kWait))
      << callbacks->output();

  // File handles come from the host's own program on the same port.
  const std::string f = Lookup(1, "report.txt");
  const std::string g = Lookup(2, "notes.txt");
  ASSERT_EQ(f.rfind("fh-", 0), 0u) << f;
  EXPECT_EQ(Lookup(2, "report.txt"), f);

  const std::string c1 = "caller=client1 svid=1 oh=1@client1 state=1";
  const std::string c2 = "caller=client2 svid=2 oh=2@client2 state=1";
  EXPECT_EQ(Nlm(1, "lock fh=" + f + " " + c1 + " offset=0 length=10"), "lock stat=granted");
  EXPECT_EQ(Nlm(2, "lock fh=" + f + " " + c2 + " offset=5 length=10"), "lock stat=denied");
  EXPECT_EQ(Nlm(2, "lock fh=" + f + " " + c2 + " offset=5 length=10 block=1"), "lock stat=blocked");

  // Client 1 reboots: its lock goes, and client 2's blocked lock is granted by callback.
  RebootNotify(1, 3);
  auto granted = callbacks->WaitForLine(std::regex(R"(^GRANTED .* svid=(\d+) )"), kWait);
  ASSERT_TRUE(granted) << callbacks->output() << hosts_->nlockd().process().output();
  EXPECT_EQ((*granted)[1].str(), "2");
  EXPECT_TRUE(hosts_->nlockd().process().WaitForLine(
      std::regex(R"(event: host \S+ rebooted \(state 3\), 1 locks released)"), kWait))
      << hosts_->nlockd().process().output();
  EXPECT_EQ(Nlm(1, "test fh=" + f + " caller=client1 svid=9 oh=9@client1 offset=0 length=4"),
            "test stat=granted");

  // Removing a file through the host's program drops the locks on it.
  EXPECT_EQ(Nlm(2, "lock fh=" + g + " " + c2 + " offset=0 length=0"), "lock stat=granted");
  EXPECT_EQ(Nlm(1, "test fh=" + g + " " + c1 + " offset=0 length=1"),
            "test stat=denied holder_svid=2 holder_oh=2@client2 holder_offset=0 holder_length=0 "
            "holder_exclusive=1");
  EXPECT_EQ(FileCall(1, "remove", "notes.txt"), "released=1");
  EXPECT_EQ(Nlm(1, "lock fh=" + g + " " + c1 + " offset=0 length=1"), "lock stat=granted");
  EXPECT_EQ(hosts_->nlockd().Stop(), 0) << hosts_->nlockd().process().output();
}

TEST_F(EmbeddedServer, ARestartRestoresTheLocksAndGraceWaitsForTheirReclaim) {
  TempDir store_dir;
  const std::string store = "sqlite:" + store_dir.path() + "/nlockd.db";
  ASSERT_TRUE(Start({"--store", store}));
  const std::string f = Lookup(1, "data.bin");
  const std::string c1 = "caller=client1 svid=1 oh=1@client1 state=1";
  const std::string c2 = "caller=client2 svid=2 oh=2@client2 state=1";
  EXPECT_EQ(Nlm(1, "lock fh=" + f + " " + c1 + " offset=0 length=100"), "lock stat=granted");
  EXPECT_EQ(hosts_->nlockd().Stop(), 0) << hosts_->nlockd().process().output();

  // Same host, clean stop: the persisted table is complete, so grace is fine-grained.
  ASSERT_TRUE(Start({"--store", store, "--grace", "60"}));
  // Reported by Start(), before the host logs that it listens.
  EXPECT_TRUE(std::regex_search(hosts_->nlockd().process().output(),
                                std::regex(R"(event: grace started \(fine-grained\))")))
      << hosts_->nlockd().process().output();
  // Client 1's restored lock still blocks client 2 until reclaimed (or grace ends).
  EXPECT_EQ(Nlm(2, "lock fh=" + f + " " + c2 + " offset=50 length=10"),
            "lock stat=denied_grace_period");
  EXPECT_EQ(Nlm(1, "lock fh=" + f + " " + c1 + " offset=0 length=100 reclaim=1"),
            "lock stat=granted");
  // Everything restored was reclaimed: grace ends early, and the lock still conflicts.
  EXPECT_TRUE(hosts_->nlockd().process().WaitForLine(
      std::regex(R"(event: grace ended \(all-reclaimed\))"), kWait))
      << hosts_->nlockd().process().output();
  EXPECT_EQ(Nlm(2, "lock fh=" + f + " " + c2 + " offset=50 length=10"), "lock stat=denied");
  EXPECT_EQ(hosts_->nlockd().Stop(), 0) << hosts_->nlockd().process().output();
}

TEST_F(EmbeddedServer, AClientPipeliningFarMoreCallsThanTheLimitGetsEveryReply) {
  // The client sends 400 000 calls (24 MB) on one connection and reads nothing until the host
  // stops taking them. The host stops reading at 128 calls whose replies are unwritten, so it
  // takes only what the sockets' buffers hold before the client reads (about 10 MB at most with
  // Linux's default limits); without the limit it would read, and queue the replies of, all
  // of them. Every call must still be answered once, correctly.
  ASSERT_TRUE(Start({}));
  auto [status, lines] = hosts_->Run(
      1, {TOY_FILE_CLIENT_BINARY, hosts_->ServerAddressOf(1), "4045", "pipeline", "400000"},
      std::chrono::seconds(120));
  ASSERT_EQ(status, 0) << ::testing::PrintToString(lines);
  ASSERT_FALSE(lines.empty());
  std::smatch match;
  ASSERT_TRUE(
      std::regex_search(lines.back(), match,
                        std::regex(R"(^replies=400000 sent_before_reading=(\d+) of (\d+) bytes)")))
      << lines.back();
  EXPECT_LT(std::stoull(match[1].str()), std::stoull(match[2].str()) / 2) << lines.back();
  EXPECT_EQ(hosts_->nlockd().Stop(), 0) << hosts_->nlockd().process().output();
}

}  // namespace
}  // namespace example
