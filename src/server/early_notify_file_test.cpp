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
#include <asio/ip/udp.hpp>
#include <gtest/gtest.h>

#include "nsm/wire.hpp"
#include "rpc/dispatcher.hpp"
#include "rpc/server.hpp"
#include "server/early_round.hpp"
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
    EarlyNotifyFile file(path, true);
    EXPECT_FALSE(file.record().has_value());
    ASSERT_TRUE(file.Reserve(9, "boot-a"));
    ASSERT_TRUE(file.Reserve(5, "boot-b"));  // behind: the state stays, the boot is the new one
  }
  EarlyNotifyFile again(path, true);
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
  EarlyNotifyFile file(path, true);
  file.SetHosts({{"client-1", "192.0.2.1"}});
  file.Flush();
  EXPECT_FALSE(std::filesystem::exists(path)) << "no state to announce yet";
  ASSERT_TRUE(file.Reserve(3, "boot-a"));
  file.Flush();  // the hosts given before went with the reservation
  EXPECT_EQ(file.record()->hosts, (std::vector<nsm::NotifyTarget>{{"client-1", "192.0.2.1"}}));
  file.SetHosts({{"client-1", "192.0.2.1"}, {"client-2", ""}});
  file.Flush();
  std::string problem;
  auto record = ParseEarlyNotifyRecord(Slurp(path), &problem);
  ASSERT_TRUE(record.has_value()) << problem;
  EXPECT_EQ(record->state, 3);
  EXPECT_EQ(record->hosts,
            (std::vector<nsm::NotifyTarget>{{"client-1", "192.0.2.1"}, {"client-2", ""}}));
}

TEST(EarlyNotifyFile, AFileThatCannotBeKeptIsRemovedOrStopsTheBump) {
  TempDir dir;
  // A directory where the file should be: neither written nor removed, so Reserve throws.
  const std::string path = dir.path() + "/nsm.db.early-notify";
  std::filesystem::create_directories(path + "/inside");
  EarlyNotifyFile blocked(path, true);
  EXPECT_THROW(blocked.Reserve(3, "boot-a"), std::exception);
  EXPECT_THROW(blocked.Remove(), std::exception);

  // Not written (its directory is gone): nothing is left to be behind the store, but the
  // state reserved stays the floor of the next bump.
  const std::string gone = dir.path() + "/gone/nsm.db.early-notify";
  EarlyNotifyFile unwritable(gone, true);
  EXPECT_FALSE(unwritable.Reserve(5, "boot-a"));
  EXPECT_FALSE(unwritable.record().has_value());
  ASSERT_TRUE(unwritable.floor().has_value());
  EXPECT_EQ(unwritable.floor()->state, 5);

  // A file that is unreadable as a record is not used, and Reserve replaces it.
  const std::string other = dir.path() + "/other.early-notify";
  Spill(other, "nlockd early-notify 1\nstate 41\n");
  EarlyNotifyFile damaged(other, true);
  EXPECT_FALSE(damaged.record().has_value());
  ASSERT_TRUE(damaged.Reserve(3, "boot-a"));
  EXPECT_EQ(EarlyNotifyFile(other, true).record()->state, 3);
  damaged.Remove();
  EXPECT_FALSE(std::filesystem::exists(other));
  damaged.Remove();  // gone already: nothing to do
}

// A configuration without early rounds reads the file only for its floor, writes nothing, and
// removes it.
TEST(EarlyNotifyFile, NotKeptItIsReadForItsFloorOnly) {
  TempDir dir;
  const std::string path = dir.path() + "/nsm.db.early-notify";
  {
    EarlyNotifyFile kept(path, true);
    ASSERT_TRUE(kept.Reserve(11, "boot-a"));
    kept.SetHosts({{"client-1", ""}});
    kept.Flush();
  }
  EarlyNotifyFile file(path, false);
  EXPECT_EQ(file.floor()->state, 11);
  EXPECT_EQ(file.floor()->boot_id, "boot-a");
  EXPECT_TRUE(file.Reserve(13, "boot-b"));
  file.SetHosts({{"client-1", ""}});
  // Until it is removed it names this boot and no hosts: no early round can come from it.
  EXPECT_EQ(Slurp(path), FormatEarlyNotifyRecord({13, "boot-b", {}}));
  EXPECT_EQ(file.floor()->state, 13);
  EXPECT_EQ(file.floor()->boot_id, "boot-b");
  // An older reservation moves neither the floor's state nor its boot.
  EXPECT_TRUE(file.Reserve(9, "boot-c"));
  EXPECT_EQ(file.floor()->state, 13);
  EXPECT_EQ(file.floor()->boot_id, "boot-b");
  file.Remove();
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_EQ(file.floor()->state, 13) << "the floor outlives the file";
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
  // No retransmission within the attempt: the statd below must see each SM_NOTIFY once.
  options.udp_retry = std::chrono::milliseconds(5000);
  return options;
}

