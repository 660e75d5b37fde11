// SPDX-License-Identifier: Apache-2.0
// The foundation against clients nobody here wrote: rpcgen-generated libtirpc clients, rpcinfo
// and rpcbind from Debian's packages, and raw bytes for what no polite client sends.
#include <chrono>
#include <cstring>
#include <string>

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <rpc/rpc.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include "integration/nlockd_process.hpp"
#include "nlm_prot_test.h"
#include "sm_inter_test.h"

namespace nlockd::integration {
namespace {

using testutil::NetNamespace;
using testutil::RunCommand;
using testutil::Subprocess;

sockaddr_in Loopback(uint16_t port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return addr;
}

// A libtirpc client bound to nlockd's port (no portmapper involved).
CLIENT* Connect(bool tcp, uint16_t port, unsigned long program, unsigned long version) {
  sockaddr_in addr = Loopback(port);
  int sock = RPC_ANYSOCK;
  if (tcp) return clnttcp_create(&addr, program, version, &sock, 0, 0);
  timeval retry{0, 200000};
  return clntudp_create(&addr, program, version, retry, &sock);
}

// xdr_void's prototype takes no arguments; clnt_call wants an xdrproc_t.
bool_t XdrNothing(XDR*, ...) { return TRUE; }

clnt_stat CallNull(CLIENT* client) {
  timeval timeout{5, 0};
  return clnt_call(client, 0, XdrNothing, nullptr, XdrNothing, nullptr, timeout);
}

TEST(Foundation, RpcgenClientsCallNullOverTcpAndUdp) {
  NlockdProcess nlockd(NLOCKD_BINARY, {"--listen", "127.0.0.1:0", "--rpcbind-register=false"});
  ASSERT_NE(nlockd.port(), 0);
  for (bool tcp : {true, false}) {
    for (unsigned long version : {1ul, 3ul, 4ul}) {
      CLIENT* client = Connect(tcp, nlockd.port(), NLM_PROG, version);
      ASSERT_NE(client, nullptr);
      // The stub rpcgen generated from the test copy of nlm_prot.x.
      EXPECT_NE(nlm_null_1(nullptr, client), nullptr) << "tcp=" << tcp << " v" << version;
      clnt_destroy(client);
    }
    CLIENT* client = Connect(tcp, nlockd.port(), SM_PROG, SM_VERS);
    ASSERT_NE(client, nullptr);
    EXPECT_NE(sm_null_1(nullptr, client), nullptr) << "tcp=" << tcp;
    clnt_destroy(client);
  }
  EXPECT_EQ(nlockd.Stop(), 0);
}

TEST(Foundation, UnknownVersionProgramAndProcedureGetTheirRpcErrors) {
  NlockdProcess nlockd(NLOCKD_BINARY, {"--listen", "127.0.0.1:0", "--rpcbind-register=false"});
  for (bool tcp : {true, false}) {
    CLIENT* v2 = Connect(tcp, nlockd.port(), NLM_PROG, 2);
    ASSERT_NE(v2, nullptr);
    EXPECT_EQ(CallNull(v2), RPC_PROGVERSMISMATCH);
    rpc_err err{};
    clnt_geterr(v2, &err);
    EXPECT_EQ(err.re_vers.low, 1u);
    EXPECT_EQ(err.re_vers.high, 4u);
    clnt_destroy(v2);

    CLIENT* other = Connect(tcp, nlockd.port(), 100099, 1);
    ASSERT_NE(other, nullptr);
    EXPECT_EQ(CallNull(other), RPC_PROGUNAVAIL);
    clnt_destroy(other);

    CLIENT* nsm = Connect(tcp, nlockd.port(), SM_PROG, SM_VERS);
    timeval timeout{5, 0};
    EXPECT_EQ(clnt_call(nsm, 99, XdrNothing, nullptr, XdrNothing, nullptr, timeout),
              RPC_PROCUNAVAIL);
    clnt_destroy(nsm);
  }
  EXPECT_EQ(nlockd.Stop(), 0);
}

TEST(Foundation, HostileStreamsAreCutOffAndServingGoesOn) {
  NlockdProcess nlockd(NLOCKD_BINARY, {"--listen", "127.0.0.1:0", "--rpcbind-register=false",
                                       "--max-record-size", "65536"});
  // A record mark claiming 2 GiB: the connection is closed, nothing is allocated.
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr = Loopback(nlockd.port());
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  uint8_t mark[4] = {0xff, 0xff, 0xff, 0xff};
  ASSERT_EQ(write(fd, mark, 4), 4);
  char byte;
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  EXPECT_LE(read(fd, &byte, 1), 0);
  close(fd);
  // Garbage datagrams get no answer.
  int udp = socket(AF_INET, SOCK_DGRAM, 0);
  const char junk[] = "\x00\x00\x00\x01garbage";
  sendto(udp, junk, sizeof junk, 0, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  close(udp);
  CLIENT* client = Connect(true, nlockd.port(), SM_PROG, SM_VERS);
  ASSERT_NE(client, nullptr);
  EXPECT_EQ(CallNull(client), RPC_SUCCESS);
  clnt_destroy(client);
  EXPECT_EQ(nlockd.Stop(), 0);
}

TEST(Foundation, FailsClearlyWhenThePortIsTaken) {
  NlockdProcess first(NLOCKD_BINARY, {"--listen", "127.0.0.1:0", "--rpcbind-register=false"});
  Subprocess second({NLOCKD_BINARY, "--listen", "127.0.0.1:" + std::to_string(first.port()),
                     "--rpcbind-register=false", "--store", "memory:"});
  EXPECT_EQ(second.Wait(std::chrono::seconds(10)), 1);
  EXPECT_NE(second.output().find("cannot listen"), std::string::npos) << second.output();
}

// A host of its own with an rpcbind, so that registration is seen the way clients see it.
class WithRpcbind : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!NetNamespace::Available()) GTEST_SKIP() << "needs root and ip netns";
    host_ = std::make_unique<NetNamespace>("rpcb");
    rpcbind_ = std::make_unique<Subprocess>(host_->Wrap({"rpcbind", "-f"}));
    ASSERT_TRUE(host_->WaitForRpcbind()) << "rpcbind did not come up";
  }

