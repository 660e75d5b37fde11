// SPDX-License-Identifier: Apache-2.0
// A client host reboots: nfs-common's sm-notify, run on the rebooted host, tells
// nlockd; the host's locks and shares must go from memory and from the store, and the host
// that waited behind them must be granted through its GRANTED callback.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <sqlite3.h>

#include "integration/recovery_support.hpp"
#include "integration/test_hosts.hpp"
#include "testutil/netns.hpp"

namespace nlockd::integration::recovery {
namespace {

// Rows of `table` per host in the SQLite store at `path` ("host=count" lines, sorted), read
// after nlockd stopped.
std::vector<std::string> RowsPerHost(const std::string& path, const std::string& table) {
  sqlite3* db = nullptr;
  std::vector<std::string> out;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    ADD_FAILURE() << "cannot open " << path << ": " << sqlite3_errmsg(db);
    sqlite3_close(db);
    return out;
  }
  const std::string sql = "SELECT CAST(host AS TEXT), COUNT(*) FROM " + table +
                          " GROUP BY host ORDER BY CAST(host AS TEXT)";
  sqlite3_stmt* statement = nullptr;
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &statement, nullptr) != SQLITE_OK) {
    ADD_FAILURE() << sql << ": " << sqlite3_errmsg(db);
  } else {
    while (sqlite3_step(statement) == SQLITE_ROW) {
      out.push_back(std::string(reinterpret_cast<const char*>(sqlite3_column_text(statement, 0))) +
                    "=" + std::to_string(sqlite3_column_int64(statement, 1)));
    }
  }
  sqlite3_finalize(statement);
  sqlite3_close(db);
  return out;
}

class RecoveryReboot : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testutil::NetNamespace::Available()) GTEST_SKIP() << "needs root and ip netns";
    hosts_ = std::make_unique<TestHosts>(NLOCKD_BINARY, "rcv", 197, 2);
  }
  std::string Nlm(int client, const std::string& operation) {
    auto [status, lines] = hosts_->Run(
        client, {NLM_CLIENT_BINARY, "--server", hosts_->ServerAddressOf(client), operation});
    EXPECT_EQ(status, 0) << ::testing::PrintToString(lines);
    return lines.empty() ? "(no output)" : lines.back();
  }
  // Client `client`'s state directory as its rpc.statd left it before the reboot: sm/ holds one
  // file per monitored host (nlockd's server address) in nfs-utils' record format, `state` its
  // NSM state; then sm-notify, as at boot.
  void RebootNotify(int client, int32_t state) {
    const std::string dir = state_dir_.path() + "/client" + std::to_string(client);
    auto [status, lines] =
        hosts_->Run(client,
                    PrepareRebootNotify(dir, hosts_->ServerAddressOf(client),
                                        "client" + std::to_string(client), state),
                    std::chrono::seconds(90));
    EXPECT_EQ(status, 0) << ::testing::PrintToString(lines);
  }

  TempDir state_dir_;
  std::unique_ptr<TestHosts> hosts_;
};

TEST_F(RecoveryReboot, ARebootedClientLosesItsLocksEverywhereAndItsWaiterIsGranted) {
  TempDir store_dir;
  const std::string db = store_dir.path() + "/nlockd.db";
  ASSERT_TRUE(hosts_->StartNlockd({"--store", "sqlite:" + db, "--granted-callback", "sync"}));
  testutil::Subprocess* callbacks = hosts_->Start(2, {NLM_CALLBACK_SERVER_BINARY});
  ASSERT_TRUE(callbacks->WaitForLine(std::regex(R"(^ready udp=\d+ tcp=\d+)"), kWait))
      << callbacks->output();

  // Client 1 (NSM state 1) holds two locks and a share; client 2 holds a lock of its own and
  // blocks behind client 1.
  const std::string c1 = "caller=client1 svid=1 oh=1@client1 state=1";
  EXPECT_EQ(Nlm(1, "lock fh=f " + c1 + " offset=0 length=10"), "lock stat=granted");
  EXPECT_EQ(Nlm(1, "lock fh=g " + c1 + " offset=100 length=0"), "lock stat=granted");
  EXPECT_EQ(Nlm(1, "share fh=h caller=client1 oh=1@client1 mode=2 access=3"),
            "share stat=granted sequence=0");
  EXPECT_EQ(Nlm(2, "lock fh=g caller=client2 svid=2 oh=2@client2 offset=0 length=10"),
            "lock stat=granted");
  EXPECT_EQ(Nlm(2, "lock fh=f caller=client2 svid=2 oh=2@client2 offset=5 length=10 block=1"),
            "lock stat=blocked");

  RebootNotify(1, 3);
  auto granted = callbacks->WaitForLine(std::regex(R"(^GRANTED .* svid=(\d+) )"), kWait);
  ASSERT_TRUE(granted) << callbacks->output() << hosts_->nlockd().process().output();
  EXPECT_EQ((*granted)[1].str(), "2");
  // Client 1's locks and share are gone: client 2 holds f now, and h is free to share.
  EXPECT_EQ(Nlm(1, "test fh=f caller=client1 svid=9 oh=9@client1 offset=0 length=4"),
            "test stat=granted");
  EXPECT_EQ(Nlm(2, "share fh=h caller=client2 oh=2@client2 mode=0 access=2"),
            "share stat=granted sequence=0");
  EXPECT_EQ(hosts_->nlockd().Stop(), 0);

  // Nothing of client 1 is left for a restart to restore.
  const std::string client2 = hosts_->ClientAddressOf(2);
  EXPECT_EQ(RowsPerHost(db, "locks"), std::vector<std::string>{client2 + "=2"});
  EXPECT_EQ(RowsPerHost(db, "shares"), std::vector<std::string>{client2 + "=1"});
}

}  // namespace
}  // namespace nlockd::integration::recovery
