// SPDX-License-Identifier: Apache-2.0
#include "admin/json_views.hpp"

#include "nlockd_build_info.hpp"

namespace nlockd::admin {
namespace {

using nlohmann::json;

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::string HexEncode(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(bytes.size() * 2);
  for (const char c : bytes) {
    const auto byte = static_cast<uint8_t>(c);
    hex.push_back(kDigits[byte >> 4]);
    hex.push_back(kDigits[byte & 0xf]);
  }
  return hex;
}

std::optional<std::string> HexDecode(std::string_view hex) {
  if (hex.size() % 2 != 0) return std::nullopt;
  std::string bytes;
  bytes.reserve(hex.size() / 2);
  for (size_t i = 0; i < hex.size(); i += 2) {
    const int high = HexDigit(hex[i]);
    const int low = HexDigit(hex[i + 1]);
    if (high < 0 || low < 0) return std::nullopt;
    bytes.push_back(static_cast<char>((high << 4) | low));
  }
  return bytes;
}

json ToJson(const GraceView& grace) {
  return {{"active", grace.active},
          {"mode", grace.active ? json(grace.mode) : json(nullptr)},
          {"seconds_left", grace.seconds_left},
          {"reclaims_counted", grace.reclaims_counted},
          {"reclaims_expected", grace.reclaims_expected},
          {"last_end_reason",
           grace.last_end_reason.empty() ? json(nullptr) : json(grace.last_end_reason)}};
}

json ToJson(const HaView& ha) {
  return {{"role", ha.active ? "active" : "standby"},
          {"holder", ha.holder},
          {"epoch", ha.epoch},
          {"lease_seconds", ha.lease_seconds}};
}

json ToJson(const StatusView& status) {
  json out = {{"state_number", status.state_number},
              {"server_name", status.server_name},
              {"version", NLOCKD_BUILD_VERSION},
              {"revision", NLOCKD_BUILD_REVISION},
              {"uptime_seconds", status.uptime_seconds},
              {"grace", ToJson(status.grace)},
              {"counts",
               {{"registrations", status.registrations},
                {"monitored_hosts", status.monitored_hosts},
                {"hosts", status.hosts},
                {"locks", status.locks},
                {"shares", status.shares},
                {"waiters", status.waiters},
                {"pending_grants", status.pending_grants}}}};
  if (status.ha) out["ha"] = ToJson(*status.ha);
  return out;
}

json ToJson(const ReadinessView& readiness) {
  json out = {{"ready", readiness.ready()},
              {"store_loaded", readiness.store_loaded},
              {"listening", readiness.listening},
              {"grace", ToJson(readiness.grace)}};
  if (readiness.ha) {
    out["role"] = readiness.ha->active ? "active" : "standby";
    out["holder"] = readiness.ha->holder;
    out["epoch"] = readiness.ha->epoch;
  }
  return out;
}

json ToJson(const RegistrationView& registration) {
  return {{"id", registration.id},
          {"mon_name", registration.mon_name},
          {"my_name", registration.my_name},
          {"my_prog", registration.my_prog},
          {"my_vers", registration.my_vers},
          {"my_proc", registration.my_proc},
          {"priv", HexEncode(registration.priv)},
          {"source_address", registration.source_address},
          {"created_unix", registration.created_unix},
          {"updated_unix", registration.updated_unix}};
}

json ToJson(const HostView& host) {
  return {{"name", host.name},
          {"label", host.label},
          {"nsm_state", host.nsm_state ? json(*host.nsm_state) : json(nullptr)},
          {"monitored", host.monitored},
          {"first_seen_seconds_ago", host.first_seen_seconds_ago},
          {"last_seen_seconds_ago", host.last_seen_seconds_ago},
          {"locks", host.locks},
          {"shares", host.shares},
          {"waiters", host.waiters},
          {"pending_grants", host.pending_grants}};
}

json ToJson(const LockView& lock) {
  return {{"file", HexEncode(lock.file)},
          {"host", lock.host},
          {"svid", lock.svid},
          {"owner", HexEncode(lock.owner)},
          {"offset", lock.offset},
          {"length", lock.length},
          {"exclusive", lock.exclusive},
          {"awaiting_reclaim", lock.awaiting_reclaim}};
}

json ToJson(const ShareView& share) {
  return {{"file", HexEncode(share.file)},
          {"host", share.host},
          {"owner", HexEncode(share.owner)},
          {"access", share.access},
          {"deny", share.deny},
          {"awaiting_reclaim", share.awaiting_reclaim}};
}

json ToJson(const BlockerView& blocker) {
  return {
      {"host", blocker.host},      {"svid", blocker.svid},     {"owner", HexEncode(blocker.owner)},
      {"offset", blocker.offset},  {"length", blocker.length}, {"exclusive", blocker.exclusive},
      {"waiting", blocker.waiting}};
}

json ToJson(const WaiterView& waiter) {
  json blocked_by = json::array();
  for (const BlockerView& blocker : waiter.blocked_by) blocked_by.push_back(ToJson(blocker));
  return {{"id", waiter.id},
          {"file", HexEncode(waiter.file)},
          {"host", waiter.host},
          {"svid", waiter.svid},
          {"owner", HexEncode(waiter.owner)},
          {"offset", waiter.offset},
          {"length", waiter.length},
          {"exclusive", waiter.exclusive},
          {"granted", waiter.granted},
          {"seconds", waiter.seconds},
          {"blocked_by", std::move(blocked_by)},
          {"blockers", waiter.blockers}};
}

json ToJson(const HostDetail& detail) {
  json out = ToJson(detail.host);
  json locks = json::array();
  for (const LockView& lock : detail.locks) locks.push_back(ToJson(lock));
  json shares = json::array();
  for (const ShareView& share : detail.shares) shares.push_back(ToJson(share));
  json waiters = json::array();
  for (const WaiterView& waiter : detail.waiters) waiters.push_back(ToJson(waiter));
  out["lock_list"] = std::move(locks);
  out["share_list"] = std::move(shares);
  out["waiter_list"] = std::move(waiters);
  return out;
}

json ToJson(const ReleaseResult& result) {
  return {{"released",
           {{"locks", result.locks}, {"shares", result.shares}, {"waiters", result.waiters}}},
          {"waiters_granted", result.waiters_granted}};
}

json ToJson(const NotifyResult& result) { return {{"queued_hosts", result.hosts}}; }

json ToJson(const ServiceReleaseResult& result) {
  return {{"releasing", true}, {"service", result.service}, {"epoch", result.epoch}};
}

}  // namespace nlockd::admin
