// SPDX-License-Identifier: Apache-2.0
#include "server/config.hpp"

#include <cstdlib>
#include <fstream>
#include <limits>
#include <optional>
#include <string_view>

#include <asio/ip/address.hpp>
#include <fmt/format.h>
#include <sys/stat.h>
#include <toml++/toml.h>
#include <unistd.h>

#include "base/error.hpp"
#include "base/logging.hpp"
#include "base/redact.hpp"
#include "rpc/address.hpp"
#include "server/config_table.hpp"

namespace nlockd::server {

namespace {

[[noreturn]] void Fail(const std::string& message) { throw Error(ErrorKind::kFailed, message); }

uint16_t ParsePort(const std::string& text, const std::string& what) {
  if (text.empty() || text.size() > 5 ||
      text.find_first_not_of("0123456789") != std::string::npos) {
    Fail("bad port in " + what);
  }
  unsigned long port = std::stoul(text);
  if (port > 65535) Fail("port out of range in " + what);
  return static_cast<uint16_t>(port);
}

}  // namespace

bool ParseHostKey(const std::string& text) {
  if (text == "address") return false;
  if (text == "caller_name") return true;
  Fail("nlm host key must be 'address' or 'caller_name', not '" + text + "'");
}

bool ParseGrantedCallback(const std::string& text) {
  if (text == "msg") return true;
  if (text == "sync") return false;
  Fail("granted callback must be 'msg' or 'sync', not '" + text + "'");
}

void ApplyServe(const std::string& text, Config& config) {
  bool nlm = false;
  bool nsm = false;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    std::string item =
        text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    bool& seen = item == "nlm" ? nlm : nsm;
    if ((item != "nlm" && item != "nsm") || seen) {
      Fail("serve must list nlm and/or nsm once each, comma-separated, not '" + text + "'");
    }
    seen = true;
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  config.serve_nlm = nlm;
  config.serve_nsm = nsm;
}

std::string ParseAllowedAddress(const std::string& text) {
  asio::error_code ec;
  auto address = asio::ip::make_address(text, ec);
  if (ec) Fail("nsm allowlist entry '" + text + "' is not an IP address");
  return rpc::AddressToString(rpc::NormalizeAddress(address));
}

int32_t ParseCallbackProgram(int64_t value) {
  if (value < 1 || value > std::numeric_limits<int32_t>::max()) {
    Fail("nsm callback program " + std::to_string(value) + " is out of range");
  }
  return static_cast<int32_t>(value);
}

ListenAddress ParseListenAddress(const std::string& text) {
  ListenAddress out;
  std::string what = "listen address '" + text + "'";
  if (!text.empty() && text.front() == '[') {
    auto close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      Fail("bad " + what + " (expected [ADDR]:PORT)");
    }
    out.host = text.substr(1, close - 1);
    out.port = ParsePort(text.substr(close + 2), what);
    return out;
  }
  auto colon = text.rfind(':');
  if (colon == std::string::npos) Fail("bad " + what + " (expected ADDR:PORT)");
  out.host = colon == 0 ? "0.0.0.0" : text.substr(0, colon);
  out.port = ParsePort(text.substr(colon + 1), what);
  return out;
}

std::optional<ListenAddress> ParseAdminListen(const std::string& text) {
  if (text == "off") return std::nullopt;
  return ParseListenAddress(text);
}

void ApplyAdminListen(const std::string& text, Config& config) {
  std::optional<ListenAddress> address = ParseAdminListen(text);
  config.admin_enabled = address.has_value();
  if (address) config.admin_listen = *address;
}

std::string FormatListenAddress(const ListenAddress& address) {
  if (address.host.find(':') != std::string::npos) {
    return fmt::format("[{}]:{}", address.host, address.port);
  }
  return fmt::format("{}:{}", address.host, address.port);
}

std::string ParseIpLiteral(const std::string& text, const std::string& what) {
  asio::error_code ec;
  asio::ip::make_address(text, ec);
  if (ec) Fail(what + " '" + text + "' is not an IP address");
  return text;
}

