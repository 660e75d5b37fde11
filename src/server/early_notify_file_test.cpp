// SPDX-License-Identifier: Apache-2.0
// The early-notify file (its format, and Reserve's rule that the file is never behind the store)
// and the early round, against a status monitor on loopback.
#include "server/early_notify_file.hpp"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>
#include <gtest/gtest.h>

#include "nsm/wire.hpp"
#include "rpc/dispatcher.hpp"
#include "rpc/server.hpp"
#include "server/early_round.hpp"
#include "store/open_store.hpp"
#include "testutil/temp_dir.hpp"

namespace nlockd::server {
namespace {

using testutil::TempDir;

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void Spill(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

TEST(EarlyNotifyRecord, ReadsBackWhatItWrote) {
  EarlyNotifyRecord record{-7, "3f1c-boot", {{"client-1", "192.0.2.1"}, {"odd name%\n\xff", ""}}};
  const std::string text = FormatEarlyNotifyRecord(record);
  EXPECT_EQ(text.rfind("nlockd early-notify 1\nstate -7\nboot 3f1c-boot\n", 0), 0u) << text;
  EXPECT_NE(text.find("host odd%20name%25%0A%FF\n"), std::string::npos) << text;
  std::string problem;
  EXPECT_EQ(ParseEarlyNotifyRecord(text, &problem), record) << problem;
}

TEST(EarlyNotifyRecord, RefusesWhatIsNotAWholeRecordOfThisVersion) {
  const std::string whole = FormatEarlyNotifyRecord({5, "b", {{"h", ""}}});
  const std::vector<std::string> broken{
      "",
      whole.substr(0, whole.size() - 1),                          // the end line cut short
      whole.substr(0, whole.find("end\n")),                       // no end line
      whole + "host late\n",                                      // after the end
      "nlockd early-notify 2\nstate 5\nboot b\nend\n",            // another version
      "nlockd early-notify 1\nstate 5x\nboot b\nend\n",           // not a number
      "nlockd early-notify 1\nstate 99999999999\nboot b\nend\n",  // not an int32
      "nlockd early-notify 1\nstate 5\nstate 7\nboot b\nend\n",   // twice
      "nlockd early-notify 1\nboot b\nend\n",                     // no state
      "nlockd early-notify 1\nstate 5\nboot b\nhost a%4\nend\n",  // a cut escape
      "nlockd early-notify 1\nstate 5\nboot b\nhost a b c\nend\n",
      "nlockd early-notify 1\nstate 5\nboot b\nhost \nend\n",
      "nlockd early-notify 1\nstate 5\nboot b\nhost a\xff\nend\n",  // a byte not escaped
  };
  for (const std::string& text : broken) {
    std::string problem;
    EXPECT_FALSE(ParseEarlyNotifyRecord(text, &problem).has_value()) << text;
    EXPECT_FALSE(problem.empty()) << text;
  }
}

TEST(EarlyNotifyFile, ReserveNeverMovesTheStateBackButTakesTheBoot) {
  TempDir dir;
  const std::string path = dir.path() + "/nsm.db.early-notify";
  {
    EarlyNotifyFile file(path);
    EXPECT_FALSE(file.record().has_value());
    ASSERT_TRUE(file.Reserve(9, "boot-a"));
    ASSERT_TRUE(file.Reserve(5, "boot-b"));  // behind: the state stays, the boot is the new one
  }
  EarlyNotifyFile again(path);
  ASSERT_TRUE(again.record().has_value());
  EXPECT_EQ(again.record()->state, 9);
  EXPECT_EQ(again.record()->boot_id, "boot-b");
  // Newer across the wrap of the state number.
  ASSERT_TRUE(again.Reserve(std::numeric_limits<int32_t>::min() + 1, "boot-b"));
  ASSERT_TRUE(again.Reserve(std::numeric_limits<int32_t>::max(), "boot-b"));
  EXPECT_EQ(again.record()->state, std::numeric_limits<int32_t>::min() + 1);
}

TEST(EarlyNotifyFile, HostsAreWrittenOnlyOnceAStateIsReserved) {
  TempDir dir;
  const std::string path = dir.path() + "/nsm.db.early-notify";
  EarlyNotifyFile file(path);
  file.SetHosts({{"client-1", "192.0.2.1"}});
  file.Flush();
  EXPECT_FALSE(std::filesystem::exists(path)) << "no state to announce yet";
  ASSERT_TRUE(file.Reserve(3, "boot-a"));
  file.SetHosts({{"client-1", "192.0.2.1"}, {"client-2", ""}});
  file.Flush();
  std::string problem;
  auto record = ParseEarlyNotifyRecord(Slurp(path), &problem);
  ASSERT_TRUE(record.has_value()) << problem;
  EXPECT_EQ(record->state, 3);
  EXPECT_EQ(record->hosts,
            (std::vector<nsm::NotifyTarget>{{"client-1", "192.0.2.1"}, {"client-2", ""}}));
  // The last list before the file's end is written too.
  file.SetHosts({});
}

TEST(EarlyNotifyFile, AFileThatCannotBeKeptIsRemovedOrStopsTheBump) {
  TempDir dir;
  // A directory where the file should be: neither written nor removed, so Reserve throws.
  const std::string path = dir.path() + "/nsm.db.early-notify";
  std::filesystem::create_directories(path + "/inside");
  EarlyNotifyFile blocked(path);
  EXPECT_THROW(blocked.Reserve(3, "boot-a"), std::exception);
  EXPECT_THROW(EarlyNotifyFile::RemoveStale(path), std::exception);

  // A file that is unreadable as a record is not used, and Reserve replaces it.
  const std::string other = dir.path() + "/other.early-notify";
  Spill(other, "nlockd early-notify 1\nstate 41\n");
  EarlyNotifyFile damaged(other);
  EXPECT_FALSE(damaged.record().has_value());
  ASSERT_TRUE(damaged.Reserve(3, "boot-a"));
  EXPECT_EQ(EarlyNotifyFile(other).record()->state, 3);
  EarlyNotifyFile::RemoveStale(other);
  EXPECT_FALSE(std::filesystem::exists(other));
  EarlyNotifyFile::RemoveStale(other);  // gone already: nothing to do
}

// A status monitor on 127.0.0.1 that records each SM_NOTIFY.
class LoopbackStatd {
 public:
  LoopbackStatd() : server_(io_.get_executor(), dispatcher_, rpc::ServerOptions{}) {
    dispatcher_.Register(
        nsm::SM_PROG, nsm::SM_VERS, nsm::SM_NOTIFY, "SM_NOTIFY",
        [this](const rpc::CallContext&, xdr::Decoder& args, xdr::Encoder&) {
          nsm::stat_chge change;
          if (nsm::Decode(args, change)) {
            std::lock_guard lock(mutex_);
            received_.push_back(change.mon_name + " " + std::to_string(change.state));
          }
          return Answer();
        });
    server_.Listen(asio::ip::make_address("127.0.0.1"), 0);
    server_.Start();
    thread_ = std::thread([this] { io_.run(); });
  }
  ~LoopbackStatd() {
    std::promise<void> stopped;
    asio::co_spawn(io_, server_.Shutdown(),
                   [&](const std::exception_ptr&) { stopped.set_value(); });
    stopped.get_future().wait();
    io_.stop();
    thread_.join();
  }
  uint16_t port() const { return server_.port(); }
  std::vector<std::string> received() {
    std::lock_guard lock(mutex_);
    return received_;
  }

 private:
  static asio::awaitable<rpc::HandlerStatus> Answer() { co_return rpc::HandlerStatus::kSuccess; }

  asio::io_context io_{1};
  rpc::Dispatcher dispatcher_;
  rpc::Server server_;
  std::mutex mutex_;
  std::vector<std::string> received_;
  std::thread thread_;
};

nsm::NotifierOptions ToStatdAt(uint16_t port) {
  nsm::NotifierOptions options;
  options.statd_port = port;
  options.attempt_deadline = std::chrono::milliseconds(1500);
  options.udp_retry = std::chrono::milliseconds(200);
  return options;
}

TEST(EarlyRound, OnANewBootTellsTheFilesHostsTheNextStateOnce) {
  TempDir dir;
  const std::string db = dir.path() + "/nsm.db";
  LoopbackStatd statd;
  EarlyNotifyFile file(EarlyNotifyFile::PathFor(db));
  ASSERT_TRUE(file.Reserve(7, "boot-a"));
  // 127.0.0.1 answers; nothing listens at 127.0.0.2's port.
  file.SetHosts({{"peer-up", "127.0.0.1"}, {"peer-down", "127.0.0.2"}});
  file.Flush();

  // The boot that reserved the state announces nothing early.
  EXPECT_EQ(BeginEarlyRound(file, "boot-a", "me", db, ToStatdAt(statd.port())), nullptr);

  std::unique_ptr<EarlyRound> round =
      BeginEarlyRound(file, "boot-b", "me", db, ToStatdAt(statd.port()));
  ASSERT_NE(round, nullptr);
  EXPECT_EQ(round->state(), 9);
  // Reserved before anything was sent: the store must reach 9 on this boot.
  EXPECT_EQ(EarlyNotifyFile(file.path()).record()->state, 9);
  EXPECT_EQ(EarlyNotifyFile(file.path()).record()->boot_id, "boot-b");

  asio::io_context io;
  auto work = asio::make_work_guard(io);
  bool finished = false;
  round->WhenFinished(io.get_executor(), [&] { finished = true; });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!finished && std::chrono::steady_clock::now() < deadline) {
    io.run_one_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(finished);
  EXPECT_EQ(round->Answered(), (std::vector<std::string>{"peer-up"}));
  EXPECT_EQ(statd.received(), (std::vector<std::string>{"me 9"}));
  round.reset();
  EXPECT_EQ(statd.received().size(), 1u) << "one attempt: the store's round retries";
}

TEST(EarlyRound, NotWhileAnotherProcessHoldsTheStore) {
  TempDir dir;
  const std::string db = dir.path() + "/nsm.db";
  LoopbackStatd statd;
  EarlyNotifyFile file(EarlyNotifyFile::PathFor(db));
  ASSERT_TRUE(file.Reserve(7, "boot-a"));
  file.SetHosts({{"peer-up", "127.0.0.1"}});
  file.Flush();
  {
    const store::SqliteStoreLock serving(db);
    EXPECT_EQ(BeginEarlyRound(file, "boot-b", "me", db, ToStatdAt(statd.port())), nullptr);
  }
  EXPECT_EQ(file.record()->state, 7) << "nothing reserved";
  EXPECT_TRUE(statd.received().empty());
  // No hosts to tell: no early round, nothing reserved.
  file.SetHosts({});
  file.Flush();
  EXPECT_EQ(BeginEarlyRound(file, "boot-b", "me", db, ToStatdAt(statd.port())), nullptr);
  EXPECT_EQ(file.record()->state, 7);
}

}  // namespace
}  // namespace nlockd::server
