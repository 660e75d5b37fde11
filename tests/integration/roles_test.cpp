// SPDX-License-Identifier: Apache-2.0
// nlockd in the roles beside the Linux NFS stack, between network-namespace hosts: NLM alone
// beside Debian's rpc.statd (nfs-common), as NFS-Ganesha runs; and NLM alone beside nlockd
// serving NSM alone (in place of rpc.statd). Client host 1 takes a lock (the server's NLM asks
// its host's status monitor to watch the client) and then announces a reboot (SM_NOTIFY to the
// server's status monitor), which must call the NLM back (procedure 16, from loopback and a
// privileged port) so that the lock goes.
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <optional>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "integration/scoped_boot_id.hpp"
#include "integration/test_hosts.hpp"
#include "testutil/netns.hpp"
#include "testutil/temp_dir.hpp"

namespace nlockd::integration {
namespace {

constexpr auto kWait = std::chrono::seconds(30);
constexpr int kClient = 1;

using testutil::TempDir;

class Roles : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testutil::NetNamespace::Available()) GTEST_SKIP() << "needs root and ip netns";
    hosts_ = std::make_unique<TestHosts>(NLOCKD_BINARY, "rol", 201, 1);
  }

  std::string Server() const { return hosts_->ServerAddressOf(kClient); }
  std::string Client() const { return hosts_->ClientAddressOf(kClient); }

  // nlockd on the server host with `args`; waits for it to listen and register `programs`
  // version pairs with the server's rpcbind.
  testutil::Subprocess* StartNlockd(std::vector<std::string> args, int pairs) {
    testutil::Subprocess* process = hosts_->StartOnServer(NlockdArgv(std::move(args)));
    EXPECT_TRUE(process->WaitForLine(std::regex("nlockd listening"), kWait)) << process->output();
    EXPECT_TRUE(process->LoggedOrWaitFor(
        std::regex("registered " + std::to_string(pairs) + " programs with rpcbind"), kWait))
        << process->output();
    return process;
  }

  // nlockd on the server host with `args`, not waited for.
  std::vector<std::string> NlockdArgv(std::vector<std::string> args) const {
    std::vector<std::string> argv{NLOCKD_BINARY, "--grace", "0",     "--admin-listen",
                                  "127.0.0.1:0", "--name",  Server()};
    argv.insert(argv.end(), args.begin(), args.end());
    return argv;
  }

  // nlockd serving NSM alone on the server host, its store in the test's directory.
  std::vector<std::string> NsmAloneArgs() const {
    return {"--serve",      "nsm",     "--listen",
            "0.0.0.0:4046", "--store", "sqlite:" + dir_.path() + "/nsm.db"};
  }

  // The server's kernel lockd has the status monitor on the server watch the client (SM_MON
  // over loopback); the state it answered, or nullopt after a failed expectation.
  std::optional<int32_t> ServerMonitorsTheClient() {
    auto [status, lines] = hosts_->RunOnServer(
        {NSM_CLIENT_BINARY, "--server", "127.0.0.1",
         "mon name=" + Client() + " my_name=127.0.0.1 prog=100021 vers=4 proc=16 priv0=1"});
    const std::string succeeded = "mon res=succ state=";
    EXPECT_EQ(lines.size(), 1u) << status;
    if (lines.size() != 1) return std::nullopt;
    EXPECT_EQ(lines[0].rfind(succeeded, 0), 0u) << lines[0];
    if (lines[0].rfind(succeeded, 0) != 0) return std::nullopt;
    return std::stoi(lines[0].substr(succeeded.size()));
  }

  // The server's rpcbind: the port of (program, version) over udp, 0 when not registered.
  int RegisteredPort(int program, int version) {
    auto [status, lines] = hosts_->RunOnServer({"rpcinfo", "-p", "127.0.0.1"});
    std::regex row("^\\s*" + std::to_string(program) + "\\s+" + std::to_string(version) +
                   "\\s+udp\\s+(\\d+)");
    for (const auto& line : lines) {
      std::smatch match;
      if (std::regex_search(line, match, row)) return std::stoi(match[1]);
    }
    return 0;
  }

  std::vector<std::string> NlmFromClient(const std::string& operation) {
    auto [status, lines] =
        hosts_->Run(kClient, {NLM_CLIENT_BINARY, "--server", Server(), operation});
    EXPECT_EQ(status, 0) << ::testing::PrintToString(lines);
    return lines;
  }

  // The client's reboot, as its sm-notify announces it: SM_NOTIFY to the server's status
  // monitor (found through the server's rpcbind), mon_name = the client's address.
  void ClientRebooted(int32_t state) {
    auto [status, lines] =
        hosts_->Run(kClient, {NSM_CLIENT_BINARY, "--server", Server(),
                              "notify name=" + Client() + " state=" + std::to_string(state)});
    EXPECT_EQ(lines, (std::vector<std::string>{"notify ok"}));
  }

  // Lock, reboot, release: the round trip through the server's status monitor.
  // `monitored` checks, before the reboot, that the status monitor watches the client.
  void LockIsReleasedByTheClientsReboot(testutil::Subprocess* nlm,
                                        const std::function<void()>& monitored) {
    EXPECT_EQ(NlmFromClient("lock fh=roles caller=client-1 oh=a svid=1 state=3"),
              (std::vector<std::string>{"lock stat=granted"}));
    std::vector<std::string> denied = NlmFromClient("test fh=roles caller=other oh=b svid=2");
    ASSERT_EQ(denied.size(), 1u);
    EXPECT_EQ(denied[0].rfind("test stat=denied", 0), 0u) << denied[0];
    monitored();
    ClientRebooted(5);
    EXPECT_TRUE(nlm->WaitForLine(std::regex("nlm released\" host=" + Client() + " locks=1"), kWait))
        << nlm->output();
    EXPECT_EQ(nlm->output().find("refused: not loopback with a reserved port"), std::string::npos)
        << nlm->output();
    EXPECT_EQ(NlmFromClient("test fh=roles caller=other oh=b svid=2"),
              (std::vector<std::string>{"test stat=granted"}));
  }

  // The client's lock manager (prints each status callback) and its rpc.statd in `statd_dir`,
  // watching the server as a kernel lockd has it do: SM_MON(server, callback 100021/4/16,
  // priv[0] = `priv0`). Returns the lock manager.
  testutil::Subprocess* ClientStatdWatchesTheServer(const TempDir& statd_dir, int priv0) {
    std::filesystem::create_directory(statd_dir.path() + "/sm");
    std::filesystem::create_directory(statd_dir.path() + "/sm.bak");
    testutil::Subprocess* lock_manager =
        hosts_->Start(kClient, {NSM_STATUS_SERVER_BINARY, "100021", "4"});
    EXPECT_TRUE(lock_manager->WaitForLine(std::regex("^ready udp="), kWait))
        << lock_manager->output();
    testutil::Subprocess* statd =
        hosts_->Start(kClient, {"rpc.statd", "-F", "-L", "-d", "-P", statd_dir.path()});
    auto deadline = std::chrono::steady_clock::now() + kWait;
    while (hosts_->Run(kClient, {"rpcinfo", "-T", "udp", "127.0.0.1", "100024", "1"}).first != 0 &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    auto [status, mon] = hosts_->Run(
        kClient, {NSM_CLIENT_BINARY, "--server", "127.0.0.1",
                  "mon name=" + Server() + " my_name=127.0.0.1 prog=100021 vers=4 proc=16 priv0=" +
                      std::to_string(priv0)});
    EXPECT_EQ(mon.size(), 1u) << status;
    EXPECT_TRUE(!mon.empty() && mon[0].rfind("mon res=succ", 0) == 0)
        << ::testing::PrintToString(mon) << statd->output();
    return lock_manager;
  }

  // How many status callbacks the client's lock manager printed so far.
  static size_t StatusCallbacks(const testutil::Subprocess& lock_manager) {
    size_t count = 0;
    const std::string& output = lock_manager.output();
    for (size_t at = output.find("STATUS proc=16"); at != std::string::npos;
         at = output.find("STATUS proc=16", at + 1)) {
      ++count;
    }
    return count;
  }

  static std::string ReadFile(const std::string& path) {
    std::ifstream in(path);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }

  TempDir dir_;
  std::unique_ptr<TestHosts> hosts_;
};

