// SPDX-License-Identifier: Apache-2.0
#include "server/statd_handover.hpp"

#include <algorithm>
#include <fstream>
#include <limits>
#include <sstream>

#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nsm/status_receiver.hpp"
#include "server/statd_files.hpp"
#include "store/memory/memory_store.hpp"
#include "testutil/temp_dir.hpp"

namespace nlockd::server {
namespace {

namespace fs = std::filesystem;

// Lines as rpc.statd writes them for the kernel's lockd.
constexpr const char* kClientA =
    "0100007f 000186b5 00000004 00000010 00112233445566778899aabbccddeeff a.example server\n";
constexpr const char* kClientB =
    "0100007f 000186b5 00000004 00000010 ffeeddccbbaa99887766554433221100 b.example server\n";
constexpr const char* kRebooted =
    "0100007f 000186b5 00000004 00000010 00000000000000000000000000000000 c.example server\n";

class StatdHandoverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(root_ / "nfs" / "sm");
    fs::create_directories(root_ / "nfs" / "sm.bak");
    fs::create_directories(root_ / "run");
  }

  StatdDirectory Directory() const { return StatdDirectory(root_ / "nfs", root_ / "run"); }
  void WriteFile(const fs::path& path, const std::string& text) const {
    std::ofstream(root_ / path, std::ios::binary) << text;
  }
  static std::string Read(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream out;
    out << in.rdbuf();
    return out.str();
  }
  // The store's registrations as "mon_name my_name priv[0]" lines, sorted.
  static std::string Registrations(store::Store& store) {
    std::vector<std::string> lines;
    for (const auto& registration : store.LoadAll().registrations) {
      lines.push_back(registration.mon_name + " " + registration.my_id.my_name + " " +
                      std::to_string(registration.priv[0]));
    }
    std::sort(lines.begin(), lines.end());
    std::string out;
    for (const auto& line : lines) out += line + "\n";
    return out;
  }

  testutil::TempDir temp_dir_{"statd-handover"};
  const fs::path root_{temp_dir_.path()};
};

TEST_F(StatdHandoverTest, ImportReplacesTheStoresRegistrationsAndOwesSmBak) {
  WriteFile("nfs/sm/a.example", kClientA);
  WriteFile("nfs/sm/b.example", kClientB);
  WriteFile("nfs/sm.bak/c.example", kRebooted);
  int32_t state = 9;
  WriteFile("nfs/state", std::string(reinterpret_cast<const char*>(&state), 4));
  store::MemoryStore store{store::StoreOptions{}};
  // Left from an earlier run of nlockd: statd unmonitored it since, and nlockd's own NLM's.
  store::Registration stale = *ParseStatdRecord(kClientA);
  stale.mon_name = "gone.example";
  store::Registration own;
  own.mon_name = "peer.example";
  own.my_id = nsm::LocalNlmId();
  store.PutRegistration(stale, [](std::exception_ptr) {});
  store.PutRegistration(own, [](std::exception_ptr) {});

  StatdDirectory directory = Directory();
  EXPECT_FALSE(directory.HeldByNlockd());
  StatdDirectory::Contents contents = directory.Read();
  EXPECT_TRUE(contents.warnings.empty());
  EXPECT_EQ(contents.state, 9);
  directory.Import(contents, store, store.LoadAll().registrations, 11);

  EXPECT_EQ(Registrations(store), "a.example server 0\nb.example server 255\npeer.example " +
                                      nsm::LocalNlmId().my_name + " 0\n");
  std::vector<store::NotifyOwed> owed = store.LoadAll().notify_owed;
  ASSERT_EQ(owed.size(), 1U);
  EXPECT_EQ(owed[0], (store::NotifyOwed{"c.example", "", 11, 0}));
  EXPECT_TRUE(directory.HeldByNlockd());
  // statd's files are left as they were: they are its until nlockd gives them back.
  EXPECT_EQ(Read(root_ / "nfs/sm/a.example"), kClientA);
}

