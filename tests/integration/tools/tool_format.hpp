// SPDX-License-Identifier: Apache-2.0
#pragma once

// How the test tools print what they send and receive: one line per event, `key=value`
// fields, so that tests match lines with a regex.

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "integration/nlm_rpcgen.hpp"

namespace nlockd::integration::tools {

inline std::string Hex(const std::string& bytes) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  for (char ch : bytes) {
    auto c = static_cast<unsigned char>(ch);
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 15]);
  }
  return out;
}

inline std::string Describe(const NlmLock& lock) {
  return "caller=" + lock.caller_name + " svid=" + std::to_string(lock.svid) + " oh=" + lock.oh +
         " offset=" + std::to_string(lock.offset) + " length=" + std::to_string(lock.length);
}

inline std::string Describe(const NlmHolder& holder) {
  return "holder_svid=" + std::to_string(holder.svid) + " holder_oh=" + holder.oh +
         " holder_offset=" + std::to_string(holder.offset) +
         " holder_length=" + std::to_string(holder.length) +
         " holder_exclusive=" + (holder.exclusive ? "1" : "0");
}

// "verb key=value key=value ..." (values without spaces).
struct Operation {
  std::string verb;
  std::map<std::string, std::string> fields;

  std::string Get(const std::string& key, const std::string& fallback = "") const {
    auto it = fields.find(key);
    return it == fields.end() ? fallback : it->second;
  }
  int64_t GetInt(const std::string& key, int64_t fallback = 0) const {
    auto it = fields.find(key);
    return it == fields.end() ? fallback : std::stoll(it->second);
  }
};

inline std::optional<Operation> ParseOperation(const std::string& text) {
  Operation op;
  size_t at = 0;
  bool first = true;
  while (at < text.size()) {
    size_t end = text.find(' ', at);
    if (end == std::string::npos) end = text.size();
    std::string token = text.substr(at, end - at);
    at = end + 1;
    if (token.empty()) continue;
    if (first) {
      op.verb = token;
      first = false;
      continue;
    }
    size_t equals = token.find('=');
    if (equals == std::string::npos) return std::nullopt;
    op.fields[token.substr(0, equals)] = token.substr(equals + 1);
  }
  if (op.verb.empty()) return std::nullopt;
  return op;
}

}  // namespace nlockd::integration::tools
