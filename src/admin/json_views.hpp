// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "admin/backend.hpp"

namespace nlockd::admin {

// The JSON shapes of the API (docs/api.md). File and owner handles are opaque bytes and render
// as lowercase hex; names render as text (invalid UTF-8 is replaced when the body is dumped).

std::string HexEncode(std::string_view bytes);
// nullopt if `hex` has an odd length or a non-hex digit.
std::optional<std::string> HexDecode(std::string_view hex);

nlohmann::json ToJson(const GraceView& grace);
nlohmann::json ToJson(const HaView& ha);
nlohmann::json ToJson(const StatusView& status);
nlohmann::json ToJson(const ReadinessView& readiness);
nlohmann::json ToJson(const RegistrationView& registration);
nlohmann::json ToJson(const HostView& host);
nlohmann::json ToJson(const LockView& lock);
nlohmann::json ToJson(const ShareView& share);
nlohmann::json ToJson(const BlockerView& blocker);
nlohmann::json ToJson(const WaiterView& waiter);
nlohmann::json ToJson(const HostDetail& detail);
nlohmann::json ToJson(const ReleaseResult& result);
nlohmann::json ToJson(const NotifyResult& result);
nlohmann::json ToJson(const ServiceReleaseResult& result);

// {"<key>": [items...], "total": N, "offset": O, "limit": L, "next_offset": O+L or null}.
template <typename T>
nlohmann::json PageToJson(const char* key, const ListResult<T>& result, const Page& page) {
  nlohmann::json items = nlohmann::json::array();
  for (const T& item : result.items) items.push_back(ToJson(item));
  const size_t next = page.offset + result.items.size();
  return {{key, std::move(items)},
          {"total", result.total},
          {"offset", page.offset},
          {"limit", page.limit},
          {"next_offset", next < result.total ? nlohmann::json(next) : nlohmann::json(nullptr)}};
}

}  // namespace nlockd::admin
