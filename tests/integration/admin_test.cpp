// SPDX-License-Identifier: Apache-2.0
// The admin HTTP server of the real nlockd: NLM locks and NSM registrations made with the rpcgen
// clients, then checked and steered through real HTTP requests (cpp-httplib), promtool, and the
// built nlockctl.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <regex>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>
#include <sys/socket.h>
#include <unistd.h>

#include "integration/nlm_rpcgen.hpp"
#include "integration/nlm_test_support.hpp"
#include "integration/nlockd_process.hpp"
#include "integration/nsm_rpcgen.hpp"
#include "testutil/raw_tcp_connection.hpp"
#include "testutil/subprocess.hpp"

namespace nlockd::integration {
namespace {

using nlohmann::json;

struct Answer {
  int status = 0;  // 0: no answer
  std::string body;

  json Json() const { return json::parse(body, nullptr, false); }
};

// An HTTP client of one nlockd's admin server.
class Admin {
 public:
  explicit Admin(uint16_t port, std::string token = "")
      : client_("127.0.0.1", port), token_(std::move(token)) {
    client_.set_read_timeout(std::chrono::seconds(10));
  }

  Answer Get(const std::string& path) { return Of(client_.Get(path, Headers())); }
  Answer Post(const std::string& path, const std::string& body = "") {
    return Of(client_.Post(path, Headers(), body, "application/json"));
  }
  Answer Delete(const std::string& path) { return Of(client_.Delete(path, Headers())); }

 private:
  httplib::Headers Headers() const {
    if (token_.empty()) return {};
    return {{"Authorization", "Bearer " + token_}};
  }
  static Answer Of(const httplib::Result& result) {
    if (!result) return {};
    return {result->status, result->body};
  }

