// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace nlockd::server {

struct Config;

enum class SettingType { kString, kInteger, kBoolean, kStringList, kIntegerList };

// A setting's value as the file or a flag gives it, before it is checked and applied.
using SettingValue =
    std::variant<std::string, int64_t, bool, std::vector<std::string>, std::vector<int64_t>>;

// One config key: its TOML key ("rpc.max_connections"), its flag ("--max-connections"), type,
// range (integers), help, and how it is read from and written into a Config. This table is the
// only description of the settings: the file parser, the flags, --help, --check-config, the
// shipped config/nlockd.toml and nlockd.toml(5) all come from it.
struct Setting {
  std::string_view key;
  std::string_view flag;
  SettingType type;
  int64_t min = 0;  // Integers and integer lists: the accepted range.
  int64_t max = 0;
  std::string_view help;  // Sentences; "\n" separates paragraphs of the file's comment.
  // Writes a checked value (type and range already verified) into the Config; throws Error
  // (kFailed) when its text is not acceptable.
  void (*apply)(const SettingValue& value, Config& config);
  SettingValue (*get)(const Config& config);
  bool secret = false;               // Shown redacted by --check-config and in logs.
  bool reloadable = false;           // SIGHUP applies a change; other changes need a restart.
  std::string_view value_name = "";  // For --help: what the flag takes ("ADDR:PORT").
};

// A TOML table ("[nlm]") and the comment under its header.
struct SettingSection {
  std::string_view name;
  std::string_view help;
};

std::span<const Setting> Settings();
std::span<const SettingSection> SettingSections();
// nullptr when unknown.
const Setting* FindSetting(std::string_view key);

// Checks the value's range and applies it; errors say `where` (a file and line, or a flag) and
// the key. Throws Error (kFailed).
void ApplySetting(const Setting& setting, const SettingValue& value, const std::string& where,
                  Config& config);
// A flag's text as the setting's type ("--idle-timeout -5" -> -5, then ApplySetting refuses it).
SettingValue ParseFlagValue(const Setting& setting, const std::vector<std::string>& texts);

// What a flag takes, as --help and the synopses name it: value_name, else BOOL, TEXT or INT.
std::string FlagValueName(const Setting& setting);

// TOML spellings: "\"text\"", "12", "true", "[1, 2]".
std::string FormatValue(const SettingValue& value);
std::string_view TypeName(SettingType type);

}  // namespace nlockd::server
