// SPDX-License-Identifier: Apache-2.0
// nfs.conf's settings for rpc.statd and lockd, taken as nlockd's (ApplyNfsConf).
#include <cctype>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "server/config.hpp"
#include "server/config_table.hpp"
#include "server/nfs_conf.hpp"

namespace nlockd::server {
namespace {

// conf_get_num's reading: atoi (leading blanks, a sign, the digits; the rest ignored, no digits
// is 0).
constexpr const char* kStatdDefaultDirectory = "/var/lib/nfs";

int64_t NfsNumber(const std::string& text) {
  size_t i = 0;
  while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i])) != 0) ++i;
  bool negative = false;
  if (i < text.size() && (text[i] == '-' || text[i] == '+')) negative = text[i++] == '-';
  int64_t value = 0;
  for (; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])) != 0; ++i) {
    value = value * 10 + (text[i] - '0');
    if (value > (int64_t{1} << 32)) break;  // Out of every range anyway.
  }
  return negative ? -value : value;
}

class Applier {
 public:
  Applier(Config& config, std::vector<NfsConfSetting>& applied)
      : config_(config), applied_(applied) {}

  void Apply(std::string_view key, const std::string& text, const NfsConf::Value& from,
             std::string_view section, std::string_view tag) {
    const Setting* setting = FindSetting(key);
    const std::string where = fmt::format("{}: [{}] {}", from.origin, section, tag);
    SettingValue parsed;
    try {
      parsed = ParseFlagValue(*setting, {text});
    } catch (const Error& e) {
      throw Error(ErrorKind::kFailed, where + ": " + e.what());
    }
    ApplySetting(*setting, parsed, where, config_);
    applied_.push_back({std::string(key), from.origin});
  }

 private:
  Config& config_;
  std::vector<NfsConfSetting>& applied_;
};

void ApplyStatd(const NfsConf& conf, Applier& apply, std::vector<std::string>& warnings) {
  if (auto port = conf.Get("statd", "port")) {
    // rpc.statd listens on every address; 0 (or no number) lets it pick one, which for nlockd
    // is NSM on the shared listener, found through rpcbind all the same.
    const int64_t number = NfsNumber(port->text);
    if (number != 0) {
      apply.Apply("nsm_listen", fmt::format("0.0.0.0:{}", number), *port, "statd", "port");
    }
  }
  if (auto port = conf.Get("statd", "outgoing-port")) {
    apply.Apply("callback_source_port", std::to_string(NfsNumber(port->text)), *port, "statd",
                "outgoing-port");
  }
  if (auto name = conf.Get("statd", "name"))
    apply.Apply("name", name->text, *name, "statd", "name");
  // Unset, rpc.statd uses its compiled-in directory (Debian's: /var/lib/nfs); so does nlockd in
  // its place, so that the hand-over of statd's files is never silently skipped.
  NfsConf::Value directory =
      conf.Get("statd", "state-directory-path")
          .value_or(NfsConf::Value{kStatdDefaultDirectory, "rpc.statd's default"});
  apply.Apply("statd.state_directory", directory.text, directory, "statd", "state-directory-path");
  if (auto callout = conf.Get("statd", "ha-callout")) {
    apply.Apply("statd.ha_callout", callout->text, *callout, "statd", "ha-callout");
  }
  if (auto no_notify = conf.Get("statd", "no-notify")) {
    warnings.push_back(fmt::format(
        "{}: [statd] no-notify is not applied: nlockd sends the reboot notifications that "
        "rpc.statd leaves to sm-notify itself",
        no_notify->origin));
  }
}

void ApplyLockd(const NfsConf& conf, Applier& apply, std::vector<std::string>& warnings) {
  auto tcp = conf.Get("lockd", "port");
  auto udp = conf.Get("lockd", "udp-port");
  std::optional<NfsConf::Value> port = tcp ? tcp : udp;
  if (!port) return;
  const int64_t number = NfsNumber(port->text);
  if (tcp && udp && NfsNumber(udp->text) != number) {
    warnings.push_back(fmt::format(
        "{}: [lockd] udp-port {} differs from port {}: nlockd serves TCP and UDP on one port, {}",
        udp->origin, NfsNumber(udp->text), number, number));
  }
  // 0 is the kernel's "any port"; nlockd's listen keeps its own default then.
  if (number != 0) {
    apply.Apply("listen", fmt::format("0.0.0.0:{}", number), *port, "lockd",
                tcp ? "port" : "udp-port");
  }
}

}  // namespace

std::vector<NfsConfSetting> ApplyNfsConf(const NfsConf& conf, bool statd_role, bool lockd_role,
                                         Config& config, std::vector<std::string>& warnings) {
  std::vector<NfsConfSetting> applied;
  Applier apply(config, applied);
  if (statd_role) ApplyStatd(conf, apply, warnings);
  if (lockd_role) ApplyLockd(conf, apply, warnings);
  return applied;
}

}  // namespace nlockd::server
