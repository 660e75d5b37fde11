// SPDX-License-Identifier: Apache-2.0
#include "server/config.hpp"

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <optional>
#include <string_view>
#include <system_error>
#include <vector>

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
#include "store/postgres/pg_conn.hpp"
#include "store/run_record.hpp"

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
  } else {
    auto colon = text.rfind(':');
    if (colon == std::string::npos) Fail("bad " + what + " (expected ADDR:PORT)");
    out.host = colon == 0 ? "0.0.0.0" : text.substr(0, colon);
    out.port = ParsePort(text.substr(colon + 1), what);
  }
  // The listeners bind IP literals only (a name could resolve to several addresses, or to
  // another one later); and whether an address is loopback must be decidable here.
  asio::error_code ec;
  asio::ip::make_address(out.host, ec);
  if (ec) Fail("bad " + what + ": '" + out.host + "' is not an IP address");
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
  if (view.starts_with("postgresql://") || view.starts_with("postgres://")) {
    // The store's own check, which it makes again when it opens.
    if (std::string error = store::PgConninfoError(uri); !error.empty()) {
      Fail("store '" + RedactStoreUri(uri) +
           "' is not a valid PostgreSQL connection URI: " + RedactPasswordOf(uri, error));
    }
    return uri;
  }
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
  if (access(path.c_str(), R_OK) != 0) {
    throw ConfigFileUnreadable(
        ErrorKind::kFailed, fmt::format("cannot read config file {}: {}", path,
                                        std::error_code(errno, std::generic_category()).message()));
  }
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

