#include "server/config.hpp"

#include <limits>
#include <set>

#include <asio/ip/address.hpp>
#include <toml++/toml.h>
#include <unistd.h>

#include "base/error.hpp"
#include "base/logging.hpp"
#include "rpc/address.hpp"

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

template <typename T>
T Integer(const toml::node& node, const std::string& key, T min, T max) {
  auto value = node.value<int64_t>();
  if (!value) Fail("config key " + key + " must be an integer");
  if (*value < static_cast<int64_t>(min) ||
      static_cast<uint64_t>(*value) > static_cast<uint64_t>(max)) {
    Fail("config key " + key + " is out of range");
  }
  return static_cast<T>(*value);
}

std::string String(const toml::node& node, const std::string& key) {
  auto value = node.value<std::string>();
  if (!value) Fail("config key " + key + " must be a string");
  return *value;
}

bool Boolean(const toml::node& node, const std::string& key) {
  auto value = node.value<bool>();
  if (!value) Fail("config key " + key + " must be true or false");
  return *value;
}

std::vector<const toml::node*> ArrayOf(const toml::node& node, const std::string& key) {
  const toml::array* array = node.as_array();
  if (!array) Fail("config key " + key + " must be an array");
  std::vector<const toml::node*> out;
  for (const auto& element : *array) out.push_back(&element);
  return out;
}

void LoadNsmTable(const toml::table& table, const std::string& path, Config& config) {
  for (auto&& [sub_view, sub] : table) {
    std::string sub_key = "nsm." + std::string(sub_view.str());
    if (sub_key == "nsm.max_registrations") {
      config.nsm_max_registrations = Integer<size_t>(sub, sub_key, 1, 10'000'000);
    } else if (sub_key == "nsm.allowlist") {
      config.nsm_allowlist.clear();
      for (const auto* element : ArrayOf(sub, sub_key)) {
        config.nsm_allowlist.push_back(ParseAllowedAddress(String(*element, sub_key)));
      }
    } else if (sub_key == "nsm.callback_programs") {
      config.nsm_callback_programs.clear();
      for (const auto* element : ArrayOf(sub, sub_key)) {
        config.nsm_callback_programs.push_back(
            ParseCallbackProgram(Integer<int64_t>(*element, sub_key, 1, INT32_MAX)));
      }
    } else if (sub_key == "nsm.check_notifier_address") {
      config.nsm_check_notifier_address = Boolean(sub, sub_key);
    } else if (sub_key == "nsm.callback_timeout") {
      config.nsm_callback_timeout = std::chrono::seconds(Integer<int64_t>(sub, sub_key, 1, 300));
    } else {
      Fail("unknown config key " + sub_key + " in " + path);
    }
  }
}

void LoadNotifyTable(const toml::table& table, const std::string& path, Config& config) {
  for (auto&& [sub_view, sub] : table) {
    std::string sub_key = "notify." + std::string(sub_view.str());
    if (sub_key == "notify.statd_port") {
      config.notify_statd_port = Integer<uint16_t>(sub, sub_key, 0, 65535);
    } else if (sub_key == "notify.rpcbind_port") {
      config.notify_rpcbind_port = Integer<uint16_t>(sub, sub_key, 1, 65535);
    } else if (sub_key == "notify.timeout") {
      config.notify_timeout = std::chrono::seconds(Integer<int64_t>(sub, sub_key, 1, 300));
    } else if (sub_key == "notify.backoff") {
      config.notify_backoff = std::chrono::seconds(Integer<int64_t>(sub, sub_key, 1, 120));
    } else if (sub_key == "notify.budget") {
      config.notify_budget = std::chrono::seconds(Integer<int64_t>(sub, sub_key, 1, 86400));
    } else if (sub_key == "notify.drop_unreachable") {
      config.notify_drop_unreachable = Boolean(sub, sub_key);
    } else {
      Fail("unknown config key " + sub_key + " in " + path);
    }
  }
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
    std::string item = text.substr(start, comma == std::string::npos ? std::string::npos
                                                                       : comma - start);
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

std::string DefaultServerName() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0 || host[0] == '\0') return "localhost";
  return host;
}

