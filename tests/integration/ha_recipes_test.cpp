// SPDX-License-Identifier: Apache-2.0
// The floating-address recipes of docs/operator-guide.md with the real software, on the network
// of ha_topology.hpp (run under scripts/with-postgres.sh as root; ctest label "db"):
//   - Debian's ocf-tester against contrib/ocf/nlockd and a real nlockd;
//   - a Pacemaker-style group driven by the test through the real resource agents, Debian's
//     ocf:heartbeat:IPaddr2 and contrib/ocf/nlockd, run in the nodes' namespaces as Pacemaker
//     would run them: start on A, a planned move to B (stop nlockd, stop the address, start
//     both on B), and a start on A that waits as standby while B still holds the lease and
//     returns once B's nlockd is killed;
//   - a real two-node corosync and Pacemaker cluster (each node with a mount and UTS namespace
//     of its own besides the network one) running the guide's group of IPaddr2 and
//     ocf:nlockd:nlockd: started, moved with crm_resource --move, and moved again by Pacemaker
//     when the agent's monitor finds nlockd killed;
//   - Debian's keepalived on both nodes with contrib/keepalived's configuration and scripts,
//     VRRP over the lan: the address lands on the node whose nlockd holds the lease, follows it
//     after kill -9 of that nlockd, and moves back when keepalived is stopped on the serving
//     node or that node's lan interface goes down (its notify script hands the lease over).
// Clients lock and unlock through the service address all along; the checker over what they
// saw finds no conflicting grants and no lost locks. NLOCKD_KEEP_TEST_DIR keeps the temporary
// directory (configs, logs, the cluster's CIB and pacemaker.log) for a look after a failure.
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include "integration/ha_topology.hpp"
#include "testutil/subprocess.hpp"
#include "testutil/temp_dir.hpp"

namespace nlockd::integration::hafault {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using std::chrono::seconds;
using testutil::RunCommand;
using testutil::Subprocess;

constexpr int kLeaseSeconds = 2;
constexpr const char* kOcfRoot = "/usr/lib/ocf";
constexpr const char* kIpAddr2 = "/usr/lib/ocf/resource.d/heartbeat/IPaddr2";
constexpr const char* kNlockdAgent = NLOCKD_SOURCE_DIR "/contrib/ocf/nlockd";
constexpr const char* kKeepalivedDir = NLOCKD_SOURCE_DIR "/contrib/keepalived";
constexpr const char* kAdminUrl = "http://127.0.0.1:9464";  // In each node's namespace.

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void WriteFile(const fs::path& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
}

void Replace(std::string& text, const std::string& from, const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
}

class HaRecipesTest : public HaTopologyTest {
 protected:
  HaRecipesTest() : HaTopologyTest("harecipes", true) {}

  void SetUp() override {
    HaTopologyTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    for (const char* tool : {"/usr/sbin/keepalived", "/usr/sbin/ocf-tester", kIpAddr2}) {
      ASSERT_TRUE(fs::exists(tool)) << tool << " is missing: scripts/install-deps.sh --test";
    }
    temp_dir_.emplace("harecipes");
    dir_ = temp_dir_->path();
    fs::permissions(dir_, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                              fs::perms::others_read | fs::perms::others_exec);
    for (int n = 0; n < 2; ++n) WriteConfig(n);
  }

  void TearDown() override {
    for (auto& keepalived : keepalived_) {
      if (keepalived) keepalived->Stop(SIGTERM, seconds(10));
    }
    HaTopologyTest::TearDown();
    if (!dir_.empty() && HasFailure()) {
      for (int n = 0; n < 2; ++n) {
        std::cout << "--- nlockd log of node " << NodeLetter(n) << " (agent):\n"
                  << ReadFile(dir_ / Log(n));
        if (keepalived_[n]) {
          std::cout << "--- keepalived of node " << NodeLetter(n) << ":\n"
                    << keepalived_[n]->output();
        }
      }
    }
  }

