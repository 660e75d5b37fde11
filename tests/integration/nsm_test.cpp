// SPDX-License-Identifier: Apache-2.0
// NSM against the real nlockd: rpcgen's stubs from the system's sm_inter.x for every procedure,
// raw bytes for malformed calls, network-namespace hosts for the loopback rule and status
// callbacks, and Debian's sm-notify as a rebooting client whose locks must go.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <regex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include "integration/nlockd_process.hpp"
#include "integration/nsm_hosts.hpp"
#include "integration/nsm_rpcgen.hpp"
#include "integration/raw_rpc.hpp"
#include "testutil/netns.hpp"
#include "testutil/temp_dir.hpp"

namespace nlockd::integration {
namespace {

constexpr uint32_t kSmProg = 100024;
constexpr auto kWait = std::chrono::seconds(20);

std::unique_ptr<NlockdProcess> StartLocal(std::vector<std::string> extra) {
  std::vector<std::string> args{"--listen", "127.0.0.1:0", "--rpcbind-register=false", "--grace",
                                "0"};
  args.insert(args.end(), extra.begin(), extra.end());
  return std::make_unique<NlockdProcess>(NLOCKD_BINARY, args);
}

using testutil::TempDir;

std::string Describe(const std::optional<NsmStatRes>& res, const NsmRpcgenClient& client) {
  if (!res) return "rpc error: " + client.error();
  return std::string(res->succeeded ? "succ" : "fail");
}

TEST(NsmRpcgen, EveryProcedureOverUdpAndTcp) {
  auto nlockd = StartLocal({"--store", "memory:"});
  for (bool tcp : {false, true}) {
    SCOPED_TRACE(tcp ? "tcp" : "udp");
    NsmRpcgenClient client("127.0.0.1", nlockd->port(), tcp);
    ASSERT_TRUE(client.connected()) << client.error();
    EXPECT_TRUE(client.Null()) << client.error();
    auto stat = client.Stat("anyone");
    ASSERT_TRUE(stat) << client.error();
    EXPECT_TRUE(stat->succeeded);
    EXPECT_EQ(stat->state % 2, 1);
    int32_t state = stat->state;
    NsmMyId id;
    auto mon = client.Mon("client-a", id);
    ASSERT_EQ(Describe(mon, client), "succ");
    EXPECT_EQ(mon->state, state);
    EXPECT_EQ(Describe(client.Mon("client-b", id), client), "succ");
    EXPECT_EQ(client.Unmon("client-a", id), state);
    EXPECT_EQ(client.UnmonAll(id), state);
    EXPECT_TRUE(client.Notify("client-b", 3)) << client.error();  // no longer monitored
    EXPECT_TRUE(client.SimuCrash()) << client.error();
    auto after = client.Stat("anyone");
    ASSERT_TRUE(after);
    // rpcgen's client, run as root, calls from a reserved port; the second SM_SIMU_CRASH (over
    // TCP) comes within the interval and is ignored.
    EXPECT_EQ(after->state, tcp ? state : state + 2);
  }
  auto& output = nlockd->process();
  EXPECT_TRUE(
      output.WaitForLine(std::regex("SM_NOTIFY\" mon_name=client-b .* not monitored"), kWait));
  EXPECT_EQ(nlockd->Stop(), 0);
}

TEST(NsmRpcgen, PastTheLimitMonFailsWhileRepeatedMonsUpdate) {
  auto nlockd = StartLocal({"--store", "memory:", "--nsm-max-registrations", "2"});
  NsmRpcgenClient client("127.0.0.1", nlockd->port(), false);
  NsmMyId id;
  EXPECT_EQ(Describe(client.Mon("a", id, {1}), client), "succ");
  EXPECT_EQ(Describe(client.Mon("b", id), client), "succ");
  EXPECT_EQ(Describe(client.Mon("c", id), client), "fail");
  // The same (mon_name, my_id) again is an update, not a third registration.
  EXPECT_EQ(Describe(client.Mon("a", id, {2}), client), "succ");
  EXPECT_EQ(Describe(client.Mon("A", id), client), "fail");  // another mon_name spelling
  EXPECT_EQ(client.Unmon("b", id).has_value(), true);
  EXPECT_EQ(Describe(client.Mon("c", id), client), "succ");
  EXPECT_EQ(nlockd->Stop(), 0);
}

TEST(NsmRpcgen, BadNamesAndCallbackProgramsAreRefused) {
  auto nlockd = StartLocal({"--store", "memory:"});
  NsmRpcgenClient client("127.0.0.1", nlockd->port(), true);
  NsmMyId id;
  EXPECT_EQ(Describe(client.Mon("", id), client), "fail");
  EXPECT_EQ(Describe(client.Mon("tab\there", id), client), "fail");
  NsmMyId nfs = id;
  nfs.my_prog = 100003;  // not a lock manager: not in the callback allowlist
  EXPECT_EQ(Describe(client.Mon("client", nfs), client), "fail");
  NsmMyId no_name = id;
  no_name.my_name = "";
  EXPECT_EQ(Describe(client.Mon("client", no_name), client), "fail");
  EXPECT_EQ(nlockd->Stop(), 0);
}

TEST(NsmRaw, MalformedCallsAreGarbageArgsAndServingGoesOn) {
  auto nlockd = StartLocal({"--store", "memory:"});
  sockaddr_in to = Ipv4("127.0.0.1", nlockd->port());
  UdpSocket socket;
  uint32_t xid = 100;
  auto call = [&](uint32_t procedure, const XdrWriter& args) {
    return socket.Call(to, BuildCall(++xid, kSmProg, 1, procedure, args.bytes()),
                       std::chrono::seconds(5));
  };
  // mon_name longer than SM_MAXSTRLEN.
  XdrWriter too_long;
  too_long.Opaque(std::string(1025, 'x')).Opaque("me").U32(100021).U32(4).U32(16);
  too_long.Raw(std::vector<uint8_t>(16, 0));
  auto reply = call(2, too_long);
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->accept_stat, kGarbageArgs);
  // A length that claims far more than the datagram holds.
  XdrWriter lying;
  lying.LyingOpaque(0x7fffffff, "abc");
  reply = call(6, lying);
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->accept_stat, kGarbageArgs);
  // Truncated: the priv is missing.
  XdrWriter truncated;
  truncated.Opaque("client").Opaque("me").U32(100021).U32(4).U32(16);
  reply = call(2, truncated);
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->accept_stat, kGarbageArgs);
  // Unknown procedure.
  reply = call(7, XdrWriter());
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->accept_stat, kProcUnavail);
  // Nothing was registered, and the monitor still answers.
  NsmRpcgenClient client("127.0.0.1", nlockd->port(), false);
  NsmMyId id;
  EXPECT_EQ(client.UnmonAll(id).has_value(), true);
  EXPECT_EQ(Describe(client.Mon("client", id), client), "succ");
  EXPECT_EQ(nlockd->Stop(), 0);
}