std::string CheckStoreUri(const std::string& uri) {
  std::string_view view = uri;
  if (view == "memory:") return uri;
  if (view.starts_with("memory:")) {
    Fail("store '" + uri + "': memory: takes nothing after the colon");
  }
  if (view.starts_with("sqlite:")) {
    if (view.size() == 7) Fail("store 'sqlite:' needs a path: sqlite:PATH");
    return uri;
  }
  if (view.starts_with("postgresql://") || view.starts_with("postgres://")) return uri;
  Fail("store '" + RedactStoreUri(uri) +
       "' is not one of memory:, sqlite:PATH or postgresql://USER@HOST/DB");
}

std::string DefaultServerName() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0 || host[0] == '\0') return "localhost";
  return host;
}

namespace {

std::string Where(const std::string& path, const toml::node& node) {
  const auto& begin = node.source().begin;
  return fmt::format("{}:{}", path, begin.line);
}

std::string_view NodeTypeName(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::string:
      return "a string";
    case toml::node_type::integer:
      return "an integer";
    case toml::node_type::floating_point:
      return "a float";
    case toml::node_type::boolean:
      return "a boolean";
    case toml::node_type::array:
      return "an array";
    case toml::node_type::table:
      return "a table";
    default:
      return "a date or time";
  }
}

// The node as the setting's type, or nullopt when its TOML type is another.
std::optional<SettingValue> ValueOf(const Setting& setting, const toml::node& node) {
  switch (setting.type) {
    case SettingType::kString:
      if (auto v = node.value_exact<std::string>()) return SettingValue(*v);
      return std::nullopt;
    case SettingType::kInteger:
      if (auto v = node.value_exact<int64_t>()) return SettingValue(*v);
      return std::nullopt;
    case SettingType::kBoolean:
      if (auto v = node.value_exact<bool>()) return SettingValue(*v);
      return std::nullopt;
    case SettingType::kStringList: {
      const toml::array* array = node.as_array();
      if (!array) return std::nullopt;
      std::vector<std::string> out;
      for (const auto& element : *array) {
        auto v = element.value_exact<std::string>();
        if (!v) return std::nullopt;
        out.push_back(*v);
      }
      return SettingValue(std::move(out));
    }
    case SettingType::kIntegerList: {
      const toml::array* array = node.as_array();
      if (!array) return std::nullopt;
      std::vector<int64_t> out;
      for (const auto& element : *array) {
        auto v = element.value_exact<int64_t>();
        if (!v) return std::nullopt;
        out.push_back(*v);
      }
      return SettingValue(std::move(out));
    }
  }
  return std::nullopt;
}

bool IsSection(std::string_view name) {
  for (const auto& section : SettingSections()) {
    if (section.name == name) return true;
  }
  return false;
}

void LoadTable(const toml::table& table, const std::string& prefix, const std::string& path,
               Config& config) {
  for (auto&& [key_view, node] : table) {
    std::string key = prefix + std::string(key_view.str());
    std::string where = Where(path, node);
    if (prefix.empty() && IsSection(key)) {
      if (!node.is_table()) {
        Fail(fmt::format("{}: config key {} must be a table ([{}]), not {}", where, key, key,
                         NodeTypeName(node)));
      }
      LoadTable(*node.as_table(), key + ".", path, config);
      continue;
    }
    const Setting* setting = FindSetting(key);
    if (setting == nullptr) Fail(fmt::format("{}: unknown config key {}", where, key));
    std::optional<SettingValue> value = ValueOf(*setting, node);
    if (!value) {
      Fail(fmt::format("{}: config key {} must be {}, not {}", where, key, TypeName(setting->type),
                       NodeTypeName(node)));
    }
    ApplySetting(*setting, *value, where, config);
  }
}

std::string Comment(std::string_view help, size_t width = 98) {
  std::string out;
  std::string line = "#";
  size_t start = 0;
  while (start < help.size()) {
    size_t space = help.find(' ', start);
    if (space == std::string_view::npos) space = help.size();
    std::string_view word = help.substr(start, space - start);
    if (line.size() + 1 + word.size() > width && line != "#") {
      out += line + "\n";
      line = "#";
    }
    line += " ";
    line += word;
    start = space + 1;
  }
  return out + line + "\n";
}