  static std::string Log(int n) { return fmt::format("nlockd-{}.log", NodeLetter(n)); }
  fs::path Config(int n) const { return dir_ / fmt::format("nlockd-{}.toml", NodeLetter(n)); }
  fs::path Pidfile(int n) const { return dir_ / fmt::format("nlockd-{}.pid", NodeLetter(n)); }

  // nlockd's config on node `n`: the service on the node's link to PostgreSQL, with HA on.
  void WriteConfig(int n) {
    WriteFile(Config(n),
              fmt::format(R"(name = "{}"
store = "{}"
ha = true
ha_lease = {}
listen = "0.0.0.0:{}"
admin_listen = "127.0.0.1:9464"
grace = 20

[notify]
statd_port = {}

[rpcbind]
register = false
)",
                          service_, nodes_[n].store_uri, kLeaseSeconds, kNlmPort, kStatdPort));
  }

  // The argv that runs `agent` `action` in node `n`'s namespace, as Pacemaker would.
  std::vector<std::string> AgentArgv(int n, const std::string& agent, const std::string& action,
                                     int timeout_seconds) const {
    std::vector<std::string> argv{
        "env", std::string("OCF_ROOT=") + kOcfRoot,
        fmt::format("OCF_RESKEY_CRM_meta_timeout={}", timeout_seconds * 1000)};
    if (agent == kIpAddr2) {
      argv.insert(argv.end(), {"OCF_RESOURCE_INSTANCE=service-ip",
                               std::string("OCF_RESKEY_ip=") + kServiceAddress,
                               "OCF_RESKEY_cidr_netmask=24", "OCF_RESKEY_nic=lan0"});
    } else {
      argv.insert(
          argv.end(),
          {"OCF_RESOURCE_INSTANCE=nlockd", std::string("OCF_RESKEY_binary=") + NLOCKD_BINARY,
           "OCF_RESKEY_config=" + Config(n).string(), "OCF_RESKEY_pidfile=" + Pidfile(n).string(),
           "OCF_RESKEY_logfile=" + (dir_ / Log(n)).string()});
    }
    if (action == "monitor") argv.push_back("OCF_RESKEY_CRM_meta_interval=10000");
    argv.insert(argv.end(), {agent, action});
    return nodes_[n].ns->WrapHost(argv);
  }

  // Runs a resource agent's action on node `n`; returns its exit status.
  int Agent(int n, const std::string& agent, const std::string& action, int timeout_seconds = 30) {
    auto [rc, out] =
        RunCommand(AgentArgv(n, agent, action, timeout_seconds), seconds(timeout_seconds + 5));
    std::cout << "node " << NodeLetter(n) << ": " << fs::path(agent).filename().string() << " "
              << action << " -> " << rc << "\n";
    if (rc != 0 && action != "monitor") std::cout << out;
    return rc;
  }

  std::optional<pid_t> AgentPid(int n) const {
    std::ifstream in(Pidfile(n));
    pid_t pid = 0;
    if (in >> pid) return pid;
    return std::nullopt;
  }

  // --- keepalived -------------------------------------------------------------------------

  // nlockd on node `n`, started by the test as its supervisor (systemd in the recipe).
  void StartNode(int n) {
    nodes_[n].process = std::make_unique<Subprocess>(
        nodes_[n].ns->Wrap({NLOCKD_BINARY, "--config", Config(n).string()}));
    // The notify script's handover signals this process (systemctl restart in the recipe).
    WriteFile(dir_ / fmt::format("nlockd-{}.supervised-pid", NodeLetter(n)),
              std::to_string(nodes_[n].process->pid()) + "\n");
  }
  bool WaitStandby(int n) {
    return nodes_[n].process->LoggedOrWaitFor(std::regex("ha: standby for service"), seconds(20));
  }
  bool WaitActive(int n, milliseconds timeout) {
    return nodes_[n].process->LoggedOrWaitFor(std::regex("nlockd listening\" address="), timeout);
  }