void LoadConfigFile(const std::string& path, Config& config) {
  toml::table table;
  try {
    table = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    Fail("cannot read config file " + path + ": " + std::string(e.description()));
  }
  for (auto&& [key_view, node] : table) {
    std::string key(key_view.str());
    if (key == "listen") {
      config.listen = ParseListenAddress(String(node, key));
    } else if (key == "name") {
      config.name = String(node, key);
    } else if (key == "log_level") {
      auto level = ParseLogLevel(String(node, key));
      if (!level) Fail("config key log_level: unknown level");
      config.log_level = *level;
    } else if (key == "store") {
      config.store = String(node, key);
    } else if (key == "grace") {
      config.grace = std::chrono::seconds(Integer<int64_t>(node, key, 0, 3600));
    } else if (key == "grace_floor") {
      config.grace_floor = std::chrono::seconds(Integer<int64_t>(node, key, 0, 3600));
    } else if (key == "grace_end_early") {
      config.grace_end_early = Boolean(node, key);
    } else if (key == "persist_locks") {
      config.persist_locks = Boolean(node, key);
    } else if (key == "notify" && node.is_table()) {
      LoadNotifyTable(*node.as_table(), path, config);
    } else if (key == "nlm" && node.is_table()) {
      for (auto&& [sub_view, sub] : *node.as_table()) {
        std::string sub_key = "nlm." + std::string(sub_view.str());
        if (sub_key == "nlm.host_key") {
          config.nlm_key_by_caller_name = ParseHostKey(String(sub, sub_key));
        } else if (sub_key == "nlm.granted_callback") {
          config.nlm_granted_msg = ParseGrantedCallback(String(sub, sub_key));
        } else if (sub_key == "nlm.max_hosts") {
          config.max_hosts = Integer<size_t>(sub, sub_key, 1, 10'000'000);
        } else {
          Fail("unknown config key " + sub_key + " in " + path);
        }
      }
    } else if (key == "serve") {
      ApplyServe(String(node, key), config);
    } else if (key == "nsm_listen") {
      std::string text = String(node, key);
      if (text.empty()) {
        config.nsm_listen.reset();
      } else {
        config.nsm_listen = ParseListenAddress(text);
      }
    } else if (key == "callback_source_port") {
      config.callback_source_port = Integer<uint16_t>(node, key, 0, 65535);
    } else if (key == "admin_listen") {
      ApplyAdminListen(String(node, key), config);
    } else if (key == "admin" && node.is_table()) {
      for (auto&& [sub_view, sub] : *node.as_table()) {
        std::string sub_key = "admin." + std::string(sub_view.str());
        if (sub_key != "admin.token") Fail("unknown config key " + sub_key + " in " + path);
        config.admin_token = String(sub, sub_key);
      }
    } else if (key == "nsm" && node.is_table()) {
      LoadNsmTable(*node.as_table(), path, config);
    } else if (key == "rpcbind" && node.is_table()) {
      for (auto&& [sub_view, sub] : *node.as_table()) {
        std::string sub_key = "rpcbind." + std::string(sub_view.str());
        if (sub_key == "rpcbind.register") {
          config.rpcbind_register = Boolean(sub, sub_key);
        } else if (sub_key == "rpcbind.host") {
          config.rpcbind_host = String(sub, sub_key);
        } else if (sub_key == "rpcbind.port") {
          config.rpcbind_port = Integer<uint16_t>(sub, sub_key, 1, 65535);
        } else {
          Fail("unknown config key " + sub_key + " in " + path);
        }
      }
    } else if (key == "rpc" && node.is_table()) {
      for (auto&& [sub_view, sub] : *node.as_table()) {
        std::string sub_key = "rpc." + std::string(sub_view.str());
        if (sub_key == "rpc.max_connections") {
          config.max_connections = Integer<size_t>(sub, sub_key, 1, 1 << 20);
        } else if (sub_key == "rpc.max_record_size") {
          config.max_record_size = Integer<size_t>(sub, sub_key, 1024, 64 << 20);
        } else if (sub_key == "rpc.idle_timeout") {
          config.idle_timeout = std::chrono::seconds(Integer<int64_t>(sub, sub_key, 1, 86400));
        } else {
          Fail("unknown config key " + sub_key + " in " + path);
        }
      }
    } else {
      Fail("unknown config key " + key + " in " + path);
    }
  }
}

}  // namespace nlockd::server