std::string EnvironmentName(std::string_view key) {
  std::string name = "NLOCKD_";
  for (char c : key) {
    name.push_back(c == '.' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
  }
  return name;
}

std::vector<std::string> ApplyEnvironment(const char* const* environment, Config& config) {
  std::vector<std::string> applied;
  if (environment == nullptr) return applied;
  for (const Setting& setting : Settings()) {
    const std::string name = EnvironmentName(setting.key);
    for (const char* const* entry = environment; *entry != nullptr; ++entry) {
      std::string_view text = *entry;
      if (!text.starts_with(name) || text.size() <= name.size() || text[name.size()] != '=') {
        continue;
      }
      std::string value(text.substr(name.size() + 1));
      std::vector<std::string> texts;
      const bool list =
          setting.type == SettingType::kStringList || setting.type == SettingType::kIntegerList;
      if (!list) {
        texts.push_back(value);
      } else if (!value.empty()) {
        for (size_t start = 0;;) {
          size_t comma = value.find(',', start);
          texts.push_back(value.substr(start, comma == std::string::npos ? comma : comma - start));
          if (comma == std::string::npos) break;
          start = comma + 1;
        }
      }
      const std::string where = "environment " + name;
      SettingValue parsed;
      try {
        parsed = ParseFlagValue(setting, texts);
      } catch (const Error& e) {
        Fail(where + ": " + e.what());
      }
      ApplySetting(setting, parsed, where, config);
      applied.push_back(name);
      break;
    }
  }
  return applied;
}

bool IsLoopbackHost(const std::string& host) {
  asio::error_code ec;
  auto address = asio::ip::make_address(host, ec);
  return !ec && rpc::NormalizeAddress(address).is_loopback();
}

namespace {

// Whether two listeners would contend for one port: the same port (0 picks a free one each
// time) on the same address or on the wildcard of the same family... or of either family,
// since a [::] socket takes IPv4 too.
bool Overlap(const ListenAddress& a, const ListenAddress& b) {
  if (a.port == 0 || a.port != b.port) return false;
  auto wildcard = [](const std::string& host) { return host == "0.0.0.0" || host == "::"; };
  if (wildcard(a.host) || wildcard(b.host)) return true;
  asio::error_code ec_a;
  asio::error_code ec_b;
  auto address_a = asio::ip::make_address(a.host, ec_a);
  auto address_b = asio::ip::make_address(b.host, ec_b);
  if (ec_a || ec_b) return a.host == b.host;
  return rpc::NormalizeAddress(address_a) == rpc::NormalizeAddress(address_b);
}

}  // namespace

void CheckConfig(const Config& config) {
  const bool shared_store = store::IsSharedStoreUri(config.store);
  if (config.ha && !shared_store) {
    Fail(
        fmt::format("ha needs a PostgreSQL store (postgresql://...), not '{}': a SQLite file or "
                    "the memory store serves one node",
                    RedactStoreUri(config.store)));
  }
  if (shared_store) {
    // In a shared database the service's rows are keyed by its name: the store's own check.
    store::StoreOptions options;
    options.node_id = config.name.empty() ? DefaultServerName() : config.name;
    try {
      store::ValidateOptions(options);
    } catch (const Error& e) {
      Fail(
          fmt::format("name: with a postgresql:// store the service name is the store's node "
                      "id: {}",
                      e.what()));
    }
  }

  struct Listener {
    std::string_view key;
    ListenAddress address;
  };
  std::vector<Listener> listeners;
  const bool nsm_apart = config.nsm_listen.has_value() && config.serve_nsm;
  if (!nsm_apart || config.serve_nlm) listeners.push_back({"listen", config.listen});
  if (nsm_apart) listeners.push_back({"nsm_listen", *config.nsm_listen});
  if (config.admin_enabled) listeners.push_back({"admin_listen", config.admin_listen});
  for (size_t i = 0; i < listeners.size(); ++i) {
    for (size_t j = i + 1; j < listeners.size(); ++j) {
      if (Overlap(listeners[i].address, listeners[j].address)) {
        Fail(fmt::format("{} ({}) and {} ({}) would listen on the same port", listeners[i].key,
                         FormatListenAddress(listeners[i].address), listeners[j].key,
                         FormatListenAddress(listeners[j].address)));
      }
    }
  }

  if (config.admin_enabled && config.admin_token.empty() &&
      !config.admin_allow_unauthenticated_remote && !IsLoopbackHost(config.admin_listen.host)) {
    Fail(fmt::format(
        "admin_listen {} is not a loopback address and the admin API has no token: anyone who "
        "reaches it could read every lock{}. Set admin.token_file (or admin.token), listen on "
        "127.0.0.1, or set admin.allow_unauthenticated_remote = true",
        FormatListenAddress(config.admin_listen),
        config.admin_open_writes ? " and, with admin.open_writes, drop them" : ""));
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
    out += fmt::format(
        ".TP\n\\fB{}\\fR ({}; default {}; flag \\fB{}\\fR; environment \\fB{}\\fR)\n",
        Roff(setting.key), Roff(TypeName(setting.type)), Roff(FormatValue(setting.get(defaults))),
        Roff(setting.flag), Roff(EnvironmentName(setting.key)));
    std::string help(setting.help);
    if (setting.type == SettingType::kInteger || setting.type == SettingType::kIntegerList) {
      help += fmt::format(" Range {}..{}.", setting.min, setting.max);
    }
    if (setting.reloadable) help += " SIGHUP applies a change.";
    out += Roff(help) + "\n";
  }
  return out;
}

std::string RenderManFlags() {
  std::string out;
  Config defaults;
  for (const Setting& setting : Settings()) {
    const bool list =
        setting.type == SettingType::kStringList || setting.type == SettingType::kIntegerList;
    out += fmt::format(".TP\n.BI {} \" {}\"{}\n", Roff(setting.flag), Roff(FlagValueName(setting)),
                       list ? " ..." : "");
    out +=
        Roff(setting.help) + fmt::format(" Key \\fB{}\\fR; environment \\fB{}\\fR; default {}.\n",
                                         Roff(setting.key), Roff(EnvironmentName(setting.key)),
                                         setting.secret ? std::string("none")
                                                        : Roff(FormatValue(setting.get(defaults))));
  }
  return out;
}

std::string RenderSynopsis() {
  std::vector<std::string> items = {"[--config FILE]", "[--check-config]", "[--export-statd-files]",
                                    "[--version]", "[--help]"};
  for (const Setting& setting : Settings()) {
    const bool list =
        setting.type == SettingType::kStringList || setting.type == SettingType::kIntegerList;
    items.push_back(
        fmt::format("[{} {}]{}", setting.flag, FlagValueName(setting), list ? "..." : ""));
  }
  std::string out;
  std::string line = "nlockd";
  for (const std::string& item : items) {
    if (line.size() + 1 + item.size() > 100) {
      out += line + "\n";
      line = "      ";
    }
    line += " " + item;
  }
  return out + line + "\n";
}

}  // namespace nlockd::server