TEST_F(StatdHandoverTest, ALiveSmNotifyKeepsSmBak) {
  WriteFile("nfs/sm.bak/c.example", kRebooted);
  // A process whose command is sm-notify: sleep under that name.
  fs::copy_file("/bin/sleep", root_ / "sm-notify");
  const std::string program = (root_ / "sm-notify").string();
  char* argv[] = {const_cast<char*>(program.c_str()), const_cast<char*>("30"), nullptr};
  pid_t child = 0;
  ASSERT_EQ(posix_spawn(&child, program.c_str(), nullptr, nullptr, argv, environ), 0);
  WriteFile("run/sm-notify.pid", std::to_string(child) + "\n");
  StatdDirectory::Contents contents = Directory().Read();
  EXPECT_TRUE(contents.owed_left_to_sm_notify);
  EXPECT_TRUE(contents.owed.empty());
  EXPECT_TRUE(Directory().StatdRanThisBoot());
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  // Gone (its pid file stays until the next boot): its records are owed again.
  contents = Directory().Read();
  EXPECT_FALSE(contents.owed_left_to_sm_notify);
  EXPECT_EQ(contents.owed.size(), 1U);
  // A live process of another name is not sm-notify.
  WriteFile("run/sm-notify.pid", std::to_string(getpid()) + "\n");
  EXPECT_EQ(Directory().Read().owed.size(), 1U);
}

TEST_F(StatdHandoverTest, StatdRanThisBootFromItsPidFiles) {
  EXPECT_FALSE(Directory().StatdRanThisBoot());
  WriteFile("run/rpc.statd.pid", "");  // statd truncates it when it exits
  EXPECT_TRUE(Directory().StatdRanThisBoot());
}

TEST_F(StatdHandoverTest, ExportWritesWhatStatdReadsAndReleasesTheDirectory) {
  WriteFile("nfs/sm/unmonitored.example", kClientB);
  store::MemoryStore store{store::StoreOptions{}};
  StatdDirectory directory = Directory();
  directory.Import(directory.Read(), store, {}, 3);
  ASSERT_TRUE(directory.HeldByNlockd());

  store::Registration a = *ParseStatdRecord(kClientA);
  store::Registration own;
  own.mon_name = "peer.example";
  own.my_id = nsm::LocalNlmId();
  directory.Export({a, own}, {store::NotifyOwed{"c.example", "10.0.0.3", 7, 2}}, "server", 7);

  EXPECT_EQ(Read(root_ / "nfs/sm/a.example"), kClientA);
  EXPECT_FALSE(fs::exists(root_ / "nfs/sm/unmonitored.example"));
  EXPECT_FALSE(fs::exists(root_ / "nfs/sm/peer.example"));  // nlockd's own NLM is not statd's
  EXPECT_EQ(Read(root_ / "nfs/sm.bak/c.example"), kRebooted);
  EXPECT_EQ(ReadStatdState(root_ / "nfs/state"), 7);
  EXPECT_FALSE(directory.HeldByNlockd());
}

TEST_F(StatdHandoverTest, ExportCreatesMissingDirectoriesAndWritesAnUpState) {
  fs::remove_all(root_ / "nfs" / "sm");
  fs::remove_all(root_ / "nfs" / "sm.bak");
  Directory().Export({*ParseStatdRecord(kClientA)}, {}, "server", 8);
  EXPECT_EQ(Read(root_ / "nfs/sm/a.example"), kClientA);
  EXPECT_TRUE(fs::is_directory(root_ / "nfs/sm.bak"));
  EXPECT_EQ(ReadStatdState(root_ / "nfs/state"), 9);
}

TEST_F(StatdHandoverTest, AnEvenStateIsUpAsTheNextOdd) {
  EXPECT_EQ(StatdStateAsUp(4), 5);
  EXPECT_EQ(StatdStateAsUp(5), 5);
  EXPECT_EQ(StatdStateAsUp(-2), -1);
  EXPECT_EQ(StatdStateAsUp(std::numeric_limits<int32_t>::max() - 1),
            std::numeric_limits<int32_t>::max());
}

}  // namespace
}  // namespace nlockd::server
