// SPDX-License-Identifier: Apache-2.0
// The API over real HTTP (127.0.0.1, a free port) against a FakeBackend: every endpoint, its
// filters and paging, and the error answers.
#include "admin/router.hpp"

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "admin/metrics.hpp"
#include "admin/testing/test_server.hpp"
#include "nlockd_build_info.hpp"

namespace nlockd::admin {
namespace {

using nlohmann::json;
using testing::TestServer;

class AdminApiTest : public ::testing::Test {
 protected:
  AdminApiTest() : client_(server_.url()) {}

  // GET/POST/DELETE; returns (status, parsed body).
  std::pair<int, json> Call(const std::string& method, const std::string& path,
                            const std::string& body = "") {
    httplib::Result result = method == "GET"      ? client_.Get(path)
                             : method == "DELETE" ? client_.Delete(path)
                             : method == "PUT"    ? client_.Put(path, body, "application/json")
                                                  : client_.Post(path, body, "application/json");
    EXPECT_TRUE(result) << method << " " << path;
    if (!result) return {0, json()};
    EXPECT_EQ(result->get_header_value("Content-Type"), "application/json") << path;
    return {result->status, json::parse(result->body)};
  }

  static std::string ErrorCode(const json& body) { return body.at("error").at("code"); }

  TestServer server_;
  httplib::Client client_;
};

TEST_F(AdminApiTest, StatusReportsStateGraceAndCounts) {
  auto [status, body] = Call("GET", "/api/v1/status");
  EXPECT_EQ(status, 200);
  EXPECT_EQ(body["state_number"], 7);
  EXPECT_EQ(body["server_name"], "server.example");
  EXPECT_EQ(body["uptime_seconds"], 12.5);
  EXPECT_EQ(body["version"], NLOCKD_BUILD_VERSION);
  EXPECT_EQ(body["revision"], NLOCKD_BUILD_REVISION);
  EXPECT_EQ(body["grace"]["active"], true);
  EXPECT_EQ(body["grace"]["mode"], "fine-grained");
  EXPECT_EQ(body["grace"]["reclaims_expected"], 2);
  EXPECT_EQ(body["counts"].dump(),
            R"({"hosts":2,"locks":3,"monitored_hosts":2,"pending_grants":0,"registrations":3,)"
            R"("shares":1,"waiters":1})");
}

TEST_F(AdminApiTest, ClientsListFiltersAndPages) {
  auto [status, body] = Call("GET", "/api/v1/clients");
  EXPECT_EQ(status, 200);
  EXPECT_EQ(body["clients"].size(), 3u);
  EXPECT_EQ(body["total"], 3);
  EXPECT_EQ(body["next_offset"], nullptr);
  EXPECT_EQ(body["clients"][0]["mon_name"], "client-a");
  EXPECT_EQ(body["clients"][0]["priv"], "01010101010101010101010101010101");
  EXPECT_EQ(body["clients"][0]["id"], MakeRegistrationId("client-a", "localhost", 100021, 1, 16));

  std::tie(status, body) = Call("GET", "/api/v1/clients?mon_name=client-b");
  EXPECT_EQ(body["total"], 2);
  std::tie(status, body) = Call("GET", "/api/v1/clients?mon_name=client-b&my_name=other-lockd");
  ASSERT_EQ(body["clients"].size(), 1u);
  EXPECT_EQ(body["clients"][0]["my_prog"], 200001);

  std::tie(status, body) = Call("GET", "/api/v1/clients?limit=1&offset=1");
  EXPECT_EQ(status, 200);
  ASSERT_EQ(body["clients"].size(), 1u);
  EXPECT_EQ(body["clients"][0]["mon_name"], "client-b");
  EXPECT_EQ(body["total"], 3);
  EXPECT_EQ(body["offset"], 1);
  EXPECT_EQ(body["limit"], 1);
  EXPECT_EQ(body["next_offset"], 2);
}

TEST_F(AdminApiTest, BadPagingIsABadRequest) {
  for (const char* path :
       {"/api/v1/clients?limit=0", "/api/v1/clients?limit=1001", "/api/v1/clients?offset=-1",
        "/api/v1/hosts?limit=ten", "/api/v1/locks?offset=1x", "/api/v1/clients?mon_name=%zz"}) {
    auto [status, body] = Call("GET", path);
    EXPECT_EQ(status, 400) << path;
    EXPECT_EQ(ErrorCode(body), "invalid_argument") << path;
  }
}

TEST_F(AdminApiTest, ClientShowAndDelete) {
  const std::string id = MakeRegistrationId("client-b", "other-lockd", 200001, 1, 1);
  auto [status, body] = Call("GET", "/api/v1/clients/" + id);
  EXPECT_EQ(status, 200);
  EXPECT_EQ(body["my_name"], "other-lockd");
  EXPECT_EQ(body["source_address"], "127.0.0.1");

  std::tie(status, body) = Call("DELETE", "/api/v1/clients/" + id);
  EXPECT_EQ(status, 200);
  EXPECT_EQ(body["deleted"], id);
  std::tie(status, body) = Call("GET", "/api/v1/clients/" + id);
  EXPECT_EQ(status, 404);
  EXPECT_EQ(ErrorCode(body), "not_found");
  std::tie(status, body) = Call("DELETE", "/api/v1/clients/" + id);
  EXPECT_EQ(status, 404);
  std::tie(status, body) = Call("GET", "/api/v1/clients");
  EXPECT_EQ(body["total"], 2);
}

TEST_F(AdminApiTest, HostsListShowAndRelease) {
  auto [status, body] = Call("GET", "/api/v1/hosts");
  EXPECT_EQ(status, 200);
  ASSERT_EQ(body["hosts"].size(), 2u);
  EXPECT_EQ(body["hosts"][0]["name"], "client-a");
  EXPECT_EQ(body["hosts"][0]["nsm_state"], 3);
  EXPECT_EQ(body["hosts"][1]["nsm_state"], nullptr);
  std::tie(status, body) = Call("GET", "/api/v1/hosts?limit=1&offset=1");
  ASSERT_EQ(body["hosts"].size(), 1u);
  EXPECT_EQ(body["hosts"][0]["name"], "client-b");

  std::tie(status, body) = Call("GET", "/api/v1/hosts/client-a");
  EXPECT_EQ(status, 200);
  EXPECT_EQ(body["label"], "client-a.example");
  EXPECT_EQ(body["locks"], 2);
  ASSERT_EQ(body["lock_list"].size(), 2u);
  EXPECT_EQ(body["lock_list"][0]["file"], "0102ff");
  EXPECT_EQ(body["lock_list"][0]["owner"], "313140636c69656e742d61");  // "11@client-a"
  EXPECT_EQ(body["lock_list"][1]["awaiting_reclaim"], true);
  ASSERT_EQ(body["share_list"].size(), 1u);
  EXPECT_EQ(body["share_list"][0]["deny"], "write");
  EXPECT_TRUE(body["waiter_list"].empty());

  std::tie(status, body) = Call("POST", "/api/v1/hosts/client-a/release");
  EXPECT_EQ(status, 200);
  EXPECT_EQ(body["host"], "client-a");
  EXPECT_EQ(body["released"].dump(), R"({"locks":2,"shares":1,"waiters":0})");
  std::tie(status, body) = Call("GET", "/api/v1/locks?host=client-a");
  EXPECT_EQ(body["total"], 0);

  std::tie(status, body) = Call("GET", "/api/v1/hosts/nobody");
  EXPECT_EQ(status, 404);
  EXPECT_EQ(ErrorCode(body), "not_found");
  std::tie(status, body) = Call("POST", "/api/v1/hosts/nobody/release");
  EXPECT_EQ(status, 404);
}

TEST_F(AdminApiTest, HostNamesArePercentDecoded) {
  HostView odd;
  odd.name = "we/ird name";
  server_.backend.AddHost(odd);
  auto [status, body] = Call("GET", "/api/v1/hosts/we%2Fird%20name");
  EXPECT_EQ(status, 200);
  EXPECT_EQ(body["name"], "we/ird name");
  std::tie(status, body) = Call("POST", "/api/v1/hosts/we%2Fird%20name/release");
  EXPECT_EQ(status, 200);
  EXPECT_EQ(body["host"], "we/ird name");
}

TEST_F(AdminApiTest, LocksFilterByHostAndFile) {
  auto [status, body] = Call("GET", "/api/v1/locks");
  EXPECT_EQ(status, 200);
  EXPECT_EQ(body["total"], 3);
  std::tie(status, body) = Call("GET", "/api/v1/locks?host=client-b");
  ASSERT_EQ(body["locks"].size(), 1u);
  EXPECT_EQ(body["locks"][0]["file"], "aabb");
  std::tie(status, body) = Call("GET", "/api/v1/locks?file=0102FF");
  EXPECT_EQ(body["total"], 2);
  std::tie(status, body) = Call("GET", "/api/v1/locks?file=0102ff&host=client-a&limit=1");
  EXPECT_EQ(body["total"], 2);
  EXPECT_EQ(body["locks"].size(), 1u);
  EXPECT_EQ(body["next_offset"], 1);

  std::tie(status, body) = Call("GET", "/api/v1/locks?file=xyz");
  EXPECT_EQ(status, 400);
  EXPECT_EQ(ErrorCode(body), "invalid_argument");
}

TEST_F(AdminApiTest, SharesAndWaiters) {
  auto [status, body] = Call("GET", "/api/v1/shares?host=client-a");
  EXPECT_EQ(status, 200);
  ASSERT_EQ(body["shares"].size(), 1u);
  EXPECT_EQ(body["shares"][0]["access"], "read");
  std::tie(status, body) = Call("GET", "/api/v1/waiters");
  EXPECT_EQ(status, 200);
  ASSERT_EQ(body["waiters"].size(), 1u);
  EXPECT_EQ(body["waiters"][0]["id"], 42);
  EXPECT_EQ(body["waiters"][0]["host"], "client-b");
  std::tie(status, body) = Call("GET", "/api/v1/waiters?file=aabb");
  EXPECT_EQ(body["total"], 0);
}

TEST_F(AdminApiTest, GraceShowAndEnd) {
  auto [status, body] = Call("GET", "/api/v1/grace");
  EXPECT_EQ(status, 200);
  EXPECT_EQ(body["active"], true);
  EXPECT_EQ(body["seconds_left"], 80.0);
  std::tie(status, body) = Call("POST", "/api/v1/grace/end");
  EXPECT_EQ(status, 200);
  EXPECT_EQ(body["active"], false);
  EXPECT_EQ(body["mode"], nullptr);
  EXPECT_EQ(body["last_end_reason"], "admin");
  std::tie(status, body) = Call("POST", "/api/v1/grace/end", "{}");
  EXPECT_EQ(status, 409);
  EXPECT_EQ(ErrorCode(body), "conflict");
}

TEST_F(AdminApiTest, NotifyAllOrOneHost) {
  auto [status, body] = Call("POST", "/api/v1/notify");
  EXPECT_EQ(status, 202);
  EXPECT_EQ(body["queued_hosts"], 2);
  std::tie(status, body) = Call("POST", "/api/v1/notify", R"({"host":"client-b"})");
  EXPECT_EQ(status, 202);
  EXPECT_EQ(body["queued_hosts"], 1);
  std::tie(status, body) = Call("POST", "/api/v1/notify", R"({"host":null})");
  EXPECT_EQ(status, 202);
  EXPECT_EQ(server_.backend.notified(), (std::vector<std::string>{"*", "client-b", "*"}));

  std::tie(status, body) = Call("POST", "/api/v1/notify", R"({"host":"stranger"})");
  EXPECT_EQ(status, 404);
  EXPECT_EQ(ErrorCode(body), "not_found");
}

TEST_F(AdminApiTest, ServiceReleaseOnlyOnAnHaNode) {
  auto [status, body] = Call("POST", "/api/v1/service/release");
  EXPECT_EQ(status, 409);
  EXPECT_EQ(ErrorCode(body), "conflict");
  EXPECT_EQ(server_.backend.releases(), 0);

  server_.backend.SetHa("nfs-a", 7);
  std::tie(status, body) = Call("POST", "/api/v1/service/release", "{}");
  EXPECT_EQ(status, 202);
  EXPECT_EQ(body["releasing"], true);
  EXPECT_EQ(body["service"], "nfs-a");
  EXPECT_EQ(body["epoch"], 7);
  EXPECT_EQ(server_.backend.releases(), 1);

  std::tie(status, body) = Call("GET", "/api/v1/service/release");
  EXPECT_EQ(status, 405);
}

TEST_F(AdminApiTest, BadJsonIsABadRequest) {
  for (const char* bad : {"{", "[1,2]", "\"text\"", R"({"host":5})", R"({"host":""})"}) {
    auto [status, body] = Call("POST", "/api/v1/notify", bad);
    EXPECT_EQ(status, 400) << bad;
    EXPECT_EQ(ErrorCode(body), "invalid_argument") << bad;
  }
  auto [status, body] = Call("POST", "/api/v1/grace/end", "not json");
  EXPECT_EQ(status, 400);
  EXPECT_TRUE(server_.backend.notified().empty());
  EXPECT_TRUE(server_.backend.Grace().active);
}

TEST_F(AdminApiTest, UnknownPathIsNotFound) {
  for (const char* path :
       {"/", "/api/v1", "/api/v1/nothing", "/api/v2/status", "/api/v1/status/extra", "/metricsx"}) {
    auto [status, body] = Call("GET", path);
    EXPECT_EQ(status, 404) << path;
    EXPECT_EQ(ErrorCode(body), "not_found") << path;
  }
}

TEST_F(AdminApiTest, WrongMethodIsNotAllowed) {
  struct Case {
    const char* method;
    const char* path;
    const char* allow;
  };
  for (const Case& c :
       {Case{"POST", "/api/v1/status", "GET, HEAD"}, Case{"DELETE", "/api/v1/hosts", "GET, HEAD"},
        Case{"GET", "/api/v1/grace/end", "POST"}, Case{"GET", "/api/v1/notify", "POST"},
        Case{"PUT", "/api/v1/clients/abc", "GET, HEAD, DELETE"},
        Case{"POST", "/metrics", "GET, HEAD"}}) {
    httplib::Result result =
        std::string(c.method) == "GET"      ? client_.Get(c.path)
        : std::string(c.method) == "PUT"    ? client_.Put(c.path, "", "application/json")
        : std::string(c.method) == "DELETE" ? client_.Delete(c.path)
                                            : client_.Post(c.path, "", "application/json");
    ASSERT_TRUE(result);
    EXPECT_EQ(result->status, 405) << c.method << " " << c.path;
    EXPECT_EQ(result->get_header_value("Allow"), c.allow) << c.path;
    EXPECT_EQ(ErrorCode(json::parse(result->body)), "method_not_allowed");
  }
}

TEST_F(AdminApiTest, HeadIsServedWhereGetIs) {
  httplib::Result result = client_.Head("/api/v1/status");
  ASSERT_TRUE(result);
  EXPECT_EQ(result->status, 200);
  EXPECT_TRUE(result->body.empty());
}

TEST_F(AdminApiTest, HealthzAndReadyz) {
  auto [status, body] = Call("GET", "/healthz");
  EXPECT_EQ(status, 200);
  EXPECT_EQ(body["status"], "ok");

  server_.backend.SetReadiness(true, false);
  std::tie(status, body) = Call("GET", "/readyz");
  EXPECT_EQ(status, 503);
  EXPECT_EQ(body["ready"], false);
  EXPECT_EQ(body["store_loaded"], true);
  EXPECT_EQ(body["listening"], false);
  EXPECT_EQ(body["grace"]["active"], true);

  server_.backend.SetReadiness(true, true);
  std::tie(status, body) = Call("GET", "/readyz");
  EXPECT_EQ(status, 200);
  EXPECT_EQ(body["ready"], true);
}

TEST_F(AdminApiTest, MetricsServeTextWithSnapshotGauges) {
  httplib::Result result = client_.Get("/metrics");
  ASSERT_TRUE(result);
  EXPECT_EQ(result->status, 200);
  EXPECT_EQ(result->get_header_value("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_NE(result->body.find("\nnlm_locks_held 3\n"), std::string::npos) << result->body;
  EXPECT_NE(result->body.find("\nnsm_clients_registered 3\n"), std::string::npos);
  EXPECT_NE(result->body.find("\nnlm_grace_active 1\n"), std::string::npos);
  EXPECT_NE(result->body.find("\nnlm_grace_seconds_left 80\n"), std::string::npos);
  EXPECT_NE(result->body.find("\nnsm_state_number 7\n"), std::string::npos);
}

TEST_F(AdminApiTest, HeadIsServedLikeGet) {
  httplib::Result result = client_.Head("/api/v1/status");
  ASSERT_TRUE(result);
  EXPECT_EQ(result->status, 200);
  EXPECT_TRUE(result->body.empty());
}

class AdminTokenTest : public ::testing::Test {
 protected:
  static AdminServerOptions WithToken() {
    AdminServerOptions options;
    options.token = "s3cret";
    return options;
  }
  AdminTokenTest() : server_(WithToken()), client_(server_.url()) {}
  TestServer server_;
  httplib::Client client_;
};

TEST_F(AdminTokenTest, MissingTokenIsUnauthorized) {
  for (const char* path : {"/api/v1/status", "/metrics", "/readyz", "/api/v1/nothing"}) {
    httplib::Result result = client_.Get(path);
    ASSERT_TRUE(result);
    EXPECT_EQ(result->status, 401) << path;
    EXPECT_EQ(result->get_header_value("WWW-Authenticate"), "Bearer");
    EXPECT_EQ(json::parse(result->body)["error"]["code"], "unauthorized");
  }
  httplib::Result result = client_.Post("/api/v1/grace/end", "", "application/json");
  ASSERT_TRUE(result);
  EXPECT_EQ(result->status, 401);
  EXPECT_TRUE(server_.backend.Grace().active);
}

TEST_F(AdminTokenTest, WrongTokenIsUnauthorized) {
  for (const char* token : {"s3cre", "s3cret2", "S3CRET", ""}) {
    client_.set_bearer_token_auth(token);
    httplib::Result result = client_.Get("/api/v1/status");
    ASSERT_TRUE(result);
    EXPECT_EQ(result->status, 401) << token;
  }
  httplib::Headers basic = {{"Authorization", "Basic czNjcmV0"}};
  httplib::Result result = client_.Get("/api/v1/status", basic);
  ASSERT_TRUE(result);
  EXPECT_EQ(result->status, 401);
}

TEST_F(AdminTokenTest, RightTokenIsServed) {
  client_.set_bearer_token_auth("s3cret");
  for (const char* path : {"/api/v1/status", "/metrics", "/readyz"}) {
    httplib::Result result = client_.Get(path);
    ASSERT_TRUE(result);
    EXPECT_EQ(result->status, 200) << path;
  }
  httplib::Headers lower = {{"Authorization", "bearer s3cret"}};
  httplib::Result result = client_.Get("/api/v1/status", lower);
  ASSERT_TRUE(result);
  EXPECT_EQ(result->status, 200);
}

TEST_F(AdminTokenTest, HealthzNeedsNoToken) {
  httplib::Result result = client_.Get("/healthz");
  ASSERT_TRUE(result);
  EXPECT_EQ(result->status, 200);
}

// A node without a running service (an HA standby) answers from its role alone.
TEST(StandbyResponseTest, ReportsTheRoleHolderAndEpoch) {
  Metrics metrics;
  const HaView ha{false, "nlockd pid 7 on a", 3, 5};
  const RouterOptions options{"secret"};
  auto get = [&](const std::string& target, const std::string& authorization) {
    return StandbyResponse({"GET", target, authorization, ""}, ha, metrics, options);
  };
  EXPECT_EQ(get("/healthz", "").status, 200);
  EXPECT_EQ(get("/readyz", "").status, 401);
  const HttpResponse readyz = get("/readyz", "Bearer secret");
  EXPECT_EQ(readyz.status, 503);
  const json ready = json::parse(readyz.body);
  EXPECT_EQ(ready["role"], "standby");
  EXPECT_EQ(ready["holder"], "nlockd pid 7 on a");
  EXPECT_EQ(ready["epoch"], 3);
  EXPECT_EQ(ready["ready"], false);
  const json status = json::parse(get("/api/v1/status", "Bearer secret").body);
  EXPECT_EQ(status["ha"], json({{"role", "standby"},
                                {"holder", "nlockd pid 7 on a"},
                                {"epoch", 3},
                                {"lease_seconds", 5}}));
  const std::string text = get("/metrics", "Bearer secret").body;
  EXPECT_NE(text.find("nlockd_ha_role{role=\"standby\"} 1"), std::string::npos) << text;
  EXPECT_NE(text.find("nlockd_ha_role{role=\"active\"} 0"), std::string::npos) << text;
  EXPECT_NE(text.find("nlockd_ha_epoch 3"), std::string::npos) << text;
  EXPECT_NE(text.find("nlockd_ha_lease_info{holder=\"nlockd pid 7 on a\"} 1"), std::string::npos);
  EXPECT_EQ(get("/api/v1/locks", "Bearer secret").status, 503);
  EXPECT_EQ(
      StandbyResponse({"POST", "/api/v1/grace/end", "Bearer secret", ""}, ha, metrics, options)
          .status,
      503);
}

// The holder label follows the holder: the previous one's series goes.
TEST(StandbyResponseTest, TheLeaseInfoNamesOnlyTheCurrentHolder) {
  Metrics metrics;
  metrics.SetHa(HaView{false, "old", 1, 5});
  metrics.SetHa(HaView{true, "new", 2, 5});
  const std::string text = metrics.Serialize();
  EXPECT_EQ(text.find("holder=\"old\""), std::string::npos) << text;
  EXPECT_NE(text.find("nlockd_ha_lease_info{holder=\"new\"} 1"), std::string::npos) << text;
  EXPECT_NE(text.find("nlockd_ha_role{role=\"active\"} 1"), std::string::npos) << text;
}

}  // namespace
}  // namespace nlockd::admin
