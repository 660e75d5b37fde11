// SPDX-License-Identifier: Apache-2.0
// A client host that names another one, against the real nlockd keyed by caller_name: client
// host 2 sends client host 1's caller_name, owner handles and svids. It must not be granted a
// lock as host 1, nor unlock, cancel or unshare what host 1 holds: nlockd keys a host by its
// name and its address together, as Linux lockd does.
#include <chrono>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "integration/test_hosts.hpp"

namespace nlockd::integration {
namespace {

class HostIdentity : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testutil::NetNamespace::Available()) GTEST_SKIP() << "needs root and ip netns";
    testutil::NetNamespace::RemoveStale();
    hosts_ = std::make_unique<TestHosts>(NLOCKD_BINARY, "hid", 194, 2);
  }

  // Runs nlm_client operations on `client` (NLM version 4 over UDP): one answer line each.
  std::vector<std::string> Run(int client, const std::vector<std::string>& operations) {
    std::vector<std::string> argv{NLM_CLIENT_BINARY, "--server", hosts_->ServerAddressOf(client),
                                  "--version", "4"};
    argv.insert(argv.end(), operations.begin(), operations.end());
    auto [status, lines] = hosts_->Run(client, argv);
    EXPECT_EQ(status, 0) << ::testing::PrintToString(lines);
    return lines;
  }

  std::unique_ptr<TestHosts> hosts_;
};

// Client host 1's own lock operation `verb` for owner `svid`, as either host may send it.
std::string AsHost1(const std::string& verb, int svid, const std::string& extra = "") {
  const std::string op = verb + " fh=f caller=client1 svid=" + std::to_string(svid) +
                         " oh=" + std::to_string(svid) + "@client1 offset=0 length=10";
  return extra.empty() ? op : op + " " + extra;
}

const std::string kHost1Share = "fh=g caller=client1 oh=s1 mode=2 access=1";  // Denies writes.

TEST_F(HostIdentity, AnotherAddressSendingAHostsCallerNameCannotActForIt) {
  ASSERT_TRUE(hosts_->StartNlockd({"--nlm-host-key", "caller_name"}));
  testutil::Subprocess* callbacks =
      hosts_->Start(1, {NLM_CALLBACK_SERVER_BINARY});  // Host 1's NLM, for its GRANTED_MSG.
  ASSERT_TRUE(
      callbacks->WaitForLine(std::regex(R"(^ready udp=\d+ tcp=\d+)"), std::chrono::seconds(20)))
      << callbacks->output();
  EXPECT_EQ(Run(1, {AsHost1("lock", 1), AsHost1("lock", 2, "block=1"), "share " + kHost1Share}),
            (std::vector<std::string>{"lock stat=granted", "lock stat=blocked",
                                      "share stat=granted sequence=0"}));

  // Host 2 asks for host 1's own exclusive lock as host 1, then undoes everything host 1 has.
  EXPECT_EQ(Run(2, {AsHost1("lock", 1)}), std::vector<std::string>{"lock stat=denied"})
      << "granted as host 1 on host 1's own range";
  Run(2, {AsHost1("unlock", 1), AsHost1("cancel", 2, "block=1"), "unshare " + kHost1Share});

  // What host 1 holds is still there, as host 2 sees it under its own name.
  EXPECT_EQ(Run(2, {"test fh=f caller=client2 svid=9 oh=9@client2 offset=0 length=1",
                    "share fh=g caller=client2 oh=s2 mode=0 access=2"}),
            (std::vector<std::string>{"test stat=denied holder_svid=1 holder_oh=1@client1 "
                                      "holder_offset=0 holder_length=10 holder_exclusive=1",
                                      "share stat=denied sequence=0"}));
  // Host 1's waiter is still queued: its own unlock grants it, to host 1.
  EXPECT_EQ(Run(1, {AsHost1("unlock", 1)}), std::vector<std::string>{"unlock stat=granted"});
  auto granted =
      callbacks->WaitForLine(std::regex("^GRANTED_MSG .* svid=(\\d+) "), std::chrono::seconds(20));
  ASSERT_TRUE(granted) << callbacks->output() << hosts_->nlockd().process().output();
  EXPECT_EQ((*granted)[1].str(), "2");
  EXPECT_EQ(hosts_->nlockd().Stop(), 0);
}

}  // namespace
}  // namespace nlockd::integration