  // contrib/keepalived's files for node `n`: the scripts copied (keepalived runs scripts only
  // from paths no other user can change), the settings and keepalived.conf with this network's
  // interface and address.
  void WriteKeepalivedFiles(int n) {
    const fs::path node_dir = dir_ / fmt::format("keepalived-{}", NodeLetter(n));
    fs::create_directories(node_dir);
    for (const char* script : {"nlockd-check", "nlockd-notify"}) {
      fs::copy_file(fs::path(kKeepalivedDir) / script, node_dir / script,
                    fs::copy_options::overwrite_existing);
      fs::permissions(node_dir / script, fs::perms::owner_all | fs::perms::group_read |
                                             fs::perms::group_exec | fs::perms::others_read |
                                             fs::perms::others_exec);
    }
    std::string settings = ReadFile(fs::path(kKeepalivedDir) / "nlockd.env");
    Replace(settings, "http://127.0.0.1:9464", kAdminUrl);
    Replace(settings, "systemctl --no-block restart nlockd",
            fmt::format("kill -TERM $(cat {})",
                        (dir_ / fmt::format("nlockd-{}.supervised-pid", NodeLetter(n))).string()));
    WriteFile(node_dir / "nlockd.env", settings);
    std::string conf = ReadFile(fs::path(kKeepalivedDir) / "keepalived.conf");
    Replace(conf, "/etc/keepalived/", node_dir.string() + "/");
    Replace(conf, "192.0.2.100/24", std::string(kServiceAddress) + "/24");
    Replace(conf, "dev eth0", "dev lan0");
    Replace(conf, "interface eth0", "interface lan0");
    WriteFile(node_dir / "keepalived.conf", conf);
  }

  void StartKeepalived(int n) {
    const fs::path node_dir = dir_ / fmt::format("keepalived-{}", NodeLetter(n));
    keepalived_[n] = std::make_unique<Subprocess>(nodes_[n].ns->WrapHost(
        {"keepalived", "--vrrp", "--dont-fork", "--log-console", "--log-detail", "--no-syslog",
         "--use-file", (node_dir / "keepalived.conf").string(), "--pid",
         (node_dir / "keepalived.pid").string(), "--vrrp_pid", (node_dir / "vrrp.pid").string()}));
  }

  // --- Pacemaker -----------------------------------------------------------------------------