TEST(NsmPersistence, RegistrationsSurviveRestartsAndTheStateMovesToTheNextOdd) {
  TempDir dir;
  std::string store = "sqlite:" + dir.path() + "/nlockd.db";
  NsmMyId id;
  int32_t first_state = 0;
  {
    auto nlockd = StartLocal({"--store", store});
    NsmRpcgenClient client("127.0.0.1", nlockd->port(), false);
    auto stat = client.Stat("x");
    ASSERT_TRUE(stat);
    first_state = stat->state;
    EXPECT_EQ(first_state % 2, 1);
    EXPECT_EQ(Describe(client.Mon("a", id), client), "succ");
    EXPECT_EQ(Describe(client.Mon("b", id), client), "succ");
    EXPECT_EQ(nlockd->Stop(), 0);
  }
  int32_t second_state = 0;
  {
    // Both registrations came back: with room for two, a third is refused and they update.
    auto nlockd = StartLocal({"--store", store, "--nsm-max-registrations", "2"});
    // Logged before the listening line NlockdProcess waited for.
    EXPECT_TRUE(std::regex_search(nlockd->process().output(),
                                  std::regex("nsm state=\\d+ registrations=2 ")))
        << nlockd->process().output();
    NsmRpcgenClient client("127.0.0.1", nlockd->port(), true);
    auto stat = client.Stat("x");
    ASSERT_TRUE(stat);
    second_state = stat->state;
    EXPECT_EQ(second_state, first_state + 2);
    EXPECT_EQ(Describe(client.Mon("c", id), client), "fail");
    EXPECT_EQ(Describe(client.Mon("a", id), client), "succ");
    EXPECT_TRUE(client.SimuCrash());
    auto crashed = client.Stat("x");
    ASSERT_TRUE(crashed);
    EXPECT_EQ(crashed->state, second_state + 2);
    EXPECT_EQ(client.Unmon("b", id).has_value(), true);
    // A crash (no clean shutdown) keeps everything too.
    EXPECT_EQ(nlockd->process().Stop(SIGKILL, std::chrono::seconds(10)), 128 + SIGKILL);
  }
  {
    auto nlockd = StartLocal({"--store", store});
    EXPECT_TRUE(std::regex_search(nlockd->process().output(),
                                  std::regex("nsm state=\\d+ registrations=1 ")))
        << nlockd->process().output();
    NsmRpcgenClient client("127.0.0.1", nlockd->port(), false);
    auto stat = client.Stat("x");
    ASSERT_TRUE(stat);
    EXPECT_EQ(stat->state % 2, 1);
    EXPECT_GT(stat->state, second_state + 2);
    EXPECT_EQ(nlockd->Stop(), 0);
  }
}

