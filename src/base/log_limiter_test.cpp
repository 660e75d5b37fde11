// SPDX-License-Identifier: Apache-2.0
#include "base/log_limiter.hpp"

#include <memory>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>

namespace nlockd {
namespace {

// Points spdlog's default logger at a string for the test's lifetime.
class CapturedLog {
 public:
  explicit CapturedLog(spdlog::level::level_enum level = spdlog::level::info)
      : previous_(spdlog::default_logger()) {
    auto logger = std::make_shared<spdlog::logger>(
        "captured", std::make_shared<spdlog::sinks::ostream_sink_st>(out_));
    logger->set_pattern("%l %v");
    logger->set_level(level);
    spdlog::set_default_logger(logger);
  }
  ~CapturedLog() { spdlog::set_default_logger(previous_); }
  // What was written since the last Take().
  std::string Take() {
    std::string text = out_.str();
    out_.str("");
    return text;
  }

 private:
  std::shared_ptr<spdlog::logger> previous_;
  std::ostringstream out_;
};

TEST(LogLimiter, WritesTheBurstThenSummarisesWhatItSuppressed) {
  CapturedLog log;
  ManualClock clock;
  LogLimiter limiter("nsm SM_NOTIFY ignored", LogRate{.per_second = 1.0, .burst = 2}, &clock);
  for (int i = 0; i < 5; ++i) limiter.Log(spdlog::level::info, "line {}", i);
  EXPECT_EQ(log.Take(), "info line 0\ninfo line 1\n");
  clock.Advance(std::chrono::seconds(1));
  limiter.Log(spdlog::level::info, "line {}", 5);
  limiter.Log(spdlog::level::info, "line {}", 6);
  EXPECT_EQ(log.Take(),
            "info nsm SM_NOTIFY ignored: 3 similar lines suppressed\n"
            "info line 5\n");
}

TEST(LogLimiter, RefillsAtTheRateUpToTheBurstOnly) {
  CapturedLog log;
  ManualClock clock;
  LogLimiter limiter("x", LogRate{.per_second = 2.0, .burst = 3}, &clock);
  uint64_t suppressed = 0;
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(limiter.Admit(suppressed));
  EXPECT_FALSE(limiter.Admit(suppressed));
  clock.Advance(std::chrono::milliseconds(500));  // one token
  EXPECT_TRUE(limiter.Admit(suppressed));
  EXPECT_EQ(suppressed, 1u);
  EXPECT_FALSE(limiter.Admit(suppressed));
  clock.Advance(std::chrono::hours(1));  // never more than the burst
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(limiter.Admit(suppressed));
  EXPECT_FALSE(limiter.Admit(suppressed));
}

TEST(LogLimiter, LinesBelowTheLevelCostNoToken) {
  CapturedLog log(spdlog::level::warn);
  ManualClock clock;
  LogLimiter limiter("x", LogRate{.per_second = 1.0, .burst = 1}, &clock);
  for (int i = 0; i < 10; ++i) limiter.Log(spdlog::level::info, "quiet {}", i);
  limiter.Log(spdlog::level::warn, "loud");
  EXPECT_EQ(log.Take(), "warning loud\n");
}

}  // namespace
}  // namespace nlockd
