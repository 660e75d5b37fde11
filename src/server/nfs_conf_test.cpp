// SPDX-License-Identifier: Apache-2.0
#include "server/nfs_conf.hpp"

#include <array>
#include <cstdio>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <sys/wait.h>

#include "base/error.hpp"
#include "server/config.hpp"
#include "testutil/temp_dir.hpp"

namespace nlockd::server {
namespace {

namespace fs = std::filesystem;

class NfsConfTest : public ::testing::Test {
 protected:
  fs::path Write(const std::string& name, const std::string& text) {
    fs::path path = dir_ / name;
    fs::create_directories(path.parent_path());
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }

  // What nfs-utils' own reader makes of the same files (nfsconf, from nfs-common).
  static std::optional<std::string> Nfsconf(const fs::path& file, const std::string& section,
                                            const std::string& tag, const std::string& arg = "") {
    std::string command = "/usr/sbin/nfsconf --file '" + file.string() + "' --get ";
    if (!arg.empty()) command += "--arg '" + arg + "' ";
    command += "'" + section + "' '" + tag + "' 2>/dev/null";
    FILE* pipe = popen(command.c_str(), "r");
    if (pipe == nullptr) return std::nullopt;
    std::string out;
    std::array<char, 256> buffer{};
    while (fgets(buffer.data(), static_cast<int>(buffer.size()), pipe) != nullptr) {
      out += buffer.data();
    }
    int status = pclose(pipe);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return std::nullopt;
    if (!out.empty() && out.back() == '\n') out.pop_back();
    return out;
  }

  static std::optional<std::string> Ours(const NfsConf& conf, const std::string& section,
                                         const std::string& tag, const std::string& arg = "") {
    auto value = conf.Get(section, arg, tag);
    if (!value) return std::nullopt;
    return value->text;
  }

  // Loads `main` with both readers and checks they agree on each (section, tag[, arg]).
  void ExpectSameAsNfsUtils(const fs::path& main,
                            const std::vector<std::array<std::string, 4>>& expected) {
    ASSERT_TRUE(fs::exists("/usr/sbin/nfsconf")) << "nfs-common's nfsconf is the reference";
    std::vector<std::string> warnings;
    NfsConf conf = NfsConf::Load(main, warnings);
    for (const auto& [section, tag, arg, value] : expected) {
      std::optional<std::string> want =
          value == "<unset>" ? std::nullopt : std::optional<std::string>(value);
      EXPECT_EQ(Ours(conf, section, tag, arg), want) << section << " " << tag << " " << arg;
      EXPECT_EQ(Nfsconf(main, section, tag, arg), want)
          << "nfsconf disagrees with this test's expectation: " << section << " " << tag;
    }
  }