  // Node `n` as a cluster node: a process holding a mount and UTS namespace of the node's own
  // (inside its network namespace) in which corosync, Pacemaker and the agents they run see the
  // node's own host name, /run, /dev/shm, corosync.conf, CIB and logs, nlockd's config at
  // /run/nlockd.toml, and contrib/ocf as the OCF provider "nlockd".
  void StartClusterNode(int n) {
    const fs::path node_dir = dir_ / fmt::format("pacemaker-{}", NodeLetter(n));
    for (const char* sub :
         {"etc-corosync", "lib-corosync", "lib-pacemaker/cib", "lib-pacemaker/pengine",
          "lib-pacemaker/blackbox", "lib-pacemaker/cores", "log-pacemaker"}) {
      fs::create_directories(node_dir / sub);
    }
    std::string nodes;
    for (int m = 0; m < 2; ++m) {
      nodes +=
          fmt::format("  node {{\n    ring0_addr: {}\n    name: node-{}\n    nodeid: {}\n  }}\n",
                      NodeAddress(m), static_cast<char>('a' + m), m + 1);
    }
    WriteFile(node_dir / "etc-corosync" / "corosync.conf",
              "totem {\n  version: 2\n  cluster_name: nlockdtest\n  transport: knet\n"
              "  crypto_cipher: none\n  crypto_hash: none\n  token: 1000\n}\n"
              "nodelist {\n" +
                  nodes +
                  "}\n"
                  "quorum {\n  provider: corosync_votequorum\n  two_node: 1\n}\n"
                  "logging {\n  to_stderr: yes\n  to_syslog: no\n  to_logfile: no\n}\n");
    const std::string script = R"(set -e
chown -R hacluster:haclient "$2/lib-pacemaker" "$2/log-pacemaker"
hostname "node-$1"
mount -t tmpfs tmpfs /run
mkdir -p /run/crm /run/resource-agents /run/ocf
chown hacluster:haclient /run/crm
mount -t tmpfs tmpfs /dev/shm
mount --bind "$2/etc-corosync" /etc/corosync
mount --bind "$2/lib-corosync" /var/lib/corosync
mount --bind "$2/lib-pacemaker" /var/lib/pacemaker
mount --bind "$2/log-pacemaker" /var/log/pacemaker
for provider in /usr/lib/ocf/resource.d/*; do
  mkdir "/run/ocf/${provider##*/}"
  mount --bind "$provider" "/run/ocf/${provider##*/}"
done
mkdir -p /run/ocf/nlockd
mount --bind "$3" /run/ocf/nlockd
mount --rbind /run/ocf /usr/lib/ocf/resource.d
touch /run/nlockd.toml
mount --bind "$4" /run/nlockd.toml
echo node-ready
exec sleep 100000)";
    holders_[n] = std::make_unique<Subprocess>(std::vector<std::string>{
        "ip", "netns", "exec", nodes_[n].ns->name(), "unshare", "--mount", "--uts", "--propagation",
        "private", "sh", "-c", script, "sh", std::string(1, static_cast<char>('a' + n)),
        node_dir.string(), std::string(NLOCKD_SOURCE_DIR) + "/contrib/ocf", Config(n).string()});
    ASSERT_TRUE(holders_[n]->WaitForLine(std::regex("node-ready"), seconds(10)))
        << holders_[n]->output();
    corosync_[n] = std::make_unique<Subprocess>(InNode(n, {"corosync", "-f"}));
    pacemaker_[n] = std::make_unique<Subprocess>(InNode(n, {"pacemakerd", "-f"}));
  }

  // argv that runs `argv` in cluster node `n`'s namespaces.
  std::vector<std::string> InNode(int n, const std::vector<std::string>& argv) const {
    std::vector<std::string> out{"nsenter", "-t", std::to_string(holders_[n]->pid()),
                                 "-m",      "-u", "-n"};
    out.insert(out.end(), argv.begin(), argv.end());
    return out;
  }
  std::string Cluster(const std::vector<std::string>& argv) {
    auto [rc, out] = RunCommand(InNode(0, argv));
    return out;
  }

  // The node the group's nlockd runs on, by Pacemaker's account, once it is started there.
  std::optional<int> GroupNode() {
    const std::string status = Cluster({"crm_mon", "-1"});
    for (int n = 0; n < 2; ++n) {
      if (status.find(fmt::format("(ocf:nlockd:nlockd):\t Started node-{}",
                                  static_cast<char>('a' + n))) != std::string::npos) {
        return n;
      }
    }
    return std::nullopt;
  }
  bool WaitGroupAt(int n, milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    do {
      if (GroupNode() == n && HasServiceAddress(n) && !HasServiceAddress(1 - n)) return true;
      std::this_thread::sleep_for(milliseconds(100));
    } while (Clock::now() < deadline);
    return false;
  }

  // Made in SetUp (not for a skipped test); outlives the processes below that write into it.
  std::optional<testutil::TempDir> temp_dir_;
  fs::path dir_;
  std::unique_ptr<Subprocess> keepalived_[2];
  std::unique_ptr<Subprocess> holders_[2];
  std::unique_ptr<Subprocess> corosync_[2];
  std::unique_ptr<Subprocess> pacemaker_[2];
};

TEST_F(HaRecipesTest, OcfTesterPassesTheNlockdAgent) {
  const auto started = Clock::now();
  auto [rc, out] = RunCommand(
      nodes_[0].ns->WrapHost(
          {"env", std::string("OCF_ROOT=") + kOcfRoot, "ocf-tester", "-n", "nlockd", "-o",
           std::string("binary=") + NLOCKD_BINARY, "-o", "config=" + Config(0).string(), "-o",
           "pidfile=" + Pidfile(0).string(), "-o", "logfile=" + (dir_ / Log(0)).string(), "-o",
           "user=nobody", "-v", kNlockdAgent}),
      seconds(120));
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("passed all tests"), std::string::npos) << out;
  std::cout << out << "ocf-tester took "
            << std::chrono::duration_cast<milliseconds>(Clock::now() - started).count() << " ms\n";
  // It started and stopped a real nlockd that served the service, as user nobody, and left
  // nothing running.
  EXPECT_NE(out.find("started nlockd (pid"), std::string::npos) << out;
  EXPECT_NE(out.find("setpriv --reuid=nobody"), std::string::npos) << out;
  const std::string log = ReadFile(dir_ / Log(0));
  EXPECT_NE(log.find("nlockd listening\" address="), std::string::npos) << log;
  EXPECT_FALSE(AgentPid(0).has_value());
}

