// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <spdlog/spdlog.h>

namespace nlockd {

// Parses "trace", "debug", "info", "warn" (or "warning"), "error", "critical" or "off".
std::optional<spdlog::level::level_enum> ParseLogLevel(std::string_view name);
// The name ParseLogLevel reads back ("warn", not spdlog's "warning").
std::string LogLevelName(spdlog::level::level_enum level);

// A logfmt value: as is when it is a non-empty run of characters other than space, '"', '=' and
// control characters; otherwise in double quotes with '"', '\' and control characters escaped.
// Wrap every free-form value (names from the wire, paths, error texts) in a key=value field:
//   spdlog::info("nsm notify mon_name={}", LogValue(mon_name));
std::string LogValue(std::string_view value);

// How log lines are written to stderr.
enum class LogFormat {
  // "2024-01-01T12:00:00.000+0000 level=info msg..."
  kTimestamped,
  // "<6>level=info msg...": sd-daemon priority prefixes, no timestamp (the journal adds one).
  kJournal,
};

// kJournal when stderr is the journal stream systemd named in $JOURNAL_STREAM
// ("DEVICE:INODE" of stderr), kTimestamped otherwise.
LogFormat DetectLogFormat();

// A logger writing one line per event to `sink` in `format`.
std::shared_ptr<spdlog::logger> MakeLogger(spdlog::sink_ptr sink, spdlog::level::level_enum level,
                                           LogFormat format);

// Sets up the process-wide default logger: one logfmt line per event on stderr. Called once by
// main(); libraries log through spdlog's default.
void SetUpLogging(spdlog::level::level_enum level, LogFormat format = DetectLogFormat());

}  // namespace nlockd
