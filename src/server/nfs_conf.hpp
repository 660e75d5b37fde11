// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace nlockd::server {

// /etc/nfs.conf read with nfs-utils' own rules, so that a value means to nlockd what it means to
// rpc.statd and sm-notify: `[section]` and `[section "arg"]` headers (names compared without
// case), `tag = value` with quotes or a `#`/`;` comment cut, `\` line joins, `include = [-]path`
// (relative to the including file; `-` makes it optional), FILE.d/*.conf applied after the main
// file in version order, the later assignment winning, `$NAME` values from the environment or
// the `[environment]` section. nfs-utils' quirks are kept on purpose and tested against its
// `nfsconf` tool: an empty value assigns nothing, a last line without a newline is dropped, and
// an assignment in `[s "arg"]` removes the plain `[s]` one of the same tag.
// What nfs-utils would only warn about becomes a warning here too, never an error.
class NfsConf {
 public:
  struct Value {
    std::string text;
    std::string origin;  // "FILE:LINE", for --check-config
  };

  // Reads `file` (a missing main file is no error: nfs-utils runs without one) and then
  // `file`.d/*.conf. Warnings (unreadable includes, malformed lines) go to `warnings`.
  static NfsConf Load(const std::filesystem::path& file, std::vector<std::string>& warnings);
  // One file's text, as if read from `origin` (includes resolve relative to its directory).
  static NfsConf Parse(std::string_view text, const std::filesystem::path& origin,
                       std::vector<std::string>& warnings);

  // The value of `tag` in the plain `[section]` (what rpc.statd reads with conf_get_str).
  std::optional<Value> Get(std::string_view section, std::string_view tag) const;
  // In `[section "arg"]`.
  std::optional<Value> Get(std::string_view section, std::string_view arg,
                           std::string_view tag) const;
  // nfs-utils' booleans: 1/t/true/y/yes/on and 0/f/false/n/no/off in any case; anything else
  // (or nothing) is nullopt, and the caller keeps its default.
  std::optional<bool> GetBool(std::string_view section, std::string_view tag) const;

  // The environment `$NAME` values are looked up in; getenv unless a test sets another.
  using Environment = std::function<std::optional<std::string>(const std::string&)>;
  void SetEnvironment(Environment environment) { environment_ = std::move(environment); }

 private:
  struct Binding {
    std::string section;  // lower case
    std::string arg;      // empty: the plain section
    std::string tag;
    Value value;
  };
  void Set(std::string section, std::string arg, std::string tag, Value value);
  void ParseInto(std::string_view text, const std::filesystem::path& origin, std::string section,
                 std::string arg, int depth, std::vector<std::string>& warnings);
  void LoadInto(const std::filesystem::path& file, std::string section, std::string arg, int depth,
                bool optional, std::vector<std::string>& warnings);
  std::optional<Value> Resolve(const Binding& binding) const;

  std::vector<Binding> bindings_;
  Environment environment_;
};

}  // namespace nlockd::server
