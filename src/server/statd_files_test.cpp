// SPDX-License-Identifier: Apache-2.0
#include "server/statd_files.hpp"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <unistd.h>

#include "testutil/temp_dir.hpp"

namespace nlockd::server {
namespace {

namespace fs = std::filesystem;

// A line as rpc.statd writes it for the kernel's lockd (callback 127.0.0.1, 100021/4/16).
constexpr const char* kKernelLine =
    "0100007f 000186b5 00000004 00000010 "
    "00112233445566778899aabbccddeeff client.example server-node\n";

class StatdFilesTest : public ::testing::Test {
 protected:
  static std::string Read(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream out;
    out << in.rdbuf();
    return out.str();
  }
  testutil::TempDir temp_dir_{"statd-files"};
  const fs::path dir_{temp_dir_.path()};
};

TEST_F(StatdFilesTest, ParsesTheLineStatdWritesForTheKernel) {
  auto registration = ParseStatdRecord(kKernelLine);
  ASSERT_TRUE(registration);
  EXPECT_EQ(registration->source_address, "127.0.0.1");
  EXPECT_EQ(registration->my_id.my_prog, 100021);
  EXPECT_EQ(registration->my_id.my_vers, 4);
  EXPECT_EQ(registration->my_id.my_proc, 16);
  EXPECT_EQ(registration->priv[0], 0x00);
  EXPECT_EQ(registration->priv[1], 0x11);
  EXPECT_EQ(registration->priv[15], 0xff);
  EXPECT_EQ(registration->mon_name, "client.example");
  EXPECT_EQ(registration->my_id.my_name, "server-node");
  EXPECT_EQ(FormatStatdRecord(*registration), kKernelLine);
}

TEST_F(StatdFilesTest, RefusesLinesStatdWouldNotRead) {
  for (const char* line : {"", "0100007f 000186b5 00000004",
                           "zz00007f 000186b5 00000004 00000010 "
                           "00112233445566778899aabbccddeeff a b",
                           "0100007f 000186b5 00000004 00000010 "
                           "00112233445566778899aabbccddeexx a b",
                           "0100007f 000186b5 00000004 00000010 "
                           "00112233445566778899aabbccddeeff onlyone"}) {
    EXPECT_FALSE(ParseStatdRecord(line)) << line;
  }
}

TEST_F(StatdFilesTest, WhitespaceInMyNameBecomesUnderscoreAsStatdRecordsIt) {
  auto registration = ParseStatdRecord(kKernelLine);
  registration->my_id.my_name = "two words";
  EXPECT_NE(FormatStatdRecord(*registration).find(" client.example two_words\n"),
            std::string::npos);
}

TEST_F(StatdFilesTest, WritesOneFilePerHostAndReadsThemBack) {
  auto first = *ParseStatdRecord(kKernelLine);
  auto second = first;
  second.my_id.my_proc = 24;
  auto other = first;
  other.mon_name = "10.0.0.7";
  fs::create_directories(dir_ / "sm");
  std::ofstream(dir_ / "sm" / "stale.example") << kKernelLine;
  std::ofstream(dir_ / "sm" / ".hidden") << kKernelLine;
  WriteStatdRecords(dir_ / "sm", {first, second, other}, ::geteuid(), ::getegid());

  EXPECT_FALSE(fs::exists(dir_ / "sm" / "stale.example"));
  EXPECT_TRUE(fs::exists(dir_ / "sm" / ".hidden"));  // not a record: statd skips it, so do we
  EXPECT_EQ(Read(dir_ / "sm" / "client.example"),
            FormatStatdRecord(first) + FormatStatdRecord(second));
  EXPECT_EQ((fs::status(dir_ / "sm" / "client.example").permissions() & fs::perms::others_all),
            fs::perms::none);
  std::vector<std::string> warnings;
  std::vector<store::Registration> read = ReadStatdRecords(dir_ / "sm", warnings);
  EXPECT_TRUE(warnings.empty());
  ASSERT_EQ(read.size(), 3U);
  EXPECT_EQ(read[0].mon_name, "10.0.0.7");
  EXPECT_EQ(read[1].my_id.my_proc, 16);
  EXPECT_EQ(read[2].my_id.my_proc, 24);
}

TEST_F(StatdFilesTest, AMalformedLineIsReportedAndTheRestRead) {
  fs::create_directories(dir_ / "sm.bak");
  std::ofstream(dir_ / "sm.bak" / "client.example") << "garbage\n" << kKernelLine;
  std::vector<std::string> warnings;
  std::vector<store::Registration> read = ReadStatdRecords(dir_ / "sm.bak", warnings);
  EXPECT_EQ(read.size(), 1U);
  ASSERT_EQ(warnings.size(), 1U);
  EXPECT_NE(warnings[0].find("client.example:1"), std::string::npos);
  EXPECT_TRUE(ReadStatdRecords(dir_ / "absent", warnings).empty());
}

TEST_F(StatdFilesTest, TheStateIsFourHostOrderBytes) {
  EXPECT_FALSE(ReadStatdState(dir_ / "state"));
  std::ofstream(dir_ / "state");  // nfs-common ships an empty file
  EXPECT_FALSE(ReadStatdState(dir_ / "state"));
  WriteStatdState(dir_ / "state", 7);
  EXPECT_EQ(fs::file_size(dir_ / "state"), 4U);
  int32_t raw = 0;
  std::ifstream(dir_ / "state", std::ios::binary).read(reinterpret_cast<char*>(&raw), 4);
  EXPECT_EQ(raw, 7);
  EXPECT_EQ(ReadStatdState(dir_ / "state"), 7);
  EXPECT_FALSE(fs::exists(dir_ / "state.new"));
}

}  // namespace
}  // namespace nlockd::server