  testutil::TempDir temp_dir_{"nfs-conf"};
  const fs::path dir_{temp_dir_.path()};
};

TEST_F(NfsConfTest, ReadsSectionsTagsAndValuesAsNfsUtilsDoes) {
  fs::path main = Write("nfs.conf",
                        "# comment\n"
                        "; another\n"
                        "[statd]\n"
                        "  port = 662  # trailing comment\n"
                        "outgoing-port=2020;cut\n"
                        "name = \"with # hash\" rest ignored\n"
                        "ha-callout = '/usr/bin/callout'\n"
                        "[ LockD ]\n"
                        "Port = 32803\n"
                        "udp-port = 32769\n"
                        "[sm-notify]\n"
                        "retry-time = 10\n");
  ExpectSameAsNfsUtils(main, {{
                                 {"statd", "port", "", "662"},
                                 {"statd", "outgoing-port", "", "2020"},
                                 {"statd", "name", "", "with # hash"},
                                 {"statd", "ha-callout", "", "/usr/bin/callout"},
                                 {"lockd", "port", "", "32803"},
                                 {"LOCKD", "PORT", "", "32803"},
                                 {"lockd", "udp-port", "", "32769"},
                                 {"sm-notify", "retry-time", "", "10"},
                                 {"statd", "no-notify", "", "<unset>"},
                             }});
}

TEST_F(NfsConfTest, KeepsNfsUtilsQuirks) {
  // An empty value assigns nothing; an assignment before any section is ignored; the later
  // assignment wins; a subsection's assignment removes the plain one; a backslash joins lines;
  // a last line without a newline is dropped.
  fs::path main = Write("nfs.conf",
                        "port = 1\n"
                        "[statd]\n"
                        "port = 662\n"
                        "port =\n"
                        "name = first\n"
                        "name = second\n"
                        "outgoing-port = 2020\n"
                        "[statd \"other\"]\n"
                        "outgoing-port = 3030\n"
                        "[lockd]\n"
                        "port = 40\\\n"
                        "01\n"
                        "udp-port = 5000");
  ExpectSameAsNfsUtils(main, {{
                                 {"statd", "port", "", "662"},
                                 {"statd", "name", "", "second"},
                                 {"statd", "outgoing-port", "", "<unset>"},
                                 {"statd", "outgoing-port", "other", "3030"},
                                 {"lockd", "udp-port", "", "<unset>"},
                             }});
  std::vector<std::string> warnings;
  NfsConf conf = NfsConf::Load(main, warnings);
  // "40\<newline>01" is "40  01": nfs-utils and we keep the text; a port parser then refuses it.
  ASSERT_TRUE(conf.Get("lockd", "port"));
  EXPECT_EQ(conf.Get("lockd", "port")->text, "40  01");
  EXPECT_EQ(conf.Get("statd", "port")->origin, main.string() + ":3");
  EXPECT_GE(warnings.size(), 2U);  // the sectionless line, the unterminated last line
}

TEST_F(NfsConfTest, FollowsIncludesAndTheDotDDirectoryInVersionOrder) {
  Write("parts/ports.conf", "port = 700\n[lockd]\nport = 4001\n");
  fs::path main = Write("nfs.conf",
                        "[statd]\n"
                        "include = parts/ports.conf\n"
                        "name = after-include\n"
                        "include = -missing.conf\n"
                        "[sm-notify]\n"
                        "retry-time = 1\n");
  Write("nfs.conf.d/9-b.conf", "[sm-notify]\nretry-time = 9\n");
  Write("nfs.conf.d/10-a.conf", "[sm-notify]\nretry-time = 10\n");
  Write("nfs.conf.d/.hidden.conf", "[sm-notify]\nretry-time = 99\n");
  Write("nfs.conf.d/notes.txt", "[sm-notify]\nretry-time = 98\n");
  ExpectSameAsNfsUtils(main, {{
                                 {"statd", "port", "", "700"},
                                 {"lockd", "port", "", "4001"},
                                 {"statd", "name", "", "after-include"},
                                 {"sm-notify", "retry-time", "", "10"},
                             }});
  std::vector<std::string> warnings;
  NfsConf::Load(main, warnings);
  EXPECT_TRUE(warnings.empty()) << warnings.front();  // "-missing.conf" is optional
}

TEST_F(NfsConfTest, DollarValuesComeFromTheEnvironmentThenTheEnvironmentSection) {
  std::vector<std::string> warnings;
  NfsConf conf = NfsConf::Parse(
      "[environment]\nstate_dir = /srv/nfs\n[statd]\nstate-directory-path = $state_dir\n"
      "name = $NLOCKD_TEST_NAME\nport = $unset_name\n",
      dir_ / "nfs.conf", warnings);
  conf.SetEnvironment([](const std::string& name) -> std::optional<std::string> {
    if (name == "NLOCKD_TEST_NAME") return "from-env";
    return std::nullopt;
  });
  EXPECT_EQ(conf.Get("statd", "state-directory-path")->text, "/srv/nfs");
  EXPECT_EQ(conf.Get("statd", "name")->text, "from-env");
  EXPECT_FALSE(conf.Get("statd", "port"));
}

TEST_F(NfsConfTest, BooleansAsNfsUtilsSpellsThem) {
  std::vector<std::string> warnings;
  NfsConf conf = NfsConf::Parse("[statd]\na = Yes\nb = off\nc = T\nd = 0\ne = maybe\n",
                                dir_ / "nfs.conf", warnings);
  EXPECT_EQ(conf.GetBool("statd", "a"), true);
  EXPECT_EQ(conf.GetBool("statd", "b"), false);
  EXPECT_EQ(conf.GetBool("statd", "c"), true);
  EXPECT_EQ(conf.GetBool("statd", "d"), false);
  EXPECT_EQ(conf.GetBool("statd", "e"), std::nullopt);
  EXPECT_EQ(conf.GetBool("statd", "f"), std::nullopt);
}

TEST_F(NfsConfTest, AMissingMainFileIsNoErrorAndAnIncludeLoopEnds) {
  std::vector<std::string> warnings;
  NfsConf missing = NfsConf::Load(dir_ / "absent.conf", warnings);
  EXPECT_FALSE(missing.Get("statd", "port"));
  EXPECT_TRUE(warnings.empty());

  fs::path loop = Write("loop.conf", "[statd]\nport = 1\ninclude = loop.conf\n");
  NfsConf looped = NfsConf::Load(loop, warnings);
  EXPECT_EQ(looped.Get("statd", "port")->text, "1");
  ASSERT_FALSE(warnings.empty());
  EXPECT_NE(warnings.back().find("nested deeper"), std::string::npos);
}

TEST_F(NfsConfTest, MalformedHeadersAreReadAsNfsUtilsReadsThem) {
  // A header without ']' drops its assignments; one with an unclosed quote files them under the
  // plain section (nfs-utils warns that it ignores them, but does not).
  fs::path main = Write("nfs.conf",
                        "[statd\n"
                        "port = 1\n"
                        "[lockd \"x]\n"
                        "port = 2\n"
                        "[sm-notify]\n"
                        "retry-time = 3\n"
                        "no equals sign here\n");
  ExpectSameAsNfsUtils(main, {{
                                 {"statd", "port", "", "<unset>"},
                                 {"lockd", "port", "", "2"},
                                 {"lockd", "port", "x", "<unset>"},
                                 {"sm-notify", "retry-time", "", "3"},
                             }});
}

// ApplyNfsConf: nfs.conf's [statd] and [lockd] values, as nlockd's settings.
NfsConf ParseText(const std::string& text, std::vector<std::string>& warnings) {
  return NfsConf::Parse(text, "/etc/nfs.conf", warnings);
}

TEST(ApplyNfsConf, StatdValuesBecomeTheStatusMonitorsSettings) {
  std::vector<std::string> warnings;
  NfsConf conf = ParseText(
      "[statd]\n"
      "port = 662\n"
      "outgoing-port = 2020\n"
      "name = nfs1.example\n"
      "state-directory-path = /var/lib/nfs\n"
      "ha-callout = /usr/local/bin/callout\n"
      "[lockd]\n"
      "port = 32803\n",
      warnings);
  Config config;
  std::vector<NfsConfSetting> applied = ApplyNfsConf(conf, true, false, config, warnings);
  ASSERT_TRUE(config.nsm_listen.has_value());
  EXPECT_EQ(FormatListenAddress(*config.nsm_listen), "0.0.0.0:662");
  EXPECT_EQ(config.callback_source_port, 2020);
  EXPECT_EQ(config.name, "nfs1.example");
  EXPECT_EQ(config.statd_state_directory, "/var/lib/nfs");
  EXPECT_EQ(config.statd_ha_callout, "/usr/local/bin/callout");
  // [lockd] is the kernel's lock manager's while nlockd is only the status monitor.
  EXPECT_EQ(config.listen.port, Config{}.listen.port);
  ASSERT_EQ(applied.size(), 5u);
  EXPECT_EQ(applied[0].key, "nsm_listen");
  EXPECT_EQ(applied[0].origin, "/etc/nfs.conf:2");
  EXPECT_EQ(applied[4].key, "statd.ha_callout");
  EXPECT_EQ(applied[4].origin, "/etc/nfs.conf:6");
  EXPECT_TRUE(warnings.empty());
}

TEST(ApplyNfsConf, LockdPortIsTheListenerOfTheLockManagerAlone) {
  std::vector<std::string> warnings;
  NfsConf conf =
      ParseText("[lockd]\nport = 32803\nudp-port = 32769\n[statd]\nport = 662\n", warnings);
  Config config;
  std::vector<NfsConfSetting> applied = ApplyNfsConf(conf, false, true, config, warnings);
  EXPECT_EQ(FormatListenAddress(config.listen), "0.0.0.0:32803");
  EXPECT_FALSE(config.nsm_listen.has_value());
  ASSERT_EQ(applied.size(), 1u);
  EXPECT_EQ(applied[0].key, "listen");
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("udp-port 32769 differs from port 32803"), std::string::npos)
      << warnings[0];

