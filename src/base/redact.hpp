#pragma once

#include <string>
#include <string_view>

namespace nlockd {

// A store URI fit for logs, status and errors: the password of a URI's userinfo
// ("postgresql://user:secret@host/db" -> "postgresql://user:REDACTED@host/db") and a conninfo's
// password=... value are replaced. Other text is returned as is.
std::string RedactStoreUri(std::string_view uri);

// What a secret setting shows in --check-config and logs: "" when unset, "REDACTED" otherwise.
std::string RedactSecret(std::string_view secret);

}  // namespace nlockd
