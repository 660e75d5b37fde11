#include "base/logging.hpp"

#include <gtest/gtest.h>

namespace nlockd {
namespace {

TEST(ParseLogLevel, KnowsSpdlogNamesAndWarningAlias) {
  EXPECT_EQ(ParseLogLevel("debug"), spdlog::level::debug);
  EXPECT_EQ(ParseLogLevel("warn"), spdlog::level::warn);
  EXPECT_EQ(ParseLogLevel("warning"), spdlog::level::warn);
  EXPECT_EQ(ParseLogLevel("off"), spdlog::level::off);
  EXPECT_EQ(ParseLogLevel("loud"), std::nullopt);
}

}  // namespace
}  // namespace nlockd
