#include "base/logging.hpp"

#include <memory>
#include <string>

#include <spdlog/sinks/stdout_sinks.h>

namespace nlockd {

std::optional<spdlog::level::level_enum> ParseLogLevel(std::string_view name) {
  for (int level = spdlog::level::trace; level < spdlog::level::n_levels; ++level) {
    auto candidate = static_cast<spdlog::level::level_enum>(level);
    if (spdlog::level::to_string_view(candidate) == name) return candidate;
  }
  if (name == "warn") return spdlog::level::warn;  // spdlog spells it "warning".
  return std::nullopt;
}

void SetUpLogging(spdlog::level::level_enum level) {
  auto logger = std::make_shared<spdlog::logger>(
      "nlockd", std::make_shared<spdlog::sinks::stderr_sink_mt>());
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e%z level=%l %v");
  logger->set_level(level);
  logger->flush_on(spdlog::level::warn);
  spdlog::set_default_logger(std::move(logger));
}

}  // namespace nlockd
