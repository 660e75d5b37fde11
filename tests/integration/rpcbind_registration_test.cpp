// SPDX-License-Identifier: Apache-2.0
// Registration with Debian's rpcbind, as `rpcinfo` shows it: rpcbind v4 entries with netids
// and owners, a mapping another process holds left alone at start and at shutdown, and an
// rpcbind that comes up after nlockd. (rpcbind's v2-only fallback is covered against a fake
// in src/rpc/rpcbind_test.cpp: the real rpcbind cannot be made to refuse v4.)
#include <chrono>
#include <regex>
#include <string>

#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

#include "integration/nlockd_process.hpp"
#include "rpc/client.hpp"
#include "rpc/rpcbind.hpp"
#include "testutil/run_coroutine.hpp"

namespace nlockd::integration {
namespace {

using testutil::NetNamespace;
using testutil::RunCommand;
using testutil::Subprocess;

// Registration runs in a detached coroutine, so its outcome may be logged before the
// "listening" line that starting nlockd waited for (and read past): look at what was read too.
class RpcbindRegistrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!NetNamespace::Available()) GTEST_SKIP() << "needs root and ip netns";
    host_ = std::make_unique<NetNamespace>("rpcbreg");
  }

  void StartRpcbind() {
    // WrapHost: rpcbind's unix socket is shared with the libtirpc service some tests start.
    rpcbind_ = std::make_unique<Subprocess>(host_->WrapHost({"rpcbind", "-f"}));
    ASSERT_TRUE(host_->WaitForRpcbind()) << "rpcbind did not come up";
  }

  std::pair<int, std::string> Rpcinfo(std::vector<std::string> args) {
    std::vector<std::string> argv{"rpcinfo"};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunCommand(host_->WrapHost(argv));
  }

  static bool Lists(const std::string& listing, const std::string& pattern) {
    return std::regex_search(listing, std::regex(pattern));
  }
  static void ExpectListed(const std::string& listing, const std::vector<std::string>& patterns) {
    for (const auto& pattern : patterns) {
      EXPECT_TRUE(Lists(listing, pattern)) << pattern << "\n" << listing;
    }
  }

  std::unique_ptr<NetNamespace> host_;
  std::unique_ptr<Subprocess> rpcbind_;
};

TEST_F(RpcbindRegistrationTest, RpcinfoListsV4EntriesWithNetidsAndOwnerUntilShutdown) {
  StartRpcbind();
  NlockdProcess nlockd(NLOCKD_BINARY, {"--listen", "127.0.0.1:4045"}, host_.get());
  ASSERT_TRUE(nlockd.process().LoggedOrWaitFor(
      std::regex("registered 4 programs with rpcbind at 127.0.0.1:111 \\(rpcbind v4")))
      << nlockd.process().output();
  auto [rc_p, pmap] = Rpcinfo({"-p", "127.0.0.1"});
  ASSERT_EQ(rc_p, 0);
  EXPECT_TRUE(Lists(pmap, R"(100021\s+4\s+tcp\s+4045\s+nlockmgr)")) << pmap;
  EXPECT_TRUE(Lists(pmap, R"(100024\s+1\s+udp\s+4045\s+status)")) << pmap;
  // The v4 listing: netid, universal address and the owner rpcbind recorded. Over IP it
  // records "unknown" whatever the caller sends (only its unix socket tells it the uid).
  auto [rc_v4, v4] = Rpcinfo({"127.0.0.1"});
  ASSERT_EQ(rc_v4, 0);
  ExpectListed(v4, {R"(100021\s+1\s+tcp\s+0\.0\.0\.0\.15\.205\s+nlockmgr\s+unknown)",
                    R"(100021\s+3\s+udp\s+0\.0\.0\.0\.15\.205\s+nlockmgr\s+unknown)",
                    R"(100021\s+4\s+tcp\s+0\.0\.0\.0\.15\.205\s+nlockmgr\s+unknown)",
                    R"(100024\s+1\s+udp\s+0\.0\.0\.0\.15\.205\s+status\s+unknown)"});
  EXPECT_EQ(nlockd.Stop(), 0);
  auto [rc_after, after] = Rpcinfo({"127.0.0.1"});
  EXPECT_EQ(rc_after, 0);
  EXPECT_EQ(after.find("nlockmgr"), std::string::npos) << after;
  EXPECT_EQ(after.find("status"), std::string::npos) << after;
}

