// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <string>
#include <string_view>

namespace nlockd {

// A store URI fit for logs, status and errors: the password of a URI's userinfo
// ("postgresql://user:secret@host/db" -> "postgresql://user:REDACTED@host/db") and a conninfo's
// password=... value are replaced. Other text is returned as is.
std::string RedactStoreUri(std::string_view uri);

// `text` (an error message, say) with every occurrence of the password in `store_uri` replaced.
std::string RedactPasswordOf(std::string_view store_uri, std::string_view text);

// What a secret setting shows in --check-config and logs: "" when unset, "REDACTED" otherwise.
std::string RedactSecret(std::string_view secret);

}  // namespace nlockd