  Config udp_only;
  NfsConf udp = ParseText("[lockd]\nudp-port = 4001\n", warnings);
  ApplyNfsConf(udp, false, true, udp_only, warnings);
  EXPECT_EQ(udp_only.listen.port, 4001);
}

TEST(ApplyNfsConf, NumbersAreReadAsNfsUtilsReadsThemAndZeroMeansAnyPort) {
  std::vector<std::string> warnings;
  // conf_get_num is atoi: "662abc" is 662, and no digits is 0, statd's "any port".
  NfsConf conf = ParseText("[statd]\nport = 662abc\noutgoing-port = none\n", warnings);
  Config config;
  ApplyNfsConf(conf, true, false, config, warnings);
  ASSERT_TRUE(config.nsm_listen.has_value());
  EXPECT_EQ(config.nsm_listen->port, 662);
  EXPECT_EQ(config.callback_source_port, 0);

  Config zero;
  NfsConf any = ParseText("[statd]\nport = 0\n", warnings);
  ApplyNfsConf(any, true, false, zero, warnings);
  EXPECT_FALSE(zero.nsm_listen.has_value());
}

TEST(ApplyNfsConf, WithoutAStateDirectoryStatdsOwnIsTakenOver) {
  std::vector<std::string> warnings;
  NfsConf conf = ParseText("[statd]\nport = 662\n", warnings);
  Config config;
  std::vector<NfsConfSetting> applied = ApplyNfsConf(conf, true, false, config, warnings);
  EXPECT_EQ(config.statd_state_directory, "/var/lib/nfs");
  ASSERT_EQ(applied.size(), 2u);
  EXPECT_EQ(applied[1].key, "statd.state_directory");
  EXPECT_EQ(applied[1].origin, "rpc.statd's default");
  // Serving NLM alone, statd's directory stays statd's.
  Config lockd;
  ApplyNfsConf(conf, false, true, lockd, warnings);
  EXPECT_EQ(lockd.statd_state_directory, "");
}

TEST(ApplyNfsConf, AValueNlockdRefusesNamesItsLine) {
  std::vector<std::string> warnings;
  NfsConf conf = ParseText("[statd]\n\nport = 70000\n", warnings);
  Config config;
  try {
    ApplyNfsConf(conf, true, false, config, warnings);
    FAIL() << "a port past 65535 was taken";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/etc/nfs.conf:3: [statd] port"), std::string::npos)
        << e.what();
  }
  NfsConf relative = ParseText("[statd]\nstate-directory-path = var/lib/nfs\n", warnings);
  EXPECT_THROW(ApplyNfsConf(relative, true, false, config, warnings), Error);
}

TEST(ApplyNfsConf, NoNotifyIsReportedNotApplied) {
  std::vector<std::string> warnings;
  NfsConf conf = ParseText("[statd]\nno-notify = 1\n", warnings);
  Config config;
  EXPECT_EQ(ApplyNfsConf(conf, true, false, config, warnings).size(), 1u);  // the directory
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("/etc/nfs.conf:2: [statd] no-notify is not applied"),
            std::string::npos)
      << warnings[0];
}

}  // namespace
}  // namespace nlockd::server