class NsmBetweenHosts : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testutil::NetNamespace::Available()) GTEST_SKIP() << "needs root and ip netns";
  }
  NsmHosts& hosts() {
    if (!hosts_) hosts_ = std::make_unique<NsmHosts>(2);
    return *hosts_;
  }
  std::vector<std::string> Nsm(int client, const std::vector<std::string>& operations) {
    std::vector<std::string> argv{NSM_CLIENT_BINARY, "--server", NsmHosts::ServerAddress(client)};
    argv.insert(argv.end(), operations.begin(), operations.end());
    auto [status, lines] = hosts().Run(client, argv);
    EXPECT_EQ(status, 0) << ::testing::PrintToString(lines);
    return lines;
  }
  std::vector<std::string> NsmOnServer(const std::vector<std::string>& operations) {
    std::vector<std::string> argv{NSM_CLIENT_BINARY, "--server", "127.0.0.1"};
    argv.insert(argv.end(), operations.begin(), operations.end());
    auto [status, lines] = hosts().RunOnServer(argv);
    EXPECT_EQ(status, 0) << ::testing::PrintToString(lines);
    return lines;
  }
  std::string Nlm(int client, const std::string& operation) {
    auto [status, lines] = hosts().Run(
        client, {NLM_CLIENT_BINARY, "--server", NsmHosts::ServerAddress(client), operation});
    EXPECT_EQ(status, 0) << ::testing::PrintToString(lines);
    return lines.empty() ? "(no output)" : lines.back();
  }

  std::unique_ptr<NsmHosts> hosts_;
};

TEST_F(NsmBetweenHosts, OnlyLoopbackOrTheAllowlistMayMonitorButAnyoneMayStatAndNotify) {
  ASSERT_TRUE(hosts().StartNlockd({"--store", "memory:", "--nsm-allowlist", "10.198.2.2"}));
  EXPECT_EQ(Nsm(1, {"mon name=victim", "unmon name=victim", "simu_crash", "stat name=x"}),
            (std::vector<std::string>{"mon res=fail state=-1", "unmon state=1", "simu_crash ok",
                                      "stat res=succ state=1"}));
  EXPECT_TRUE(hosts().nlockd().process().WaitForLine(
      std::regex("SM_MON from 10.198.1.2 refused: not loopback"), kWait));
  // The state did not move: SM_SIMU_CRASH from client 1 had no effect. Client 2 is allowed.
  EXPECT_EQ(
      Nsm(2, {"mon name=victim", "simu_crash", "stat name=x"}),
      (std::vector<std::string>{"mon res=succ state=1", "simu_crash ok", "stat res=succ state=3"}));
  EXPECT_EQ(Nsm(1, {"notify name=nobody state=3"}), (std::vector<std::string>{"notify ok"}));
  EXPECT_EQ(hosts().nlockd().Stop(), 0);
}