TEST_F(HaRecipesTest, PacemakerStyleGroupMovesWithTheResourceAgents) {
  // The group on A: the address, then nlockd.
  ASSERT_EQ(Agent(0, kIpAddr2, "start"), 0);
  ASSERT_EQ(Agent(0, kNlockdAgent, "start"), 0);
  EXPECT_TRUE(WaitServiceAddressOnlyAt(0, seconds(1)));
  EXPECT_EQ(Agent(0, kNlockdAgent, "monitor"), 0);
  EXPECT_EQ(Agent(1, kNlockdAgent, "monitor"), 7);
  StartLoad();
  ASSERT_FALSE(HasFatalFailure());
  std::this_thread::sleep_for(milliseconds(300));

  // A planned move: the group stops on A in reverse order and starts on B.
  int32_t state_before = CurrentState();
  auto at = Clock::now();
  EXPECT_EQ(Agent(0, kNlockdAgent, "stop"), 0);
  EXPECT_EQ(Agent(0, kIpAddr2, "stop"), 0);
  EXPECT_EQ(Agent(0, kNlockdAgent, "monitor"), 7);
  ASSERT_EQ(Agent(1, kIpAddr2, "start"), 0);
  ASSERT_EQ(Agent(1, kNlockdAgent, "start"), 0);
  auto took = Clock::now() - at;
  RecordProperty("move_ms",
                 static_cast<int>(std::chrono::duration_cast<milliseconds>(took).count()));
  std::cout << "planned move through the agents: "
            << std::chrono::duration_cast<milliseconds>(took).count() << " ms\n";
  EXPECT_TRUE(WaitServiceAddressOnlyAt(1, seconds(1)));
  EXPECT_TRUE(WaitAllReclaimed(state_before, seconds(30)));
  EXPECT_TRUE(WaitGrantsAfter(Clock::now(), seconds(30))) << "no lock granted after the move";

  // B fails while the cluster manager starts nlockd on A: the start waits as standby while B
  // holds the lease, and returns once B's process is gone (its database session ends).
  state_before = CurrentState();
  Subprocess start_on_a(AgentArgv(0, kNlockdAgent, "start", 60));
  ASSERT_TRUE(start_on_a.WaitForLine(std::regex("is standby; waiting"), seconds(20)))
      << start_on_a.output();
  EXPECT_FALSE(start_on_a.Wait(milliseconds(kLeaseSeconds * 1000 + 500)).has_value())
      << "the start returned while B held the lease: " << start_on_a.output();
  const std::optional<pid_t> b_pid = AgentPid(1);
  ASSERT_TRUE(b_pid.has_value());
  at = Clock::now();
  ASSERT_EQ(kill(*b_pid, SIGKILL), 0);
  // B is fenced: its address goes; A's group takes the address while its nlockd takes over.
  EXPECT_EQ(Agent(1, kNlockdAgent, "monitor"), 1) << "a dead nlockd is a failure, not stopped";
  EXPECT_EQ(Agent(1, kIpAddr2, "stop"), 0);
  ASSERT_EQ(Agent(0, kIpAddr2, "start"), 0);
  EXPECT_EQ(start_on_a.Wait(seconds(30)), 0) << start_on_a.output();
  took = Clock::now() - at;
  std::cout << "takeover after kill -9 through the agent's start: "
            << std::chrono::duration_cast<milliseconds>(took).count() << " ms\n";
  EXPECT_EQ(Agent(0, kNlockdAgent, "monitor"), 0);
  EXPECT_EQ(Agent(1, kNlockdAgent, "stop"), 0);
  EXPECT_EQ(Agent(1, kNlockdAgent, "monitor"), 7);
  EXPECT_TRUE(WaitAllReclaimed(state_before, seconds(30)));
  EXPECT_TRUE(WaitGrantsAfter(Clock::now(), seconds(30))) << "no lock granted after takeover";
  StopAndCheck();
  EXPECT_EQ(Agent(0, kNlockdAgent, "stop"), 0);
  EXPECT_EQ(Agent(0, kIpAddr2, "stop"), 0);
}

