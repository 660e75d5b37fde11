// SPDX-License-Identifier: Apache-2.0
#include "nsm/name_resolver.hpp"

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <gtest/gtest.h>

#include "testutil/run_coroutine.hpp"

namespace nlockd::nsm {
namespace {

using std::chrono::milliseconds;

// A blocking lookup standing in for getaddrinfo: names starting with "stuck" block, as on a DNS
// server that never answers, until Release(); "client.example" is 10.0.0.5 at once.
class Dns {
 public:
  BlockingLookup Lookup() {
    return [state = state_](const std::string& name) {
      std::unique_lock lock(state->mutex);
      ++state->asked[name];
      if (name.rfind("stuck", 0) == 0) {
        state->changed.wait(lock, [&] { return state->released; });
        return std::vector<asio::ip::address>{};
      }
      if (name == "client.example") {
        return std::vector<asio::ip::address>{asio::ip::make_address("10.0.0.5")};
      }
      return std::vector<asio::ip::address>{};
    };
  }
  void Release() {
    std::lock_guard lock(state_->mutex);
    state_->released = true;
    state_->changed.notify_all();
  }
  int Asked(const std::string& name) {
    std::lock_guard lock(state_->mutex);
    return state_->asked[name];
  }

 private:
  struct State {
    std::mutex mutex;
    std::condition_variable changed;
    bool released = false;
    std::map<std::string, int> asked;
  };
  std::shared_ptr<State> state_ = std::make_shared<State>();
};

// Starts Resolve without waiting for it; the answer lands in the returned slot.
std::shared_ptr<std::optional<std::vector<std::string>>> Spawn(asio::io_context& io,
                                                               NameResolver& resolver,
                                                               std::string name,
                                                               LookupFor purpose) {
  auto answer = std::make_shared<std::optional<std::vector<std::string>>>();
  asio::co_spawn(io, resolver.Resolve(std::move(name), purpose),
                 [answer](std::exception_ptr, std::vector<std::string> addresses) {
                   *answer = std::move(addresses);
                 });
  return answer;
}

class AsioNameResolverTest : public ::testing::Test {
 protected:
  ~AsioNameResolverTest() override {
    // Lets the blocked lookup threads finish before the resolver and the io_context go.
    dns_.Release();
  }
  void RunFor(milliseconds duration) {
    io_.restart();
    io_.run_for(duration);
  }

  asio::io_context io_;
  Dns dns_;
};

TEST_F(AsioNameResolverTest, AStuckNotifierNameDoesNotDelayAMonitoredHost) {
  AsioNameResolver resolver(io_.get_executor(), NameResolverOptions{}, dns_.Lookup());
  auto stuck = Spawn(io_, resolver, "stuck.invalid", LookupFor::kNotifierName);
  RunFor(milliseconds(10));
  const auto started = std::chrono::steady_clock::now();
  auto addresses = testutil::RunCoroutine(
      io_, resolver.Resolve("Client.Example", LookupFor::kMonitoredHost), milliseconds(2000));
  EXPECT_EQ(addresses, std::vector<std::string>{"10.0.0.5"});
  EXPECT_LT(std::chrono::steady_clock::now() - started, milliseconds(1000));
  EXPECT_FALSE(stuck->has_value());
  EXPECT_EQ(resolver.running(LookupFor::kNotifierName), 1u);
}

TEST_F(AsioNameResolverTest, AStuckMonitoredNameDoesNotDelayAnother) {
  AsioNameResolver resolver(io_.get_executor(), NameResolverOptions{}, dns_.Lookup());
  auto stuck = Spawn(io_, resolver, "stuck.example", LookupFor::kMonitoredHost);
  RunFor(milliseconds(10));
  auto addresses = testutil::RunCoroutine(
      io_, resolver.Resolve("client.example", LookupFor::kMonitoredHost), milliseconds(2000));
  EXPECT_EQ(addresses, std::vector<std::string>{"10.0.0.5"});
  EXPECT_FALSE(stuck->has_value());
}

TEST_F(AsioNameResolverTest, NotifierNamesPastTheBudgetAreNotLookedUp) {
  NameResolverOptions options;
  options.max_notifier_lookups = 2;
  AsioNameResolver resolver(io_.get_executor(), options, dns_.Lookup());
  auto first = Spawn(io_, resolver, "stuck-1", LookupFor::kNotifierName);
  auto second = Spawn(io_, resolver, "stuck-2", LookupFor::kNotifierName);
  auto third = Spawn(io_, resolver, "stuck-3", LookupFor::kNotifierName);
  RunFor(milliseconds(20));
  ASSERT_TRUE(third->has_value());
  EXPECT_TRUE((*third)->empty());
  EXPECT_EQ(dns_.Asked("stuck-3"), 0);
  EXPECT_FALSE(first->has_value());
  EXPECT_FALSE(second->has_value());
  // Monitored hosts have their own budget.
  EXPECT_EQ(
      testutil::RunCoroutine(io_, resolver.Resolve("client.example", LookupFor::kMonitoredHost)),
      std::vector<std::string>{"10.0.0.5"});
  // Once the lookups end, the budget is free again.
  dns_.Release();
  for (int i = 0; i < 100 && !(first->has_value() && second->has_value()); ++i) {
    RunFor(milliseconds(10));
  }
  EXPECT_EQ(resolver.running(LookupFor::kNotifierName), 0u);
}

TEST_F(AsioNameResolverTest, TheSameNameJoinsTheLookupInFlight) {
  NameResolverOptions options;
  options.deadline = milliseconds(5000);
  AsioNameResolver resolver(io_.get_executor(), options, dns_.Lookup());
  auto one = Spawn(io_, resolver, "stuck.example", LookupFor::kMonitoredHost);
  auto two = Spawn(io_, resolver, "STUCK.example", LookupFor::kMonitoredHost);
  RunFor(milliseconds(20));
  EXPECT_EQ(dns_.Asked("stuck.example"), 1);
  EXPECT_EQ(resolver.running(LookupFor::kMonitoredHost), 1u);
  dns_.Release();
  for (int i = 0; i < 100 && !(one->has_value() && two->has_value()); ++i) RunFor(milliseconds(10));
  EXPECT_TRUE(one->has_value());
  EXPECT_TRUE(two->has_value());
}

TEST_F(AsioNameResolverTest, ALookupPastTheDeadlineAnswersNothing) {
  NameResolverOptions options;
  options.deadline = milliseconds(50);
  AsioNameResolver resolver(io_.get_executor(), options, dns_.Lookup());
  EXPECT_TRUE(
      testutil::RunCoroutine(io_, resolver.Resolve("stuck.example", LookupFor::kMonitoredHost))
          .empty());
}

TEST_F(AsioNameResolverTest, AnAddressLiteralIsItsOwnAnswer) {
  AsioNameResolver resolver(io_.get_executor(), NameResolverOptions{}, dns_.Lookup());
  EXPECT_EQ(
      testutil::RunCoroutine(io_, resolver.Resolve("::ffff:10.0.0.7", LookupFor::kNotifierName)),
      std::vector<std::string>{"10.0.0.7"});
  EXPECT_EQ(dns_.Asked("::ffff:10.0.0.7"), 0);
}

TEST(SystemLookup, FindsLocalhost) {
  auto addresses = SystemLookup("localhost");
  ASSERT_FALSE(addresses.empty());
  EXPECT_TRUE(addresses.front().is_loopback());
}

}  // namespace
}  // namespace nlockd::nsm