// SIGHUP applies a changed allowlist to the next calls: no restart, no state change.
TEST_F(NsmBetweenHosts, SighupAppliesANewAllowlistWithoutARestart) {
  TempDir dir;
  const std::string config = dir.path() + "/nlockd.toml";
  std::ofstream(config) << "[nsm]\nallowlist = []\n";
  ASSERT_TRUE(hosts().StartNlockd({"--store", "memory:", "--config", config}));
  EXPECT_EQ(Nsm(1, {"mon name=victim"}), (std::vector<std::string>{"mon res=fail state=-1"}));

  std::ofstream(config) << "[nsm]\nallowlist = [\"" << NsmHosts::ClientAddress(1) << "\"]\n";
  ASSERT_EQ(kill(hosts().nlockd().process().pid(), SIGHUP), 0);
  auto reloaded = hosts().nlockd().process().WaitForLine(
      std::regex(R"(nlockd reloaded" config=\S+ applied=(\S*) needs_restart=(\S*))"), kWait);
  ASSERT_TRUE(reloaded) << hosts().nlockd().process().output();
  EXPECT_EQ((*reloaded)[1], "nsm.allowlist");
  EXPECT_EQ((*reloaded)[2], "\"\"") << "an empty value is quoted";
  EXPECT_EQ(Nsm(1, {"mon name=victim", "stat name=x"}),
            (std::vector<std::string>{"mon res=succ state=1", "stat res=succ state=1"}));
  EXPECT_EQ(hosts().nlockd().Stop(), 0);
}

TEST_F(NsmBetweenHosts, NotifyCallsBackTheRegistrantThroughTheLocalRpcbindUnlessSpoofed) {
  ASSERT_TRUE(hosts().StartNlockd({"--store", "memory:", "--nsm-callback-programs", "300100"}));
  testutil::Subprocess* registrant =
      hosts().StartOnServer({NSM_STATUS_SERVER_BINARY, "300100", "1"});
  ASSERT_TRUE(registrant->WaitForLine(std::regex("^ready udp="), kWait)) << registrant->output();
  // The local lock manager monitors client 1 by address (as Linux lockd does by default); NLM's
  // program is not in this run's callback allowlist.
  EXPECT_EQ(NsmOnServer({"mon name=10.198.1.2 prog=300100 vers=1 proc=1 priv0=7",
                         "mon name=10.198.1.2 prog=100021 vers=4 proc=16"}),
            (std::vector<std::string>{"mon res=succ state=1", "mon res=fail state=-1"}));
  // Client 2 claims to be client 1: not from one of client 1's addresses.
  EXPECT_EQ(Nsm(2, {"notify name=10.198.1.2 state=5"}), (std::vector<std::string>{"notify ok"}));
  EXPECT_TRUE(hosts().nlockd().process().WaitForLine(
      std::regex("from 10.198.2.2 rejected: not an address of monitored host 10.198.1.2"), kWait));
  // Client 1 rebooted; it names itself by host name, its address matches the registration.
  EXPECT_EQ(Nsm(1, {"notify name=client1 state=5"}), (std::vector<std::string>{"notify ok"}));
  auto status = registrant->WaitForLine(std::regex("^STATUS proc=(\\d+) mon_name=(\\S+) "
                                                   "state=(-?\\d+) priv0=(\\d+)"),
                                        kWait);
  ASSERT_TRUE(status) << registrant->output() << hosts().nlockd().process().output();
  EXPECT_EQ((*status)[0].str(), "STATUS proc=1 mon_name=10.198.1.2 state=5 priv0=7");
  // The same notification again is a replay.
  EXPECT_EQ(Nsm(1, {"notify name=client1 state=5"}), (std::vector<std::string>{"notify ok"}));
  EXPECT_TRUE(hosts().nlockd().process().WaitForLine(
      std::regex("ignored: host 10.198.1.2 is at state 5"), kWait));
  EXPECT_EQ(hosts().nlockd().Stop(), 0);
  EXPECT_EQ(registrant->output().find("STATUS", registrant->output().find("STATUS") + 1),
            std::string::npos)
      << registrant->output();
}

// sm-notify (nfs-common) on client 1, as after its reboot: it reads the hosts client 1 monitored
// from its state directory and sends SM_NOTIFY to nlockd's host, whose NSM port it asks of the
// server's rpcbind. nlockd must release client 1's locks and grant client 2's waiter.
TEST_F(NsmBetweenHosts, SmNotifyFromARebootedClientReleasesItsLocksAndGrantsTheWaiter) {
  ASSERT_TRUE(hosts().StartNlockd({"--store", "memory:", "--granted-callback", "sync"}));
  testutil::Subprocess* callbacks = hosts().Start(2, {NLM_CALLBACK_SERVER_BINARY});
  ASSERT_TRUE(callbacks->WaitForLine(std::regex(R"(^ready udp=\d+ tcp=\d+)"), kWait))
      << callbacks->output();
  // Client 1 locks with NSM state 1 (lockargs.state); client 2 blocks behind it.
  EXPECT_EQ(Nlm(1, "lock fh=f caller=client1 svid=1 oh=1@client1 offset=0 length=10 state=1"),
            "lock stat=granted");
  EXPECT_EQ(Nlm(2, "lock fh=f caller=client2 svid=2 oh=2@client2 offset=5 length=10 block=1"),
            "lock stat=blocked");

  // Client 1's state directory as its rpc.statd left it: sm/ holds one file per monitored
  // host (nlockd's server address), in nfs-utils' record format; `state` is its NSM state.
  TempDir dir;
  std::filesystem::create_directory(dir.path() + "/sm");
  std::filesystem::create_directory(dir.path() + "/sm.bak");
  std::ofstream(dir.path() + "/sm/" + NsmHosts::ServerAddress(1))
      << "0100007f 000186b5 00000004 00000010 " << std::string(32, '0') << " "
      << NsmHosts::ServerAddress(1) << " client1\n";
  int32_t state = 3;
  std::ofstream(dir.path() + "/state", std::ios::binary)
      .write(reinterpret_cast<const char*>(&state), sizeof state);
  auto [status, lines] = hosts().Run(
      1, {"sm-notify", "-f", "-d", "-n", "-P", dir.path(), "-m", "1"}, std::chrono::seconds(90));
  EXPECT_EQ(status, 0) << ::testing::PrintToString(lines);

  auto granted = callbacks->WaitForLine(std::regex("^GRANTED .* svid=(\\d+) "), kWait);
  ASSERT_TRUE(granted) << ::testing::PrintToString(lines) << callbacks->output()
                       << hosts().nlockd().process().output();
  EXPECT_EQ((*granted)[1].str(), "2");
  EXPECT_TRUE(hosts().nlockd().process().WaitForLine(
      std::regex("nsm host 10.198.1.2 rebooted: SM_NOTIFY\" mon_name=client1 state=3 from "
                 "10.198.1.2"),
      kWait));
  // Client 1's lock is gone: client 2 holds the range now.
  EXPECT_EQ(Nlm(1, "test fh=f caller=client1 svid=9 oh=9@client1 offset=0 length=4"),
            "test stat=granted");
  EXPECT_EQ(hosts().nlockd().Stop(), 0);
}

// NSM callers as a hostile local user and as the kernel: raw calls from a socket bound to an
// unreserved port (any user may bind one) or to a reserved one (only root may).
class NsmCallers {
 public:
  explicit NsmCallers(uint16_t port) : to_(Ipv4("127.0.0.1", port)) {
    EXPECT_TRUE(unprivileged_.Bind(Ipv4("127.0.0.1", 0)));  // ephemeral: above 1023
    for (uint16_t reserved = 1023; reserved >= 600; --reserved) {
      if (privileged_.Bind(Ipv4("127.0.0.1", reserved))) return;
    }
    ADD_FAILURE() << "no reserved port free";
  }

  // SM_SIMU_CRASH; whether it was answered.
  bool SimuCrash(bool privileged) { return Call(privileged, 5, XdrWriter()).has_value(); }
  // SM_MON of mon_name for lockd's usual callback; whether it answered stat_succ.
  bool Mon(bool privileged, const std::string& mon_name) {
    XdrWriter args;
    args.Opaque(mon_name);
    MyId(args).Raw(std::vector<uint8_t>(16, 1));
    auto reply = Call(privileged, 2, args);
    return reply && reply->body.size() >= 4 && reply->body[3] == 0;
  }
  void UnmonAll(bool privileged) {
    XdrWriter args;
    MyId(args);
    EXPECT_TRUE(Call(privileged, 4, args));
  }
  void Notify(UdpSocket& from, const std::string& mon_name, int32_t state) {
    XdrWriter args;
    args.Opaque(mon_name).U32(static_cast<uint32_t>(state));
    EXPECT_TRUE(
        from.Call(to_, BuildCall(++xid_, kSmProg, 1, 6, args.bytes()), std::chrono::seconds(5)));
  }

 private:
  static XdrWriter& MyId(XdrWriter& args) {
    return args.Opaque("localhost").U32(100021).U32(4).U32(16);
  }
  std::optional<RpcMessage> Call(bool privileged, uint32_t procedure, const XdrWriter& args) {
    UdpSocket& socket = privileged ? privileged_ : unprivileged_;
    auto reply = socket.Call(to_, BuildCall(++xid_, kSmProg, 1, procedure, args.bytes()),
                             std::chrono::seconds(5));
    EXPECT_TRUE(reply && reply->accept_stat == kSuccess);
    return reply;
  }

  sockaddr_in to_;
  UdpSocket unprivileged_;
  UdpSocket privileged_;
  uint32_t xid_ = 7000;
};

int32_t StateOf(const NlockdProcess& nlockd) {
  NsmRpcgenClient client("127.0.0.1", nlockd.port(), false);
  auto stat = client.Stat("x");
  EXPECT_TRUE(stat) << client.error();
  return stat ? stat->state : -1;
}

int CountMatches(const std::string& text, const std::string& needle) {
  int count = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) {
    ++count;
  }
  return count;
}

