#pragma once

#include <optional>
#include <string_view>

#include <spdlog/spdlog.h>

namespace nlockd {

// Parses "trace", "debug", "info", "warn" (or "warning"), "error", "critical" or "off".
std::optional<spdlog::level::level_enum> ParseLogLevel(std::string_view name);

// Sets up the process-wide default logger: one line per event on stderr, with time, level and
// key=value fields in the message. Called once by main(); libraries log through spdlog's default.
void SetUpLogging(spdlog::level::level_enum level);

}  // namespace nlockd