  std::pair<int, std::string> Rpcinfo(std::vector<std::string> args) {
    std::vector<std::string> argv{"rpcinfo"};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunCommand(host_->Wrap(argv));
  }

  std::unique_ptr<NetNamespace> host_;
  std::unique_ptr<Subprocess> rpcbind_;
};

TEST_F(WithRpcbind, RegistersEveryProgramVersionAndUnregistersOnShutdown) {
  NlockdProcess nlockd(NLOCKD_BINARY, {"--listen", "127.0.0.1:4045"}, host_.get());
  ASSERT_TRUE(nlockd.process().LoggedOrWaitFor(std::regex("registered 4 programs with rpcbind")))
      << nlockd.process().output();
  auto [rc, listing] = Rpcinfo({"-p", "127.0.0.1"});
  ASSERT_EQ(rc, 0);
  for (const char* line :
       {"100021    1   tcp   4045  nlockmgr", "100021    1   udp   4045  nlockmgr",
        "100021    3   tcp   4045  nlockmgr", "100021    3   udp   4045  nlockmgr",
        "100021    4   tcp   4045  nlockmgr", "100021    4   udp   4045  nlockmgr",
        "100024    1   tcp   4045  status", "100024    1   udp   4045  status"}) {
    EXPECT_NE(listing.find(line), std::string::npos) << line << "\n" << listing;
  }
  // rpcinfo's own probes, found through rpcbind as a client finds them.
  auto [rc_t, out_t] = Rpcinfo({"-t", "127.0.0.1", "nlockmgr", "4"});
  EXPECT_EQ(rc_t, 0) << out_t;
  EXPECT_NE(out_t.find("program 100021 version 4 ready and waiting"), std::string::npos);
  auto [rc_u, out_u] = Rpcinfo({"-u", "127.0.0.1", "status", "1"});
  EXPECT_EQ(rc_u, 0) << out_u;
  EXPECT_NE(out_u.find("program 100024 version 1 ready and waiting"), std::string::npos);
  // Without a version rpcinfo walks the range that PROG_MISMATCH reports.
  auto [rc_all, out_all] = Rpcinfo({"-t", "127.0.0.1", "nlockmgr"});
  EXPECT_NE(out_all.find("program 100021 version 1 ready and waiting"), std::string::npos)
      << out_all;
  EXPECT_NE(out_all.find("program 100021 version 3 ready and waiting"), std::string::npos);
  EXPECT_NE(out_all.find("program 100021 version 4 ready and waiting"), std::string::npos);

  EXPECT_EQ(nlockd.Stop(), 0);
  auto [rc_after, after] = Rpcinfo({"-p", "127.0.0.1"});
  EXPECT_EQ(after.find("nlockmgr"), std::string::npos) << after;
  EXPECT_EQ(after.find("status"), std::string::npos) << after;
}

TEST_F(WithRpcbind, ReplacesAStaleRegistrationFromAnEarlierRun) {
  {
    NlockdProcess crashed(NLOCKD_BINARY, {"--listen", "127.0.0.1:0"}, host_.get());
    ASSERT_TRUE(crashed.process().LoggedOrWaitFor(std::regex("registered 4 programs")));
    crashed.process().Stop(SIGKILL, std::chrono::seconds(5));  // Leaves its mappings behind.
  }
  NlockdProcess nlockd(NLOCKD_BINARY, {"--listen", "127.0.0.1:4045"}, host_.get());
  ASSERT_TRUE(nlockd.process().LoggedOrWaitFor(std::regex("registered 4 programs")))
      << nlockd.process().output();
  auto [rc, out] = Rpcinfo({"-t", "127.0.0.1", "nlockmgr", "1"});
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(nlockd.Stop(), 0);
}

}  // namespace
}  // namespace nlockd::integration
