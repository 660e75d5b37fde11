// SPDX-License-Identifier: Apache-2.0
#include "base/logging.hpp"

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <sys/stat.h>

namespace nlockd {

namespace {

// "%^" style flag for the sd-daemon priority prefix ("<3>" for errors), syslog's numbering.
class JournalPriorityFlag : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    char digit = '6';
    switch (msg.level) {
      case spdlog::level::trace:
      case spdlog::level::debug:
        digit = '7';
        break;
      case spdlog::level::info:
        digit = '6';
        break;
      case spdlog::level::warn:
        digit = '4';
        break;
      case spdlog::level::err:
        digit = '3';
        break;
      case spdlog::level::critical:
        digit = '2';
        break;
      default:
        break;
    }
    const char prefix[] = {'<', digit, '>'};
    dest.append(prefix, prefix + 3);
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<JournalPriorityFlag>();
  }
};

// "%&": the message as logfmt. Call sites write "words of the event key=value key=value"
// (nlockd's convention); the leading words become msg="words of the event" and the fields
// follow as written, so that a logfmt parser reads every line whole. The first field is the
// first word that starts a key ([a-z_][a-z0-9_.]*=); a message without free words has no msg.
class LogfmtMessageFlag : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    const std::string_view payload(msg.payload.data(), msg.payload.size());
    const size_t fields = FirstField(payload);
    std::string_view words = payload.substr(0, fields);
    while (!words.empty() && words.back() == ' ') words.remove_suffix(1);
    std::string out;
    if (!words.empty()) out = "msg=" + LogValue(words);
    if (fields < payload.size()) {
      if (!out.empty()) out.push_back(' ');
      out.append(payload.substr(fields));
    }
    dest.append(out.data(), out.data() + out.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<LogfmtMessageFlag>();
  }

 private:
  static size_t FirstField(std::string_view text) {
    size_t start = 0;
    while (start < text.size()) {
      size_t end = text.find(' ', start);
      if (end == std::string_view::npos) end = text.size();
      if (IsField(text.substr(start, end - start))) return start;
      start = end + 1;
    }
    return text.size();
  }
  static bool IsField(std::string_view word) {
    size_t equals = word.find('=');
    if (equals == 0 || equals == std::string_view::npos) return false;
    if (!(std::islower(static_cast<unsigned char>(word[0])) || word[0] == '_')) return false;
    for (char c : word.substr(0, equals)) {
      auto byte = static_cast<unsigned char>(c);
      if (!(std::islower(byte) || std::isdigit(byte) || c == '_' || c == '.')) return false;
    }
    return true;
  }
};

bool NeedsQuotes(std::string_view value) {
  if (value.empty()) return true;
  for (char c : value) {
    auto byte = static_cast<unsigned char>(c);
    if (byte <= ' ' || c == '"' || c == '=' || c == '\\' || byte == 0x7f) return true;
  }
  return false;
}

}  // namespace

std::optional<spdlog::level::level_enum> ParseLogLevel(std::string_view name) {
  for (int level = spdlog::level::trace; level < spdlog::level::n_levels; ++level) {
    auto candidate = static_cast<spdlog::level::level_enum>(level);
    if (spdlog::level::to_string_view(candidate) == name) return candidate;
  }
  if (name == "warn") return spdlog::level::warn;  // spdlog spells it "warning".
  return std::nullopt;
}

std::string LogLevelName(spdlog::level::level_enum level) {
  if (level == spdlog::level::warn) return "warn";
  auto name = spdlog::level::to_string_view(level);
  return std::string(name.data(), name.size());
}

std::string LogValue(std::string_view value) {
  if (!NeedsQuotes(value)) return std::string(value);
  std::string out = "\"";
  for (char c : value) {
    auto byte = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (byte < ' ' || byte == 0x7f) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", byte);
      out += escaped;
    } else {
      out.push_back(c);
    }
  }
  out.push_back('"');
  return out;
}

LogFormat DetectLogFormat() {
  const char* stream = std::getenv("JOURNAL_STREAM");
  if (stream == nullptr) return LogFormat::kTimestamped;
  unsigned long long device = 0;
  unsigned long long inode = 0;
  if (std::sscanf(stream, "%llu:%llu", &device, &inode) != 2) return LogFormat::kTimestamped;
  struct stat info {};
  if (fstat(2, &info) != 0) return LogFormat::kTimestamped;
  // Only when stderr itself is that stream: a child whose stderr was redirected keeps the
  // variable but not the journal.
  if (info.st_dev != device || info.st_ino != inode) return LogFormat::kTimestamped;
  return LogFormat::kJournal;
}

std::shared_ptr<spdlog::logger> MakeLogger(spdlog::sink_ptr sink, spdlog::level::level_enum level,
                                           LogFormat format) {
  auto logger = std::make_shared<spdlog::logger>("nlockd", std::move(sink));
  auto formatter = std::make_unique<spdlog::pattern_formatter>();
  formatter->add_flag<JournalPriorityFlag>('*').add_flag<LogfmtMessageFlag>('&');
  if (format == LogFormat::kJournal) {
    formatter->set_pattern("%*level=%l %&");
  } else {
    formatter->set_pattern("%Y-%m-%dT%H:%M:%S.%e%z level=%l %&");
  }
  logger->set_formatter(std::move(formatter));
  logger->set_level(level);
  logger->flush_on(spdlog::level::warn);
  return logger;
}

void SetUpLogging(spdlog::level::level_enum level, LogFormat format) {
  spdlog::set_default_logger(
      MakeLogger(std::make_shared<spdlog::sinks::stderr_sink_mt>(), level, format));
}

}  // namespace nlockd