// The registration code itself, run on a thread inside the namespace: an IPv6 listener's
// tcp6/udp6 entries as the real rpcbind takes them.
TEST_F(RpcbindRegistrationTest, AnIpv6ListenerAddsTcp6AndUdp6) {
  StartRpcbind();
  bool registered = false;
  std::thread inside([&] {
    int fd = open(("/run/netns/" + host_->name()).c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(setns(fd, CLONE_NEWNET), 0);
    close(fd);
    asio::io_context io;
    rpc::Client client(io.get_executor());
    rpc::RpcbindRegistration registration(client);
    rpc::RpcbindListener listener{asio::ip::make_address("::"), 4045};
    std::vector<std::pair<uint32_t, uint32_t>> programs{{100021, 4}};
    registered = testutil::RunCoroutine(io, registration.Register(programs, listener));
  });
  inside.join();
  EXPECT_TRUE(registered);
  auto [rc, v4] = Rpcinfo({"127.0.0.1"});
  ASSERT_EQ(rc, 0);
  ExpectListed(v4, {R"(100021\s+4\s+tcp\s+0\.0\.0\.0\.15\.205\s+nlockmgr)",
                    R"(100021\s+4\s+udp\s+0\.0\.0\.0\.15\.205\s+nlockmgr)",
                    R"(100021\s+4\s+tcp6\s+::\.15\.205\s+nlockmgr)",
                    R"(100021\s+4\s+udp6\s+::\.15\.205\s+nlockmgr)"});
}

// A libtirpc service (registered through rpcbind's unix socket, owner "superuser") holds
// status 100024/1: nlockd registers the rest, warns, and leaves that mapping at shutdown.
TEST_F(RpcbindRegistrationTest, LeavesTheMappingOfAnotherLiveProcess) {
  StartRpcbind();
  Subprocess other(host_->WrapHost({NSM_STATUS_SERVER_BINARY, "100024", "1"}));
  auto ready =
      other.WaitForLine(std::regex(R"(ready udp=(\d+) tcp=(\d+))"), std::chrono::seconds(10));
  ASSERT_TRUE(ready) << other.output();
  std::string udp_port = (*ready)[1];
  std::string tcp_port = (*ready)[2];

  NlockdProcess nlockd(NLOCKD_BINARY, {"--listen", "127.0.0.1:4045"}, host_.get());
  ASSERT_TRUE(
      nlockd.process().LoggedOrWaitFor(std::regex("except 2 mappings that other processes hold")))
      << nlockd.process().output();
  const std::string& log = nlockd.process().output();
  EXPECT_TRUE(Lists(log,
                    "program 100024 version 1 udp is held by another process \\(owner "
                    "superuser"))
      << log;
  auto [rc, pmap] = Rpcinfo({"-p", "127.0.0.1"});
  EXPECT_TRUE(Lists(pmap, R"(100024\s+1\s+udp\s+)" + udp_port + R"(\s+status)")) << pmap;
  EXPECT_TRUE(Lists(pmap, R"(100024\s+1\s+tcp\s+)" + tcp_port + R"(\s+status)")) << pmap;
  EXPECT_TRUE(Lists(pmap, R"(100021\s+4\s+udp\s+4045\s+nlockmgr)")) << pmap;

  EXPECT_EQ(nlockd.Stop(), 0);
  auto [rc_after, after] = Rpcinfo({"-p", "127.0.0.1"});
  EXPECT_TRUE(Lists(after, R"(100024\s+1\s+udp\s+)" + udp_port + R"(\s+status)")) << after;
  EXPECT_TRUE(Lists(after, R"(100024\s+1\s+tcp\s+)" + tcp_port + R"(\s+status)")) << after;
  EXPECT_EQ(after.find("nlockmgr"), std::string::npos) << after;
}

TEST_F(RpcbindRegistrationTest, RegistersWhenRpcbindComesUpLater) {
  NlockdProcess nlockd(NLOCKD_BINARY, {"--listen", "127.0.0.1:4045"}, host_.get());
  ASSERT_TRUE(nlockd.process().LoggedOrWaitFor(
      std::regex("level=warn.*not registered with rpcbind at 127.0.0.1:111: nothing answers")))
      << nlockd.process().output();
  StartRpcbind();
  ASSERT_TRUE(nlockd.process().WaitForLine(
      std::regex("level=info.*registered 4 programs with rpcbind at 127.0.0.1:111 .* after \\d+ "
                 "attempts"),
      std::chrono::seconds(30)))
      << nlockd.process().output();
  auto [rc, pmap] = Rpcinfo({"-p", "127.0.0.1"});
  EXPECT_TRUE(Lists(pmap, R"(100021\s+4\s+tcp\s+4045\s+nlockmgr)")) << pmap;
  EXPECT_EQ(nlockd.Stop(), 0);
}

// The warning names the rpcbind actually asked, not a default.
TEST_F(RpcbindRegistrationTest, AFailedRegistrationNamesTheRpcbindAsked) {
  NlockdProcess nlockd(
      NLOCKD_BINARY,
      {"--listen", "127.0.0.1:0", "--rpcbind-host", "127.0.0.2", "--rpcbind-port", "1111"},
      host_.get());
  EXPECT_TRUE(nlockd.process().LoggedOrWaitFor(
      std::regex("level=warn.*not registered with rpcbind at 127.0.0.2:1111")))
      << nlockd.process().output();
  EXPECT_EQ(nlockd.Stop(), 0);
}

}  // namespace
}  // namespace nlockd::integration