TEST_F(HaRecipesTest, KeepalivedPutsTheAddressWhereTheLeaseIs) {
  StartNode(0);
  ASSERT_TRUE(WaitActive(0, seconds(30))) << nodes_[0].process->output();
  StartNode(1);
  ASSERT_TRUE(WaitStandby(1)) << nodes_[1].process->output();
  for (int n = 0; n < 2; ++n) {
    WriteKeepalivedFiles(n);
    StartKeepalived(n);
  }
  auto at = Clock::now();
  ASSERT_TRUE(WaitServiceAddressOnlyAt(0, seconds(20)))
      << keepalived_[0]->output() << keepalived_[1]->output();
  std::cout << "keepalived put the address on A after "
            << std::chrono::duration_cast<milliseconds>(Clock::now() - at).count() << " ms\n";
  StartLoad();
  ASSERT_FALSE(HasFatalFailure());
  std::this_thread::sleep_for(milliseconds(300));

  // kill -9 of the serving nlockd: B's takes the lease, the address follows it.
  int32_t state_before = CurrentState();
  at = Clock::now();
  EXPECT_EQ(nodes_[0].process->Stop(SIGKILL, seconds(10)), 128 + SIGKILL);
  ASSERT_TRUE(WaitActive(1, seconds(kLeaseSeconds * 3 + 10))) << nodes_[1].process->output();
  ASSERT_TRUE(WaitServiceAddressOnlyAt(1, seconds(20)))
      << keepalived_[0]->output() << keepalived_[1]->output();
  std::cout << "kill -9: the address was on B after "
            << std::chrono::duration_cast<milliseconds>(Clock::now() - at).count() << " ms\n";
  StartNode(0);  // Its supervisor restarts it: standby.
  EXPECT_TRUE(WaitStandby(0)) << nodes_[0].process->output();
  EXPECT_TRUE(WaitAllReclaimed(state_before, seconds(30)));
  EXPECT_TRUE(WaitGrantsAfter(Clock::now(), seconds(30))) << "no lock granted after takeover";

  // keepalived stopped on the serving node: its notify script hands the lease over, and the
  // address follows it back to A.
  state_before = CurrentState();
  at = Clock::now();
  EXPECT_EQ(keepalived_[1]->Stop(SIGTERM, seconds(10)), 0) << keepalived_[1]->output();
  EXPECT_EQ(nodes_[1].process->Wait(seconds(20)), 0)
      << "the notify script did not hand B's lease over: " << nodes_[1].process->output();
  ASSERT_TRUE(WaitActive(0, seconds(kLeaseSeconds * 3 + 10))) << nodes_[0].process->output();
  ASSERT_TRUE(WaitServiceAddressOnlyAt(0, seconds(20))) << keepalived_[0]->output();
  std::cout << "keepalived stopped on B: the address was on A after "
            << std::chrono::duration_cast<milliseconds>(Clock::now() - at).count() << " ms\n";
  StartNode(1);
  EXPECT_TRUE(WaitStandby(1)) << nodes_[1].process->output();
  StartKeepalived(1);
  EXPECT_TRUE(WaitAllReclaimed(state_before, seconds(30)));
  EXPECT_TRUE(WaitGrantsAfter(Clock::now(), seconds(30))) << "no lock granted after the move";
  // B's keepalived back, its check failing (its nlockd is standby): the address stays on A.
  EXPECT_TRUE(keepalived_[1]->LoggedOrWaitFor(std::regex(R"(VRRP_Script\(nlockd_serving\) failed)"),
                                              seconds(10)))
      << keepalived_[1]->output();
  EXPECT_TRUE(WaitServiceAddressOnlyAt(0, seconds(1)));

  // The serving node's lan interface goes down (its database link stays up, so its nlockd
  // keeps the lease): keepalived's FAULT runs the notify script, which hands the lease over,
  // and the address goes to B.
  state_before = CurrentState();
  at = Clock::now();
  Ip({"ip", "-n", nodes_[0].ns->name(), "link", "set", "lan0", "down"});
  EXPECT_EQ(nodes_[0].process->Wait(seconds(20)), 0)
      << "the notify script did not hand A's lease over: " << nodes_[0].process->output();
  ASSERT_TRUE(WaitActive(1, seconds(kLeaseSeconds * 3 + 10))) << nodes_[1].process->output();
  ASSERT_TRUE(WaitServiceAddressOnlyAt(1, seconds(20))) << keepalived_[1]->output();
  std::cout << "A's lan down: the address was on B after "
            << std::chrono::duration_cast<milliseconds>(Clock::now() - at).count() << " ms\n";
  StartNode(0);
  EXPECT_TRUE(WaitStandby(0)) << nodes_[0].process->output();
  Ip({"ip", "-n", nodes_[0].ns->name(), "link", "set", "lan0", "up"});
  EXPECT_TRUE(WaitAllReclaimed(state_before, seconds(30)));
  EXPECT_TRUE(WaitGrantsAfter(Clock::now(), seconds(30))) << "no lock granted after the move";
  EXPECT_TRUE(WaitServiceAddressOnlyAt(1, seconds(1)));
  StopAndCheck();
}

