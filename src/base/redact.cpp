// SPDX-License-Identifier: Apache-2.0
#include "base/redact.hpp"

#include <algorithm>

namespace nlockd {

namespace {

constexpr std::string_view kRedacted = "REDACTED";

// libpq keyword/value conninfo ("host=db password=secret"): the value after password=.
std::string RedactConninfo(std::string_view text) {
  std::string out(text);
  for (size_t at = out.find("password"); at != std::string::npos;
       at = out.find("password", at + 1)) {
    if (at != 0 && out[at - 1] != ' ') continue;
    size_t equals = out.find_first_not_of(' ', at + 8);
    if (equals == std::string::npos || out[equals] != '=') continue;
    size_t begin = out.find_first_not_of(' ', equals + 1);
    if (begin == std::string::npos) break;
    size_t end = begin;
    if (out[begin] == '\'') {
      end = begin + 1;
      while (end < out.size() && out[end] != '\'') end += out[end] == '\\' ? size_t{2} : size_t{1};
      end = std::min(end + 1, out.size());
    } else {
      end = out.find(' ', begin);
      if (end == std::string::npos) end = out.size();
    }
    out.replace(begin, end - begin, kRedacted);
  }
  return out;
}

}  // namespace

std::string RedactStoreUri(std::string_view uri) {
  size_t scheme_end = uri.find("://");
  if (scheme_end == std::string_view::npos) return RedactConninfo(uri);
  size_t authority = scheme_end + 3;
  size_t authority_end = uri.find_first_of("/?#", authority);
  if (authority_end == std::string_view::npos) authority_end = uri.size();
  // The last '@' of the authority ends the userinfo (a password may contain '@' unencoded).
  size_t at = uri.substr(0, authority_end).rfind('@');
  std::string out;
  if (at == std::string_view::npos || at < authority) {
    out = std::string(uri);
  } else {
    size_t colon = uri.substr(0, at).find(':', authority);
    if (colon == std::string_view::npos) {
      out = std::string(uri);
    } else {
      out = std::string(uri.substr(0, colon + 1)) + std::string(kRedacted) +
            std::string(uri.substr(at));
    }
  }
  // A password may also come as a query parameter ("?password=...").
  size_t query = out.find('?');
  if (query == std::string::npos) return out;
  for (size_t at_param = out.find("password=", query); at_param != std::string::npos;
       at_param = out.find("password=", at_param + 1)) {
    char before = out[at_param - 1];
    if (before != '?' && before != '&') continue;
    size_t begin = at_param + 9;
    size_t end = out.find_first_of("&#", begin);
    if (end == std::string::npos) end = out.size();
    out.replace(begin, end - begin, kRedacted);
  }
  return out;
}

std::string RedactPasswordOf(std::string_view store_uri, std::string_view text) {
  // The password is what RedactStoreUri replaced: the text between the common prefix and suffix.
  std::string redacted = RedactStoreUri(store_uri);
  std::string out(text);
  if (redacted == store_uri) return out;
  size_t prefix = 0;
  while (prefix < redacted.size() && redacted[prefix] == store_uri[prefix]) ++prefix;
  size_t suffix = 0;
  while (suffix < redacted.size() - prefix && suffix < store_uri.size() - prefix &&
         redacted[redacted.size() - 1 - suffix] == store_uri[store_uri.size() - 1 - suffix]) {
    ++suffix;
  }
  std::string password(store_uri.substr(prefix, store_uri.size() - prefix - suffix));
  if (password.empty()) return out;
  for (size_t at = out.find(password); at != std::string::npos;
       at = out.find(password, at + kRedacted.size())) {
    out.replace(at, password.size(), kRedacted);
  }
  return out;
}

std::string RedactSecret(std::string_view secret) {
  return secret.empty() ? std::string() : std::string(kRedacted);
}

}  // namespace nlockd