TEST(EarlyRound, OnANewBootTellsTheFilesHostsTheNextStateOnce) {
  TempDir dir;
  const std::string db = dir.path() + "/nsm.db";
  LoopbackStatd statd;
  EarlyNotifyFile file(EarlyNotifyFile::PathFor(db), true);
  ASSERT_TRUE(file.Reserve(7, "boot-a"));
  // 127.0.0.1 answers; nothing listens at 127.0.0.2's port.
  file.SetHosts({{"peer-up", "127.0.0.1"}, {"peer-down", "127.0.0.2"}});
  file.Flush();

  // The boot that reserved the state announces nothing early.
  EXPECT_EQ(BeginEarlyRound(file, "boot-a", "me", ToStatdAt(statd.port())), nullptr);
  // Nor does a start that cannot tell its boot.
  EXPECT_EQ(BeginEarlyRound(file, "", "me", ToStatdAt(statd.port())), nullptr);

  // A lead longer than the attempts: it returns once both ended (peer-down's at its deadline,
  // 1.5 s), not at the end of the lead.
  const auto begun = std::chrono::steady_clock::now();
  std::unique_ptr<EarlyRound> round =
      BeginEarlyRound(file, "boot-b", "me", ToStatdAt(statd.port()), std::chrono::seconds(30));
  EXPECT_LT(std::chrono::steady_clock::now() - begun, std::chrono::seconds(15));
  ASSERT_NE(round, nullptr);
  EXPECT_EQ(round->state(), 9);
  // Reserved before anything was sent: the store must reach 9 on this boot.
  EXPECT_EQ(EarlyNotifyFile(file.path(), false).record()->state, 9);
  EXPECT_EQ(EarlyNotifyFile(file.path(), false).record()->boot_id, "boot-b");
  EXPECT_TRUE(round->WaitFinished(std::chrono::milliseconds(0)));
  EXPECT_EQ(round->Answered(), (std::vector<std::string>{"peer-up"}));

  // The store's round learns of the end through the executor it gives.
  asio::io_context io;
  auto work = asio::make_work_guard(io);
  bool finished = false;
  round->WhenFinished(io.get_executor(), [&] { finished = true; });
  io.run_one_for(std::chrono::seconds(10));
  ASSERT_TRUE(finished);
  EXPECT_EQ(statd.received(), (std::vector<std::string>{"me 9"}));
  round.reset();
  EXPECT_EQ(statd.received().size(), 1u) << "one attempt: the store's round retries";
}

TEST(EarlyRound, AHostThatDoesNotAnswerHoldsTheStartNoLongerThanTheLead) {
  TempDir dir;
  EarlyNotifyFile file(dir.path() + "/nsm.db.early-notify", true);
  ASSERT_TRUE(file.Reserve(7, "boot-a"));
  file.SetHosts({{"peer-silent", "127.0.0.1"}});
  file.Flush();
  // Its rpcbind: a socket that takes the GETPORT and never answers.
  asio::io_context io;
  asio::ip::udp::socket silent(io, asio::ip::udp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  nsm::NotifierOptions options;
  options.rpcbind_port = silent.local_endpoint().port();
  options.attempt_deadline = std::chrono::seconds(20);
  options.udp_retry = std::chrono::seconds(20);

  const auto begun = std::chrono::steady_clock::now();
  std::unique_ptr<EarlyRound> round =
      BeginEarlyRound(file, "boot-b", "me", options, std::chrono::milliseconds(200));
  const auto held = std::chrono::steady_clock::now() - begun;
  ASSERT_NE(round, nullptr);
  EXPECT_GE(held, std::chrono::milliseconds(200));
  EXPECT_LT(held, std::chrono::seconds(5)) << "the lead, not the attempt's deadline (20 s)";
  EXPECT_FALSE(round->WaitFinished(std::chrono::milliseconds(0))) << "the attempt goes on";
  EXPECT_TRUE(round->Answered().empty());
}

TEST(EarlyRound, NotWithoutHostsToTell) {
  TempDir dir;
  EarlyNotifyFile file(dir.path() + "/nsm.db.early-notify", true);
  EXPECT_EQ(BeginEarlyRound(file, "boot-b", "me", ToStatdAt(9)), nullptr) << "no file";
  ASSERT_TRUE(file.Reserve(7, "boot-a"));
  EXPECT_EQ(BeginEarlyRound(file, "boot-b", "me", ToStatdAt(9)), nullptr) << "no hosts";
  EXPECT_EQ(file.record()->state, 7) << "nothing reserved";
  EXPECT_EQ(file.record()->boot_id, "boot-a");
}

}  // namespace
}  // namespace nlockd::server