// A two-node corosync and Pacemaker cluster in the namespaces (no fencing: the PostgreSQL lease
// is what keeps two nodes from granting), with the group of the guide's recipe: IPaddr2 and
// ocf:nlockd:nlockd. Pacemaker starts the group, moves it (crm_resource --move), and after kill -9
// of nlockd its monitor reports the failure and the group moves to the other node.
TEST_F(HaRecipesTest, PacemakerClusterRunsTheGroup) {
  for (const char* tool : {"/usr/sbin/corosync", "/usr/sbin/pacemakerd", "/usr/sbin/crm_mon"}) {
    ASSERT_TRUE(fs::exists(tool)) << tool << " is missing: scripts/install-deps.sh --test";
  }
  auto at = Clock::now();
  for (int n = 0; n < 2; ++n) {
    StartClusterNode(n);
    ASSERT_FALSE(HasFatalFailure());
  }
  std::string status;
  const auto deadline = Clock::now() + seconds(90);
  while (Clock::now() < deadline) {
    status = Cluster({"crm_mon", "-1"});
    if (status.find("Online: [ node-a node-b ]") != std::string::npos &&
        status.find("partition with quorum") != std::string::npos) {
      break;
    }
    std::this_thread::sleep_for(milliseconds(250));
  }
  ASSERT_NE(status.find("Online: [ node-a node-b ]"), std::string::npos) << status;
  std::cout << "the cluster formed after "
            << std::chrono::duration_cast<milliseconds>(Clock::now() - at).count() << " ms\n";

  const std::string resources = fmt::format(R"(<group id="nlockd-service">
  <primitive id="nlockd-ip" class="ocf" provider="heartbeat" type="IPaddr2">
    <instance_attributes id="nlockd-ip-params">
      <nvpair id="nlockd-ip-ip" name="ip" value="{}"/>
      <nvpair id="nlockd-ip-mask" name="cidr_netmask" value="24"/>
      <nvpair id="nlockd-ip-nic" name="nic" value="lan0"/>
    </instance_attributes>
    <operations>
      <op id="nlockd-ip-monitor" name="monitor" interval="10s" timeout="20s"/>
    </operations>
  </primitive>
  <primitive id="nlockd" class="ocf" provider="nlockd" type="nlockd">
    <instance_attributes id="nlockd-params">
      <nvpair id="nlockd-binary" name="binary" value="{}"/>
      <nvpair id="nlockd-config" name="config" value="/run/nlockd.toml"/>
      <nvpair id="nlockd-logfile" name="logfile" value="/var/log/pacemaker/nlockd.log"/>
    </instance_attributes>
    <operations>
      <op id="nlockd-start" name="start" interval="0s" timeout="60s"/>
      <op id="nlockd-stop" name="stop" interval="0s" timeout="40s"/>
      <op id="nlockd-monitor" name="monitor" interval="2s" timeout="20s"/>
    </operations>
  </primitive>
</group>
)",
                                            kServiceAddress, NLOCKD_BINARY);
  WriteFile(dir_ / "resources.xml", resources);
  for (const std::vector<std::string>& command :
       {std::vector<std::string>{"crm_attribute", "-t", "crm_config", "-n", "stonith-enabled", "-v",
                                 "false"},
        std::vector<std::string>{"crm_attribute", "-t", "rsc_defaults", "-n", "migration-threshold",
                                 "-v", "1"},
        std::vector<std::string>{"cibadmin", "--create", "-o", "resources", "--xml-file",
                                 (dir_ / "resources.xml").string()}}) {
    auto [rc, out] = RunCommand(InNode(0, command));
    ASSERT_EQ(rc, 0) << out;
  }
  std::optional<int> first;
  const auto started_by = Clock::now() + seconds(60);
  while (!first && Clock::now() < started_by) {
    first = GroupNode();
    if (!first) std::this_thread::sleep_for(milliseconds(200));
  }
  ASSERT_TRUE(first.has_value()) << Cluster({"crm_mon", "-1"});
  const int a = *first;
  const int b = 1 - a;
  ASSERT_TRUE(WaitGroupAt(a, seconds(10))) << Cluster({"crm_mon", "-1"});
  StartLoad();
  ASSERT_FALSE(HasFatalFailure());
  std::this_thread::sleep_for(milliseconds(300));

  // A planned move.
  int32_t state_before = CurrentState();
  at = Clock::now();
  Cluster({"crm_resource", "--move", "-r", "nlockd-service", "-N",
           fmt::format("node-{}", static_cast<char>('a' + b))});
  ASSERT_TRUE(WaitGroupAt(b, seconds(60))) << Cluster({"crm_mon", "-1"});
  std::cout << "crm_resource --move: the group ran on the other node after "
            << std::chrono::duration_cast<milliseconds>(Clock::now() - at).count() << " ms\n";
  Cluster({"crm_resource", "--clear", "-r", "nlockd-service"});
  EXPECT_TRUE(WaitAllReclaimed(state_before, seconds(30)));
  EXPECT_TRUE(WaitGrantsAfter(Clock::now(), seconds(30))) << "no lock granted after the move";

  // kill -9 of nlockd: the agent's monitor reports the failure, the group moves back.
  state_before = CurrentState();
  auto [rc, pid_text] = RunCommand(InNode(b, {"cat", "/run/resource-agents/nlockd-nlockd.pid"}));
  ASSERT_EQ(rc, 0) << pid_text;
  at = Clock::now();
  ASSERT_EQ(kill(static_cast<pid_t>(std::stol(pid_text)), SIGKILL), 0);
  ASSERT_TRUE(WaitGroupAt(a, seconds(60))) << Cluster({"crm_mon", "-1"});
  std::cout << "kill -9: the group ran on the other node after "
            << std::chrono::duration_cast<milliseconds>(Clock::now() - at).count() << " ms\n";
  // The group moved because the agent's monitor failed (nlockd gone, or not answering while
  // it died), not because Pacemaker thought it stopped.
  const std::string failed = Cluster({"crm_mon", "-1"});
  EXPECT_TRUE(
      std::regex_search(failed, std::regex(R"(nlockd \S+ monitor on node-. returned 'error')")))
      << failed;
  EXPECT_TRUE(WaitAllReclaimed(state_before, seconds(30)));
  EXPECT_TRUE(WaitGrantsAfter(Clock::now(), seconds(30))) << "no lock granted after takeover";
  StopAndCheck();
}

}  // namespace
}  // namespace nlockd::integration::hafault