TEST_F(Roles, NlmAloneMonitorsClientsThroughRpcStatd) {
  // rpc.statd as root (its directory is root's): -L no sm-notify, -F foreground, -d stderr.
  std::filesystem::create_directory(dir_.path() + "/sm");
  std::filesystem::create_directory(dir_.path() + "/sm.bak");
  testutil::Subprocess* statd =
      hosts_->StartOnServer({"rpc.statd", "-F", "-L", "-d", "-P", dir_.path()});
  auto deadline = std::chrono::steady_clock::now() + kWait;
  while (RegisteredPort(100024, 1) == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const int statd_port = RegisteredPort(100024, 1);
  ASSERT_NE(statd_port, 0) << statd->output();

  testutil::Subprocess* nlm =
      StartNlockd({"--serve", "nlm", "--listen", "0.0.0.0:4045", "--store", "memory:"}, 3);
  EXPECT_EQ(RegisteredPort(100021, 4), 4045);
  EXPECT_EQ(RegisteredPort(100024, 1), statd_port) << "rpc.statd's mapping must stay";
  LockIsReleasedByTheClientsReboot(nlm, [&] {
    // statd keeps the client under NLM's host key (its address), for nlockd's NLM.
    EXPECT_TRUE(std::filesystem::exists(dir_.path() + "/sm/" + Client())) << statd->output();
  });
  EXPECT_EQ(nlm->Stop(SIGTERM, std::chrono::seconds(20)), 0) << nlm->output();
}

TEST_F(Roles, NlmAloneBesideNlockdServingNsmAlone) {
  testutil::Subprocess* nsm =
      StartNlockd({"--serve", "nsm", "--listen", "0.0.0.0:4046", "--store",
                   "sqlite:" + dir_.path() + "/nsm.db", "--log-level", "debug"},
                  1);
  testutil::Subprocess* nlm =
      StartNlockd({"--serve", "nlm", "--listen", "0.0.0.0:4045", "--store", "memory:"}, 3);
  EXPECT_EQ(RegisteredPort(100024, 1), 4046);
  EXPECT_EQ(RegisteredPort(100021, 4), 4045);
  // The status monitor does not serve NLM: PROG_UNAVAIL (clnt_stat 8) at its port.
  auto [status, lines] =
      hosts_->RunOnServer({NLM_CLIENT_BINARY, "--server", "127.0.0.1", "--port", "4046", "null"});
  ASSERT_EQ(lines.size(), 1u) << status;
  EXPECT_EQ(lines[0].rfind("null rpc_error=8 ", 0), 0u) << lines[0];
  EXPECT_EQ(
      hosts_->RunOnServer({NLM_CLIENT_BINARY, "--server", "127.0.0.1", "--port", "4045", "null"})
          .second,
      (std::vector<std::string>{"null ok"}));
  LockIsReleasedByTheClientsReboot(nlm, [&] {
    // my_id = (nlockd's name, NLM version 4, procedure 16), mon_name = NLM's host key.
    EXPECT_TRUE(nsm->WaitForLine(
        std::regex("nsm monitoring\" mon_name=" + Client() + " for " + Server() + "/100021/4/16"),
        kWait))
        << nsm->output();
  });
  // The status callback went out from a privileged port: NLM accepted it (above), and the NSM
  // side did not have to warn that it could not bind one.
  EXPECT_EQ(nsm->output().find("cannot bind a privileged source port"), std::string::npos)
      << nsm->output();
  EXPECT_EQ(nlm->Stop(SIGTERM, std::chrono::seconds(20)), 0) << nlm->output();
  EXPECT_EQ(nsm->Stop(SIGTERM, std::chrono::seconds(20)), 0) << nsm->output();
}

// At its restart an NLM-alone nlockd tells the clients it monitored, from its own store, so that
// they reclaim: the client's rpc.statd gets SM_NOTIFY and calls the client's lock manager.
TEST_F(Roles, NlmAloneRestartReachesTheClientsStatd) {
  TempDir server_statd;
  TempDir client_statd;
  std::filesystem::create_directory(server_statd.path() + "/sm");
  std::filesystem::create_directory(server_statd.path() + "/sm.bak");
  hosts_->StartOnServer({"rpc.statd", "-F", "-L", "-d", "-P", server_statd.path()});
  auto deadline = std::chrono::steady_clock::now() + kWait;
  while (RegisteredPort(100024, 1) == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  testutil::Subprocess* lock_manager = ClientStatdWatchesTheServer(client_statd, 42);
  ASSERT_FALSE(HasFailure());

  const std::vector<std::string> args{
      "--serve", "nlm", "--listen", "0.0.0.0:4045", "--store", "sqlite:" + dir_.path() + "/nlm.db"};
  testutil::Subprocess* nlm = StartNlockd(args, 3);
  EXPECT_EQ(NlmFromClient("lock fh=roles caller=client-1 oh=a svid=1 state=3"),
            (std::vector<std::string>{"lock stat=granted"}));
  ASSERT_EQ(nlm->Stop(SIGTERM, std::chrono::seconds(20)), 0) << nlm->output();
  nlm = StartNlockd(args, 3);
  std::regex callback("^STATUS proc=16 mon_name=(\\S+) state=(-?\\d+) priv0=42");
  auto told = lock_manager->WaitForLine(callback, kWait);
  ASSERT_TRUE(told) << lock_manager->output() << nlm->output();
  EXPECT_EQ((*told)[1].str(), Server());
  EXPECT_EQ(nlm->Stop(SIGTERM, std::chrono::seconds(20)), 0) << nlm->output();
}

// nlockd serving NSM alone, restarted while its host keeps running (an upgrade, `systemctl
// restart`): like rpc.statd, whose sm-notify runs once per boot, it keeps its state number and
// tells no peer, for the host's kernel still holds its locks. A restart on a new boot notifies.
TEST_F(Roles, NsmAloneRestartOnTheSameBootKeepsItsStateAndTellsNoOne) {
  TempDir client_statd;
  // The client watches the server (its statd calls the lock manager back on SM_NOTIFY)...
  testutil::Subprocess* lock_manager = ClientStatdWatchesTheServer(client_statd, 7);
  ASSERT_FALSE(HasFailure());

  ScopedBootId boot("roles-boot-a");
  const std::vector<std::string> args = NsmAloneArgs();
  testutil::Subprocess* nsm = StartNlockd(args, 1);
  // ...and the server's kernel lockd has nlockd watch the client.
  const std::optional<int32_t> monitored = ServerMonitorsTheClient();
  ASSERT_TRUE(monitored.has_value());
  const int32_t state = *monitored;
  ASSERT_EQ(nsm->Stop(SIGTERM, std::chrono::seconds(20)), 0) << nsm->output();

  nsm = StartNlockd(args, 1);
  // Logged before "listening", which StartNlockd waited for.
  EXPECT_NE(nsm->output().find("nsm restarted on the same boot: state " + std::to_string(state) +
                               " kept"),
            std::string::npos)
      << nsm->output();
  EXPECT_EQ(nsm->output().find("nsm notifying"), std::string::npos) << nsm->output();
  ASSERT_EQ(nsm->Stop(SIGTERM, std::chrono::seconds(20)), 0) << nsm->output();

  boot.Set("roles-boot-b");
  nsm = StartNlockd(args, 1);
  std::regex callback("^STATUS proc=16 mon_name=(\\S+) state=(-?\\d+) priv0=7");
  auto told = lock_manager->WaitForLine(callback, kWait);
  ASSERT_TRUE(told) << lock_manager->output() << nsm->output();
  EXPECT_EQ((*told)[1].str(), Server());
  EXPECT_EQ(std::stoi((*told)[2].str()), state + 2) << "one bump: the new boot's";
  // The same-boot restart told the client nothing: this is its only callback.
  EXPECT_EQ(StatusCallbacks(*lock_manager), 1u) << lock_manager->output();
  EXPECT_EQ(nsm->Stop(SIGTERM, std::chrono::seconds(20)), 0) << nsm->output();
}

// A new boot's notification must survive a restart before it went out: nlockd stopped (or, in
// the second round, killed) while it holds the round for nfsd (notify.hold), or failing to
// start before it announced anything, then started again on the same boot, must still tell
// every monitored host, with the new boot's state, once the hold ends (SIGUSR2). A restart on
// the same boot otherwise notifies only the hosts recorded as owed, at once.
TEST_F(Roles, NsmAloneRestartedBeforeItsBootsNotificationWentOutStillSendsIt) {
  TempDir client_statd;
  testutil::Subprocess* lock_manager = ClientStatdWatchesTheServer(client_statd, 9);
  ASSERT_FALSE(HasFailure());

  ScopedBootId boot("roles-boot-c");
  const std::vector<std::string> args = NsmAloneArgs();
  std::vector<std::string> held = args;
  held.insert(held.end(), {"--notify-hold", "600"});
  testutil::Subprocess* nsm = StartNlockd(args, 1);
  const std::optional<int32_t> monitored = ServerMonitorsTheClient();
  ASSERT_TRUE(monitored.has_value());
  int32_t state = *monitored;
  ASSERT_EQ(nsm->Stop(SIGTERM, std::chrono::seconds(20)), 0) << nsm->output();

  std::regex callback("^STATUS proc=16 mon_name=(\\S+) state=(-?\\d+) priv0=9");
  int new_boot = 0;
  for (const int stop : {SIGTERM, SIGKILL}) {
    boot.Set("roles-boot-new-" + std::to_string(++new_boot));
    nsm = StartNlockd(held, 1);
    ASSERT_TRUE(nsm->LoggedOrWaitFor(std::regex("nsm holding the restart notification"), kWait))
        << nsm->output();
    nsm->Stop(stop, std::chrono::seconds(20));
    // The round never began, so it still waits for the hold's end (nfsd running): SIGUSR2.
    nsm = StartNlockd(held, 1);
    ASSERT_TRUE(nsm->LoggedOrWaitFor(
        std::regex("restarted on the same boot before its restart notification went out"), kWait))
        << nsm->output();
    ASSERT_TRUE(nsm->LoggedOrWaitFor(std::regex("nsm holding the restart notification"), kWait))
        << nsm->output();
    ASSERT_EQ(::kill(nsm->pid(), SIGUSR2), 0);
    auto told = lock_manager->WaitForLine(callback, kWait);
    ASSERT_TRUE(told) << "stopped by signal " << stop << "\n"
                      << lock_manager->output() << nsm->output();
    EXPECT_EQ((*told)[1].str(), Server());
    EXPECT_EQ(std::stoi((*told)[2].str()), state + 2) << "the new boot's state, kept";
    state += 2;
    ASSERT_EQ(nsm->Stop(SIGTERM, std::chrono::seconds(20)), 0) << nsm->output();
  }

  // A start on a new boot that fails after opening its store, before announcing anything (its
  // port taken), leaves the boot to announce: the next start on that boot does.
  boot.Set("roles-boot-new-" + std::to_string(++new_boot));
  testutil::Subprocess* squatter =
      hosts_->StartOnServer({"python3", "-c",
                             "import socket, time\n"
                             "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
                             "s.bind(('0.0.0.0', 4046))\n"
                             "print('bound', flush=True)\n"
                             "time.sleep(600)\n"});
  ASSERT_TRUE(squatter->WaitForLine(std::regex("^bound"), kWait)) << squatter->output();
  testutil::Subprocess* refused = hosts_->StartOnServer(NlockdArgv(args));
  const std::optional<int> status = refused->Wait(std::chrono::seconds(20));
  ASSERT_TRUE(status.has_value()) << refused->output();
  EXPECT_NE(*status, 0) << refused->output();
  squatter->Stop(SIGKILL, std::chrono::seconds(20));
  nsm = StartNlockd(args, 1);
  auto told = lock_manager->WaitForLine(callback, kWait);
  ASSERT_TRUE(told) << lock_manager->output() << refused->output() << nsm->output();
  EXPECT_EQ(std::stoi((*told)[2].str()), state + 2);
  ASSERT_EQ(nsm->Stop(SIGTERM, std::chrono::seconds(20)), 0) << nsm->output();
}

// Like sm-notify, which tells the peers of a reboot without waiting for rpc.statd, nlockd serving
// NSM alone (notify.hold 0) announces a new boot from its early-notify file before its store
// opens: the next state after the file's, to the hosts it lists. The store then serves that
// state, and its own round does not tell those hosts again. A start on the same boot announces
// nothing early; a file ahead of the store (a start cut short after reserving a state) moves the
// store up to the state announced.
TEST_F(Roles, NsmAloneAnnouncesANewBootBeforeItsStoreOpens) {
  TempDir client_statd;
  testutil::Subprocess* lock_manager = ClientStatdWatchesTheServer(client_statd, 11);
  ASSERT_FALSE(HasFailure());

  ScopedBootId boot("roles-boot-early-a");
  const std::vector<std::string> args = NsmAloneArgs();
  const std::string early_file = dir_.path() + "/nsm.db.early-notify";
  testutil::Subprocess* nsm = StartNlockd(args, 1);
  const std::optional<int32_t> monitored = ServerMonitorsTheClient();
  ASSERT_TRUE(monitored.has_value());
  const int32_t state = *monitored;
  // The client's SM_MON reaches the file shortly after (written off the io thread).
  auto deadline = std::chrono::steady_clock::now() + kWait;
  auto lists_the_client = [&] {
    return ReadFile(early_file).find("\nhost " + Client() + " ") != std::string::npos;
  };
  while (!lists_the_client() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(lists_the_client()) << nsm->output();
  nsm->Stop(SIGKILL, std::chrono::seconds(20));  // a power cut, as far as nlockd can tell

  std::regex callback("^STATUS proc=16 mon_name=(\\S+) state=(-?\\d+) priv0=11");
  boot.Set("roles-boot-early-b");
  nsm = StartNlockd(args, 1);
  auto told = lock_manager->WaitForLine(callback, kWait);
  ASSERT_TRUE(told) << lock_manager->output() << nsm->output();
  EXPECT_EQ((*told)[1].str(), Server());
  EXPECT_EQ(std::stoi((*told)[2].str()), state + 2);
  ASSERT_TRUE(nsm->LoggedOrWaitFor(
      std::regex("nsm notifying 0 hosts of state " + std::to_string(state + 2) +
                 " as \\S+ \\(1 answered the early round\\)"),
      kWait))
      << nsm->output();
  const std::string& log = nsm->output();
  const size_t early = log.find("before the store opens (early round)");
  ASSERT_NE(early, std::string::npos) << log;
  EXPECT_LT(early, log.find("store sqlite:")) << log;
  // The store serves the state announced, and the client heard of it once.
  EXPECT_EQ(ServerMonitorsTheClient(), state + 2);
  EXPECT_EQ(StatusCallbacks(*lock_manager), 1u) << lock_manager->output();
  ASSERT_EQ(nsm->Stop(SIGTERM, std::chrono::seconds(20)), 0) << nsm->output();

  // The same boot: nothing early, the state kept.
  nsm = StartNlockd(args, 1);
  EXPECT_EQ(nsm->output().find("early round"), std::string::npos) << nsm->output();
  EXPECT_NE(nsm->output().find("nsm restarted on the same boot: state " +
                               std::to_string(state + 2) + " kept"),
            std::string::npos)
      << nsm->output();
  // A second process on the same store, as if on another boot, announces nothing: the store's
  // lock is taken before the file is read.
  boot.Set("roles-boot-early-x");
  testutil::Subprocess* second = hosts_->StartOnServer(NlockdArgv(args));
  const std::optional<int> refused = second->Wait(std::chrono::seconds(20));
  ASSERT_TRUE(refused.has_value()) << second->output();
  EXPECT_NE(*refused, 0) << second->output();
  EXPECT_NE(second->output().find("in use by another nlockd"), std::string::npos)
      << second->output();
  EXPECT_EQ(second->output().find("early round"), std::string::npos) << second->output();
  boot.Set("roles-boot-early-b");
  ASSERT_EQ(nsm->Stop(SIGTERM, std::chrono::seconds(20)), 0) << nsm->output();
  // Neither the restart on the same boot nor the second process told the client anything.
  EXPECT_EQ(StatusCallbacks(*lock_manager), 1u) << lock_manager->output();

  // A file ahead of the store, as a start that reserved state + 6 and was cut short before its
  // store moved leaves it: the next boot announces state + 8, and the store catches up to it.
  {
    std::string text = ReadFile(early_file);
    const std::string old_state = "\nstate " + std::to_string(state + 2) + "\n";
    const size_t at = text.find(old_state);
    ASSERT_NE(at, std::string::npos) << text;
    text.replace(at, old_state.size(), "\nstate " + std::to_string(state + 6) + "\n");
    std::ofstream(early_file, std::ios::trunc) << text;
  }
  boot.Set("roles-boot-early-c");
  nsm = StartNlockd(args, 1);
  told = lock_manager->WaitForLine(callback, kWait);
  ASSERT_TRUE(told) << lock_manager->output() << nsm->output();
  EXPECT_EQ(std::stoi((*told)[2].str()), state + 8);
  EXPECT_EQ(ServerMonitorsTheClient(), state + 8);
  ASSERT_EQ(nsm->Stop(SIGTERM, std::chrono::seconds(20)), 0) << nsm->output();

  // A configuration without early rounds (notify.hold) removes the file.
  std::vector<std::string> held = args;
  held.insert(held.end(), {"--notify-hold", "600"});
  nsm = StartNlockd(held, 1);
  EXPECT_FALSE(std::filesystem::exists(early_file)) << nsm->output();
  ASSERT_EQ(nsm->Stop(SIGTERM, std::chrono::seconds(20)), 0) << nsm->output();
}

}  // namespace
}  // namespace nlockd::integration