std::string Render(const Config& config, bool with_help, bool redact) {
  std::string out;
  std::string section;
  for (const Setting& setting : Settings()) {
    auto dot = setting.key.find('.');
    std::string table =
        dot == std::string_view::npos ? "" : std::string(setting.key.substr(0, dot));
    if (table != section) {
      section = table;
      out += fmt::format("\n[{}]\n", table);
      for (const auto& s : SettingSections()) {
        if (with_help && s.name == table) out += Comment(s.help) + "\n";
      }
    } else if (with_help) {
      out += "\n";
    }
    if (with_help) out += Comment(setting.help);
    SettingValue value = setting.get(config);
    if (redact && setting.secret) value = RedactSecret(std::get<std::string>(value));
    if (redact && setting.key == "store") value = RedactStoreUri(std::get<std::string>(value));
    std::string name(dot == std::string_view::npos ? setting.key : setting.key.substr(dot + 1));
    out += fmt::format("{} = {}\n", name, FormatValue(value));
  }
  return out;
}

std::string Roff(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '\\') {
      out += "\\e";
    } else if (c == '-') {
      out += "\\-";
    } else {
      out.push_back(c);
    }
  }
  if (!out.empty() && (out[0] == '.' || out[0] == '\'')) out.insert(0, "\\&");
  return out;
}

std::string ResolveCredentialPath(const std::string& path) {
  if (path.empty() || path.front() == '/') return path;
  if (const char* dir = std::getenv("CREDENTIALS_DIRECTORY"); dir != nullptr && *dir != '\0') {
    return std::string(dir) + "/" + path;
  }
  return path;
}

}  // namespace

void LoadConfigFile(const std::string& path, Config& config) {
  toml::table table;
  try {
    table = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    const auto& begin = e.source().begin;
    if (begin.line == 0)
      Fail("cannot read config file " + path + ": " + std::string(e.description()));
    Fail(
        fmt::format("{}:{}:{}: syntax error: {}", path, begin.line, begin.column, e.description()));
  }
  LoadTable(table, "", path, config);
}

std::string ReadSecretFile(const std::string& path) {
  struct stat info {};
  if (stat(path.c_str(), &info) != 0) Fail("cannot read secret file " + path);
  if ((info.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    Fail(fmt::format("secret file {} may be read by group or others (mode {:o}): chmod 600 it",
                     path, info.st_mode & 07777));
  }
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) Fail("cannot read secret file " + path);
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
  if (line.empty()) Fail("secret file " + path + " is empty");
  return line;
}

void ResolveSecrets(Config& config) {
  if (!config.admin_token_file.empty()) {
    config.admin_token = ReadSecretFile(ResolveCredentialPath(config.admin_token_file));
  }
  if (!config.store_password_file.empty()) {
    std::string password = ReadSecretFile(ResolveCredentialPath(config.store_password_file));
    // libpq reads PGPASSWORD when the conninfo has no password; the environment of a process is
    // readable by its user and root only, unlike its command line.
    setenv("PGPASSWORD", password.c_str(), 1);
  }
}

std::string RenderEffectiveConfig(const Config& config) {
  return Render(config, /*with_help=*/false, /*redact=*/true);
}

std::string RenderConfigTemplate() {
  return "# nlockd configuration (nlockd.toml(5)). Every key has a command-line flag (nlockd(8)),\n"
         "# and flags override this file. Values shown are the defaults.\n\n" +
         Render(Config{}, /*with_help=*/true, /*redact=*/false).substr(1);
}

std::string RenderManKeys() {
  std::string out;
  Config defaults;
  for (const Setting& setting : Settings()) {
    out += fmt::format(".TP\n\\fB{}\\fR ({}; default {}; flag \\fB{}\\fR)\n", Roff(setting.key),
                       Roff(TypeName(setting.type)), Roff(FormatValue(setting.get(defaults))),
                       Roff(setting.flag));
    std::string help(setting.help);
    if (setting.type == SettingType::kInteger || setting.type == SettingType::kIntegerList) {
      help += fmt::format(" Range {}..{}.", setting.min, setting.max);
    }
    if (setting.reloadable) help += " SIGHUP applies a change.";
    out += Roff(help) + "\n";
  }
  return out;
}

}  // namespace nlockd::server