  httplib::Client client_;
  std::string token_;
};

std::unique_ptr<NlockdProcess> StartNlockd(int grace_seconds, std::vector<std::string> extra = {}) {
  std::vector<std::string> args{"--listen",
                                "127.0.0.1:0",
                                "--rpcbind-register=false",
                                "--grace",
                                std::to_string(grace_seconds),
                                "--name",
                                "server.test"};
  args.insert(args.end(), extra.begin(), extra.end());
  return std::make_unique<NlockdProcess>(NLOCKD_BINARY, args);
}

std::unique_ptr<NlmRpcgenClient> NlmClient(const NlockdProcess& nlockd) {
  return NlmRpcgenClient::Connect(4, true, LoopbackAddress(nlockd.port()));
}

std::string Hex(const std::string& bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (char c : bytes) {
    auto byte = static_cast<unsigned char>(c);
    out += kDigits[byte >> 4];
    out += kDigits[byte & 0xf];
  }
  return out;
}

// The value of the first sample of `family` whose labels contain `labels`; -1 if none.
// The sum of the family's samples whose labels contain `labels` (series exist at 0 from the
// start, so a partial label set matches several); -1 when none does.
double Sample(const std::string& metrics, const std::string& family, const std::string& labels) {
  std::regex line("^" + family + R"((\{[^}]*\})? (\S+)$)");
  std::istringstream in(metrics);
  double sum = 0;
  bool found = false;
  for (std::string text; std::getline(in, text);) {
    std::smatch match;
    if (!std::regex_match(text, match, line)) continue;
    if (!labels.empty() && match[1].str().find(labels) == std::string::npos) continue;
    sum += std::stod(match[2]);
    found = true;
  }
  return found ? sum : -1;
}

struct CtlRun {
  int status;
  std::string output;
};

CtlRun Nlockctl(uint16_t admin_port, std::vector<std::string> args) {
  args.insert(args.begin(),
              {NLOCKCTL_BINARY, "--server", "http://127.0.0.1:" + std::to_string(admin_port)});
  auto [status, output] = testutil::RunCommand(args);
  return {status, output};
}

TEST(AdminApi, ReflectsAndSteersNlmLocksAndNsmRegistrations) {
  auto nlockd = StartNlockd(0);
  ASSERT_NE(nlockd->admin_port(), 0) << nlockd->process().output();
  Admin admin(nlockd->admin_port());
  EXPECT_EQ(admin.Get("/healthz").status, 200);
  Answer ready = admin.Get("/readyz");
  EXPECT_EQ(ready.status, 200) << ready.body;
  EXPECT_EQ(ready.Json()["ready"], true);

  NsmRpcgenClient nsm("127.0.0.1", nlockd->port(), true);
  ASSERT_TRUE(nsm.connected()) << nsm.error();
  auto mon = nsm.Mon("client-a", NsmMyId{});
  ASSERT_TRUE(mon && mon->succeeded) << nsm.error();

  auto nlm = NlmClient(*nlockd);
  ASSERT_NE(nlm, nullptr) << NlmRpcgenClient::CreateError();
  const std::string fh = "fh-admin";
  EXPECT_EQ(Outcome(nlm->Lock(Owner(fh, 1, 0, 100), NlmLockFlags{}, "a"), *nlm), "granted");
  EXPECT_EQ(Outcome(nlm->Lock(Owner(fh, 2, 50, 10), NlmLockFlags{.block = true}, "b"), *nlm),
            "blocked");

  json status = admin.Get("/api/v1/status").Json();
  EXPECT_EQ(status["server_name"], "server.test");
  EXPECT_EQ(status["state_number"].get<int>() % 2, 1) << status;
  // client-a's SM_MON and nlockd's own NLM monitoring 127.0.0.1.
  EXPECT_EQ(status["counts"]["registrations"], 2) << status;
  EXPECT_EQ(status["counts"]["hosts"], 1);
  EXPECT_EQ(status["counts"]["locks"], 1);
  EXPECT_EQ(status["counts"]["waiters"], 1);
  EXPECT_EQ(status["grace"]["active"], false);

  json clients = admin.Get("/api/v1/clients?mon_name=client-a").Json();
  ASSERT_EQ(clients["total"], 1) << clients;
  const std::string id = clients["clients"][0]["id"];
  EXPECT_EQ(clients["clients"][0]["my_prog"], 100021);
  EXPECT_EQ(admin.Get("/api/v1/clients/" + id).Json()["mon_name"], "client-a");

  json hosts = admin.Get("/api/v1/hosts").Json();
  ASSERT_EQ(hosts["total"], 1) << hosts;
  EXPECT_EQ(hosts["hosts"][0]["name"], "127.0.0.1");
  EXPECT_EQ(hosts["hosts"][0]["label"], "client");
  EXPECT_EQ(hosts["hosts"][0]["monitored"], true);
  EXPECT_EQ(hosts["hosts"][0]["locks"], 1);
  EXPECT_EQ(hosts["hosts"][0]["waiters"], 1);
  json host = admin.Get("/api/v1/hosts/127.0.0.1").Json();
  EXPECT_EQ(host["lock_list"].size(), 1u) << host;
  EXPECT_EQ(host["waiter_list"].size(), 1u) << host;
  EXPECT_EQ(admin.Get("/api/v1/hosts/10.9.9.9").status, 404);

  json locks = admin.Get("/api/v1/locks?host=127.0.0.1").Json();
  ASSERT_EQ(locks["total"], 1) << locks;
  EXPECT_EQ(locks["locks"][0]["file"], Hex(fh));
  EXPECT_EQ(locks["locks"][0]["svid"], 1);
  EXPECT_EQ(locks["locks"][0]["length"], 100);
  EXPECT_EQ(admin.Get("/api/v1/locks?file=" + Hex("other")).Json()["total"], 0);
  json waiters = admin.Get("/api/v1/waiters").Json();
  ASSERT_EQ(waiters["total"], 1) << waiters;
  EXPECT_EQ(waiters["waiters"][0]["svid"], 2);
  EXPECT_EQ(waiters["waiters"][0]["granted"], false);

  // Metrics: the traffic above, and a format promtool accepts.
  Answer metrics = admin.Get("/metrics");
  ASSERT_EQ(metrics.status, 200);
  EXPECT_GE(Sample(metrics.body, "nlm_requests_total", "procedure=\"LOCK\""), 1) << metrics.body;
  // The result label is the status of the reply.
  EXPECT_EQ(Sample(metrics.body, "nlm_requests_total",
                   R"(procedure="LOCK",result="granted",version="4")"),
            1);
  EXPECT_EQ(Sample(metrics.body, "nlm_requests_total",
                   R"(procedure="LOCK",result="blocked",version="4")"),
            1);
  EXPECT_EQ(Sample(metrics.body, "nsm_requests_total", R"(procedure="SM_MON",result="stat_succ")"),
            1);
  EXPECT_EQ(Sample(metrics.body, "nlm_locks_held", ""), 1);
  EXPECT_EQ(Sample(metrics.body, "nlm_waiters", ""), 1);
  EXPECT_EQ(Sample(metrics.body, "nsm_clients_registered", ""), 2);
  EXPECT_GT(Sample(metrics.body, "rpc_bytes_received_total", ""), 0);
  EXPECT_EQ(Sample(metrics.body, "rpc_connections", ""), 2);
  const std::string path = ::testing::TempDir() + "nlockd-admin-metrics.txt";
  std::ofstream(path) << metrics.body;
  auto [promtool_status, promtool_output] =
      testutil::RunCommand({"sh", "-c", "promtool check metrics < " + path});
  EXPECT_EQ(promtool_status, 0) << promtool_output;
  std::remove(path.c_str());

  // Notify: every monitored host, one, or 404 for a host nobody monitors.
  Answer notify = admin.Post("/api/v1/notify", R"({"host":"client-a"})");
  EXPECT_EQ(notify.status, 202) << notify.body;
  EXPECT_EQ(notify.Json()["queued_hosts"], 1);
  EXPECT_EQ(admin.Post("/api/v1/notify").Json()["queued_hosts"], 2);
  EXPECT_EQ(admin.Post("/api/v1/notify", R"({"host":"nobody"})").status, 404);

  // Delete the SM_MON registration; nlockd's own cannot be deleted while it holds locks.
  EXPECT_EQ(admin.Delete("/api/v1/clients/" + id).status, 200);
  EXPECT_EQ(admin.Get("/api/v1/clients/" + id).status, 404);
  EXPECT_EQ(admin.Delete("/api/v1/clients/" + id).status, 404);
  json own = admin.Get("/api/v1/clients").Json();
  ASSERT_EQ(own["total"], 1) << own;
  EXPECT_EQ(admin.Delete("/api/v1/clients/" + own["clients"][0]["id"].get<std::string>()).status,
            409);

  // Release the host: its lock and its waiter go, and the range is free for anyone.
  Answer released = admin.Post("/api/v1/hosts/127.0.0.1/release");
  ASSERT_EQ(released.status, 200) << released.body;
  EXPECT_EQ(released.Json()["released"]["locks"], 1) << released.body;
  EXPECT_EQ(released.Json()["released"]["waiters"], 1) << released.body;
  EXPECT_EQ(admin.Get("/api/v1/locks").Json()["total"], 0);
  EXPECT_EQ(admin.Get("/api/v1/waiters").Json()["total"], 0);
  EXPECT_EQ(Outcome(nlm->Test(Owner(fh, 3, 0, 100), true, "t"), *nlm), "granted");

  EXPECT_EQ(admin.Post("/api/v1/grace/end").status, 409);
  EXPECT_EQ(admin.Get("/api/v1/nothing").status, 404);
  // Bad requests: a body that is not JSON, a bad query, a method the path does not take.
  EXPECT_EQ(admin.Post("/api/v1/notify", "{not json").status, 400);
  EXPECT_EQ(admin.Post("/api/v1/notify", R"({"host":7})").status, 400);
  EXPECT_EQ(admin.Get("/api/v1/locks?limit=0").status, 400);
  EXPECT_EQ(admin.Get("/api/v1/locks?file=zz").status, 400);
  EXPECT_EQ(admin.Delete("/api/v1/status").status, 405);
  nlm.reset();
  EXPECT_EQ(nlockd->Stop(), 0) << nlockd->process().output();
}

TEST(AdminApi, EndingGraceLetsNewLocksThrough) {
  auto nlockd = StartNlockd(300);
  Admin admin(nlockd->admin_port());
  json grace = admin.Get("/api/v1/grace").Json();
  EXPECT_EQ(grace["active"], true) << grace;
  EXPECT_EQ(grace["mode"], "classic");
  EXPECT_GT(grace["seconds_left"].get<double>(), 200);
  auto nlm = NlmClient(*nlockd);
  ASSERT_NE(nlm, nullptr) << NlmRpcgenClient::CreateError();
  EXPECT_EQ(Outcome(nlm->Lock(Owner("fh-g", 1, 0, 1), NlmLockFlags{}, "a"), *nlm),
            "denied_grace_period");

  Answer ended = admin.Post("/api/v1/grace/end");
  ASSERT_EQ(ended.status, 200) << ended.body;
  EXPECT_EQ(ended.Json()["active"], false);
  EXPECT_EQ(ended.Json()["last_end_reason"], "admin");
  EXPECT_EQ(Outcome(nlm->Lock(Owner("fh-g", 1, 0, 1), NlmLockFlags{}, "b"), *nlm), "granted");
  EXPECT_EQ(admin.Post("/api/v1/grace/end").status, 409);
  EXPECT_EQ(Sample(admin.Get("/metrics").body, "nlm_grace_active", ""), 0);
  nlm.reset();
  EXPECT_EQ(nlockd->Stop(), 0) << nlockd->process().output();
}

TEST(AdminApi, NlockctlDrivesTheRunningServer) {
  auto nlockd = StartNlockd(300);
  const uint16_t port = nlockd->admin_port();
  NsmRpcgenClient nsm("127.0.0.1", nlockd->port(), true);
  auto mon = nsm.Mon("client-a", NsmMyId{});
  ASSERT_TRUE(mon && mon->succeeded) << nsm.error();

  CtlRun run = Nlockctl(port, {"status"});
  EXPECT_EQ(run.status, 0) << run.output;
  EXPECT_NE(run.output.find("server_name: server.test\n"), std::string::npos) << run.output;
  run = Nlockctl(port, {"--json", "status"});
  ASSERT_EQ(run.status, 0) << run.output;
  EXPECT_EQ(json::parse(run.output)["counts"]["registrations"], 1) << run.output;

  run = Nlockctl(port, {"clients", "list"});
  EXPECT_EQ(run.status, 0) << run.output;
  EXPECT_NE(run.output.find("client-a"), std::string::npos) << run.output;
  run = Nlockctl(port, {"clients", "show", "0000000000000000"});
  EXPECT_EQ(run.status, 1) << run.output;

  run = Nlockctl(port, {"grace", "end"});
  EXPECT_EQ(run.status, 0) << run.output;
  auto nlm = NlmClient(*nlockd);
  ASSERT_NE(nlm, nullptr) << NlmRpcgenClient::CreateError();
  EXPECT_EQ(Outcome(nlm->Lock(Owner("fh-ctl", 7, 0, 10), NlmLockFlags{}, "a"), *nlm), "granted");
  run = Nlockctl(port, {"grace", "end"});
  EXPECT_EQ(run.status, 1) << run.output;

  run = Nlockctl(port, {"--json", "locks", "list"});
  ASSERT_EQ(run.status, 0) << run.output;
  json locks = json::parse(run.output);
  ASSERT_EQ(locks["total"], 1) << run.output;
  EXPECT_EQ(locks["locks"][0]["svid"], 7);
  run = Nlockctl(port, {"locks", "list"});
  EXPECT_EQ(run.status, 0) << run.output;
  EXPECT_NE(run.output.find(Hex("fh-ctl")), std::string::npos) << run.output;
  nlm.reset();
  EXPECT_EQ(nlockd->Stop(), 0) << nlockd->process().output();
}

TEST(AdminApi, EveryNlockctlCommandWorksAgainstTheRunningServer) {
  auto nlockd = StartNlockd(0);
  const uint16_t port = nlockd->admin_port();
  NsmRpcgenClient nsm("127.0.0.1", nlockd->port(), true);
  auto mon = nsm.Mon("client-a", NsmMyId{});
  ASSERT_TRUE(mon && mon->succeeded) << nsm.error();
  auto nlm = NlmClient(*nlockd);
  ASSERT_NE(nlm, nullptr) << NlmRpcgenClient::CreateError();
  const std::string fh = "fh-every";
  EXPECT_EQ(Outcome(nlm->Lock(Owner(fh, 1, 0, 100), NlmLockFlags{}, "a"), *nlm), "granted");
  EXPECT_EQ(Outcome(nlm->Lock(Owner(fh, 2, 50, 10), NlmLockFlags{.block = true}, "b"), *nlm),
            "blocked");

  CtlRun run = Nlockctl(port, {"hosts", "list"});
  EXPECT_EQ(run.status, 0) << run.output;
  EXPECT_NE(run.output.find("127.0.0.1"), std::string::npos) << run.output;
  run = Nlockctl(port, {"--json", "hosts", "list", "--limit", "1"});
  ASSERT_EQ(run.status, 0) << run.output;
  EXPECT_EQ(json::parse(run.output)["hosts"][0]["locks"], 1) << run.output;
  run = Nlockctl(port, {"hosts", "show", "127.0.0.1"});
  EXPECT_EQ(run.status, 0) << run.output;
  EXPECT_NE(run.output.find(Hex(fh)), std::string::npos) << run.output;
  EXPECT_EQ(Nlockctl(port, {"hosts", "show", "10.9.9.9"}).status, 1);

  run = Nlockctl(port, {"--json", "waiters", "list", "--file", Hex(fh)});
  ASSERT_EQ(run.status, 0) << run.output;
  EXPECT_EQ(json::parse(run.output)["waiters"][0]["svid"], 2) << run.output;
  run = Nlockctl(port, {"waiters", "list", "--host", "127.0.0.1"});
  EXPECT_EQ(run.status, 0) << run.output;
  EXPECT_NE(run.output.find(Hex(fh)), std::string::npos) << run.output;
  run = Nlockctl(port, {"--json", "locks", "list", "--host", "127.0.0.1"});
  ASSERT_EQ(run.status, 0) << run.output;
  EXPECT_EQ(json::parse(run.output)["total"], 1) << run.output;

  run = Nlockctl(port, {"grace", "show"});
  EXPECT_EQ(run.status, 0) << run.output;
  EXPECT_NE(run.output.find("active: no"), std::string::npos) << run.output;
  run = Nlockctl(port, {"notify"});
  EXPECT_EQ(run.status, 0) << run.output;
  EXPECT_NE(run.output.find("queued SM_NOTIFY to 2 hosts"), std::string::npos) << run.output;
  run = Nlockctl(port, {"notify", "client-a"});
  EXPECT_EQ(run.status, 0) << run.output;
  EXPECT_NE(run.output.find("queued SM_NOTIFY to 1 hosts"), std::string::npos) << run.output;
  EXPECT_EQ(Nlockctl(port, {"notify", "nobody"}).status, 1);

  run = Nlockctl(port, {"--json", "clients", "list", "--mon-name", "client-a"});
  ASSERT_EQ(run.status, 0) << run.output;
  const std::string id = json::parse(run.output)["clients"][0]["id"];
  run = Nlockctl(port, {"clients", "show", id});
  EXPECT_EQ(run.status, 0) << run.output;
  EXPECT_NE(run.output.find("client-a"), std::string::npos) << run.output;
  run = Nlockctl(port, {"clients", "delete", id});
  EXPECT_EQ(run.status, 0) << run.output;
  EXPECT_NE(run.output.find("deleted registration " + id), std::string::npos) << run.output;
  EXPECT_EQ(Nlockctl(port, {"clients", "delete", id}).status, 1);
  // nlockd's own registration of the client host: 409, exit 1.
  run = Nlockctl(port, {"--json", "clients", "list", "--my-name", "nlockd-nlm"});
  ASSERT_EQ(run.status, 0) << run.output;
  run = Nlockctl(port, {"clients", "delete", json::parse(run.output)["clients"][0]["id"]});
  EXPECT_EQ(run.status, 1) << run.output;
  EXPECT_NE(run.output.find("409"), std::string::npos) << run.output;

  run = Nlockctl(port, {"hosts", "release", "127.0.0.1"});
  EXPECT_EQ(run.status, 0) << run.output;
  EXPECT_NE(run.output.find("released 1 locks, 0 shares, 1 waiters of 127.0.0.1"),
            std::string::npos)
      << run.output;
  EXPECT_EQ(json::parse(Nlockctl(port, {"--json", "locks", "list"}).output)["total"], 0);

  // Help and usage errors never reach the server; an unreachable server is exit 3.
  run = Nlockctl(port, {"hosts", "--help"});
  EXPECT_EQ(run.status, 0) << run.output;
  EXPECT_NE(run.output.find("release"), std::string::npos) << run.output;
  EXPECT_EQ(Nlockctl(port, {"hosts"}).status, 2);
  EXPECT_EQ(Nlockctl(port, {"locks", "list", "--limit", "x"}).status, 2);
  EXPECT_EQ(
      testutil::RunCommand({NLOCKCTL_BINARY, "--server", "http://127.0.0.1:1", "status"}).first, 3);
  nlm.reset();
  EXPECT_EQ(nlockd->Stop(), 0) << nlockd->process().output();
}

TEST(AdminApi, TokenIsRequiredEverywhereButHealthz) {
  auto nlockd = StartNlockd(0, {"--admin-token", "s3cret"});
  Admin anonymous(nlockd->admin_port());
  Admin admin(nlockd->admin_port(), "s3cret");
  EXPECT_EQ(anonymous.Get("/healthz").status, 200);
  EXPECT_EQ(anonymous.Get("/api/v1/status").status, 401);
  EXPECT_EQ(anonymous.Get("/metrics").status, 401);
  EXPECT_EQ(Admin(nlockd->admin_port(), "wrong").Get("/api/v1/status").status, 401);
  EXPECT_EQ(admin.Get("/api/v1/status").status, 200);
  EXPECT_EQ(Nlockctl(nlockd->admin_port(), {"status"}).status, 1);
  EXPECT_EQ(Nlockctl(nlockd->admin_port(), {"--token", "s3cret", "status"}).status, 0);
  EXPECT_EQ(nlockd->Stop(), 0) << nlockd->process().output();
}

TEST(AdminApi, AdminListenOffRunsNoAdminServer) {
  auto nlockd = StartNlockd(0, {"--admin-listen", "off"});
  EXPECT_EQ(nlockd->admin_port(), 0);
  // Logged once nlockd serves, after "nlockd listening".
  EXPECT_TRUE(nlockd->process().LoggedOrWaitFor(std::regex("nlockd admin server off")))
      << nlockd->process().output();
  EXPECT_EQ(nlockd->Stop(), 0) << nlockd->process().output();
}

// Resident memory of `pid`, in KiB.
long RssKib(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

int HealthzWithin(uint16_t port, std::chrono::seconds timeout) {
  httplib::Client client("127.0.0.1", port);
  client.set_connection_timeout(timeout);
  client.set_read_timeout(timeout);
  httplib::Result result = client.Get("/healthz");
  return result ? result->status : 0;
}

TEST(AdminLimits, HeadersSentAByteEveryFewSecondsDoNotStarveHealthz) {
  auto nlockd = StartNlockd(0);
  std::vector<std::unique_ptr<testutil::RawTcpConnection>> slow;
  for (int i = 0; i < 8; ++i) {
    slow.push_back(std::make_unique<testutil::RawTcpConnection>(nlockd->admin_port()));
    ASSERT_TRUE(slow.back()->connected());
    slow.back()->Send("GET /metrics HTTP/1.1\r\nX-Slow: a");
  }
  // They keep trickling (a byte each second) while the health check asks.
  std::atomic<bool> done{false};
  std::thread trickle([&] {
    while (!done) {
      for (auto& connection : slow) connection->Send("a");
      for (int i = 0; i < 10 && !done; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  const auto started = std::chrono::steady_clock::now();
  EXPECT_EQ(HealthzWithin(nlockd->admin_port(), std::chrono::seconds(3)), 200);
  const auto took = std::chrono::steady_clock::now() - started;
  done = true;
  trickle.join();
  EXPECT_LT(took, std::chrono::seconds(2));
  EXPECT_EQ(nlockd->Stop(), 0) << nlockd->process().output();
}

TEST(AdminLimits, AdminConnectionsLeaveTheDescriptorsRpcNeeds) {
  auto nlockd = StartNlockd(0);
  // A small descriptor limit, as a host might give the service: 256.
  ASSERT_EQ(testutil::RunCommand(
                {"prlimit", "--pid", std::to_string(nlockd->process().pid()), "--nofile=256:256"})
                .first,
            0);
  std::vector<std::unique_ptr<testutil::RawTcpConnection>> idle;
  for (int i = 0; i < 400; ++i) {
    idle.push_back(std::make_unique<testutil::RawTcpConnection>(nlockd->admin_port()));
  }
  // NSM over TCP (a new connection to the RPC port) and the health check still work.
  NsmRpcgenClient nsm("127.0.0.1", nlockd->port(), true);
  ASSERT_TRUE(nsm.connected()) << nsm.error();
  auto stat = nsm.Stat("x");
  EXPECT_TRUE(stat) << nsm.error();
  EXPECT_EQ(HealthzWithin(nlockd->admin_port(), std::chrono::seconds(3)), 200);
  const std::string& output = nlockd->process().output();
  EXPECT_EQ(output.find("Too many open files"), std::string::npos) << output;
  idle.clear();
  EXPECT_EQ(nlockd->Stop(), 0) << output;
}

TEST(AdminLimits, AChunkedBodyIsNotBufferedPastTheLimit) {
  auto nlockd = StartNlockd(0, {"--admin-token", "s3cret"});
  const pid_t pid = nlockd->process().pid();
  const long before = RssKib(pid);
  testutil::RawTcpConnection connection(nlockd->admin_port());
  ASSERT_TRUE(connection.connected());
  connection.Send(
      "POST /api/v1/notify HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
      "Transfer-Encoding: chunked\r\n\r\n");
  const std::string chunk = "100000\r\n" + std::string(0x100000, ' ') + "\r\n";
  size_t sent_mib = 0;
  while (sent_mib < 100 && connection.Send(chunk)) ++sent_mib;
  const long after = RssKib(pid);
  // Refused after 64 KiB: the server stopped reading long before 100 MiB.
  EXPECT_LT(sent_mib, 100u);
  EXPECT_LT(after - before, 20 * 1024) << before << " KiB -> " << after << " KiB";
  EXPECT_EQ(HealthzWithin(nlockd->admin_port(), std::chrono::seconds(3)), 200);
  EXPECT_EQ(nlockd->Stop(), 0) << nlockd->process().output();
}

TEST(AdminLimits, FailedAuthenticationIsWarnedWithTheSource) {
  auto nlockd = StartNlockd(0, {"--admin-token", "s3cret"});
  Admin wrong(nlockd->admin_port(), "wrong");
  for (int i = 0; i < 50; ++i) EXPECT_EQ(wrong.Get("/api/v1/status").status, 401);
  EXPECT_TRUE(nlockd->process().WaitForLine(
      std::regex("level=warn.*admin: GET /api/v1/status from 127.0.0.1: authentication failed"),
      std::chrono::seconds(10)))
      << nlockd->process().output();
  const std::string& output = nlockd->process().output();
  size_t lines = 0;
  for (size_t at = output.find("authentication failed"); at != std::string::npos;
       at = output.find("authentication failed", at + 1)) {
    ++lines;
  }
  EXPECT_LT(lines, 50u);
  EXPECT_EQ(nlockd->Stop(), 0) << output;
}

}  // namespace
}  // namespace nlockd::integration