TEST(NsmPrivilege, SimuCrashNeedsAReservedPortAndComesAtMostOncePerInterval) {
  auto nlockd = StartLocal({"--store", "memory:"});
  NsmCallers callers(nlockd->port());
  const int32_t before = StateOf(*nlockd);
  // Any local user: 200 calls move nothing, and are logged a few times only.
  for (int i = 0; i < 200; ++i) ASSERT_TRUE(callers.SimuCrash(false));
  EXPECT_EQ(StateOf(*nlockd), before);
  // From a reserved port once; again at once (a new call, not a retransmission): no move.
  EXPECT_TRUE(callers.SimuCrash(true));
  EXPECT_EQ(StateOf(*nlockd), before + 2);
  EXPECT_TRUE(callers.SimuCrash(true));
  EXPECT_EQ(StateOf(*nlockd), before + 2);
  EXPECT_TRUE(
      nlockd->process().WaitForLine(std::regex("SM_SIMU_CRASH from 127.0.0.1 ignored"), kWait));
  const std::string& output = nlockd->process().output();
  EXPECT_LE(CountMatches(output, "not a reserved port"), 11) << output;
  EXPECT_EQ(nlockd->Stop(), 0);
}

TEST(NsmPrivilege, AnUnprivilegedCallerCannotUnmonitorTheKernelsHostsEvenAfterARestart) {
  TempDir dir;
  const std::string store = "sqlite:" + dir.path() + "/nlockd.db";
  {
    auto nlockd = StartLocal({"--store", store});
    NsmCallers callers(nlockd->port());
    ASSERT_TRUE(callers.Mon(true, "kernel-client"));
    ASSERT_TRUE(callers.Mon(false, "user-client"));
    callers.UnmonAll(false);
    // The kernel's registration stands: an unprivileged SM_MON may not change it...
    EXPECT_FALSE(callers.Mon(false, "kernel-client"));
    // ... while the user's own went: making it again succeeds.
    EXPECT_TRUE(callers.Mon(false, "user-client"));
    EXPECT_EQ(nlockd->Stop(), 0);
  }
  auto nlockd = StartLocal({"--store", store});
  NsmCallers callers(nlockd->port());
  callers.UnmonAll(false);
  EXPECT_FALSE(callers.Mon(false, "kernel-client"));
  // From a reserved port it goes.
  callers.UnmonAll(true);
  EXPECT_TRUE(callers.Mon(false, "kernel-client"));
  EXPECT_EQ(nlockd->Stop(), 0);
}

