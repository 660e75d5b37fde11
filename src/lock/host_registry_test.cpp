// SPDX-License-Identifier: Apache-2.0
#include "lock/host_registry.hpp"

#include <chrono>

#include <gtest/gtest.h>

namespace nlockd::lock {
namespace {

using std::chrono::seconds;

TEST(HostRegistry, AddsAHostOnceAndStampsIt) {
  ManualClock clock;
  HostRegistry registry(clock, 10);
  clock.Advance(seconds(3));
  const auto first = registry.FindOrAdd(HostId("a"));
  ASSERT_NE(first.host, nullptr);
  EXPECT_TRUE(first.added);
  EXPECT_EQ(first.host->first_seen, clock.Now());
  const auto again = registry.FindOrAdd(HostId("a"));
  EXPECT_EQ(again.host, first.host);
  EXPECT_FALSE(again.added);
  clock.Advance(seconds(4));
  registry.Touch(*again.host);
  EXPECT_EQ(registry.Find(HostId("a"))->last_seen - registry.Find(HostId("a"))->first_seen,
            seconds(4));
}

TEST(HostRegistry, RefusesNewHostsWhenFullOfBusyOnes) {
  ManualClock clock;
  HostRegistry registry(clock, 2);
  registry.FindOrAdd(HostId("a")).host->locks = 1;
  registry.FindOrAdd(HostId("b")).host->shares = 1;
  EXPECT_EQ(registry.FindOrAdd(HostId("c")).host, nullptr);
  EXPECT_EQ(registry.size(), 2u);
  EXPECT_NE(registry.FindOrAdd(HostId("c"), HostRegistry::Admission::kForce).host, nullptr);
  EXPECT_EQ(registry.size(), 3u);
}

TEST(HostRegistry, EvictsTheLeastRecentlySeenIdleHostToMakeRoom) {
  ManualClock clock;
  HostRegistry registry(clock, 3);
  registry.FindOrAdd(HostId("old-idle"));
  clock.Advance(seconds(1));
  registry.FindOrAdd(HostId("busy")).host->waiters = 1;
  clock.Advance(seconds(1));
  registry.FindOrAdd(HostId("new-idle"));
  clock.Advance(seconds(1));
  EXPECT_NE(registry.FindOrAdd(HostId("d")).host, nullptr);
  EXPECT_EQ(registry.Find(HostId("old-idle")), nullptr);
  EXPECT_NE(registry.Find(HostId("busy")), nullptr);
  EXPECT_NE(registry.Find(HostId("new-idle")), nullptr);
}

TEST(HostRegistry, ForgetsOnlyIdleHosts) {
  ManualClock clock;
  HostRegistry registry(clock, 10);
  registry.FindOrAdd(HostId("idle"));
  registry.FindOrAdd(HostId("busy")).host->pending_grants = 1;
  EXPECT_TRUE(registry.Forget(HostId("idle")));
  EXPECT_FALSE(registry.Forget(HostId("busy")));
  EXPECT_FALSE(registry.Forget(HostId("unknown")));
  size_t seen = 0;
  registry.ForEach([&](const HostInfo&) { ++seen; });
  EXPECT_EQ(seen, 1u);
}

}  // namespace
}  // namespace nlockd::lock