// Runs `make` on a thread inside `netns` (sockets it opens stay in that namespace).
template <typename Make>
auto InNamespace(const testutil::NetNamespace& netns, Make make) {
  decltype(make()) made;
  std::thread([&] {
    const int fd = open(("/var/run/netns/" + netns.name()).c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0 || setns(fd, CLONE_NEWNET) != 0) {
      ADD_FAILURE() << "cannot enter " << netns.name();
    } else {
      made = make();
    }
    if (fd >= 0) close(fd);
  }).join();
  return made;
}

// The files `ip netns exec` puts over /etc for processes in `netns`: a DNS server (that never
// answers) and a hosts file; removed with the object.
class NamespaceEtc {
 public:
  NamespaceEtc(const testutil::NetNamespace& netns, const std::string& resolv,
               const std::string& hosts)
      : dir_("/etc/netns/" + netns.name()) {
    std::filesystem::create_directories(dir_);
    std::ofstream(dir_ + "/resolv.conf") << resolv;
    std::ofstream(dir_ + "/hosts") << hosts;
  }
  ~NamespaceEtc() { std::filesystem::remove_all(dir_); }

 private:
  std::string dir_;
};

TEST(NsmNames, LookupsForUnknownNamesDoNotHoldUpAMonitoredHostsNotification) {
  if (!testutil::NetNamespace::Available()) GTEST_SKIP() << "needs root and ip netns";
  testutil::NetNamespace host("dns");
  NamespaceEtc etc(host, "nameserver 127.0.0.53\noptions timeout:5 attempts:2\n",
                   "127.0.0.1 localhost\n127.0.0.5 client.test\n");
  // The DNS server: reads queries, answers none.
  auto dns = InNamespace(host, [] {
    auto socket = std::make_unique<UdpSocket>();
    EXPECT_TRUE(socket->Bind(Ipv4("127.0.0.53", 53)));
    return socket;
  });
  NlockdProcess nlockd(NLOCKD_BINARY,
                       {"--listen", "127.0.0.1:0", "--rpcbind-register=false", "--grace", "0"},
                       &host);
  ASSERT_NE(nlockd.port(), 0);
  auto [local, stranger, client] = InNamespace(host, [] {
    auto local_socket = std::make_unique<UdpSocket>();
    auto stranger_socket = std::make_unique<UdpSocket>();
    auto client_socket = std::make_unique<UdpSocket>();
    EXPECT_TRUE(local_socket->Bind(Ipv4("127.0.0.1", 0)));
    EXPECT_TRUE(stranger_socket->Bind(Ipv4("127.0.0.9", 0)));
    EXPECT_TRUE(client_socket->Bind(Ipv4("127.0.0.5", 0)));
    return std::make_tuple(std::move(local_socket), std::move(stranger_socket),
                           std::move(client_socket));
  });
  sockaddr_in to = Ipv4("127.0.0.1", nlockd.port());
  XdrWriter mon;
  mon.Opaque("client.test").Opaque("localhost").U32(100021).U32(4).U32(16);
  mon.Raw(std::vector<uint8_t>(16, 0));
  auto monitored =
      local->Call(to, BuildCall(1, kSmProg, 1, 2, mon.bytes()), std::chrono::seconds(5));
  ASSERT_TRUE(monitored && monitored->body.size() >= 4 && monitored->body[3] == 0);
  // A notification nobody is monitored for: its name goes to the DNS server, which hangs.
  XdrWriter unknown;
  unknown.Opaque("nobody.invalid").U32(3);
  ASSERT_TRUE(
      stranger->Call(to, BuildCall(2, kSmProg, 1, 6, unknown.bytes()), std::chrono::seconds(5)));
  ASSERT_TRUE(dns->Receive(std::chrono::seconds(5))) << "no DNS query for nobody.invalid";
  // The monitored host's own reboot notification, from its own address.
  XdrWriter rebooted;
  rebooted.Opaque("client.test").U32(5);
  const auto sent = std::chrono::steady_clock::now();
  ASSERT_TRUE(
      client->Call(to, BuildCall(3, kSmProg, 1, 6, rebooted.bytes()), std::chrono::seconds(5)));
  ASSERT_TRUE(nlockd.process().WaitForLine(
      std::regex("nsm host client.test rebooted: SM_NOTIFY\" mon_name=client.test state=5 from "
                 "127.0.0.5"),
      kWait))
      << nlockd.process().output();
  const auto took = std::chrono::steady_clock::now() - sent;
  EXPECT_LT(took, std::chrono::seconds(1))
      << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms";
  EXPECT_EQ(nlockd.process().output().find("rejected: not an address"), std::string::npos);
  EXPECT_EQ(nlockd.Stop(), 0);
}

}  // namespace
}  // namespace nlockd::integration
