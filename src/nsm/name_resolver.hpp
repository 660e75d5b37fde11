// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <asio/any_io_executor.hpp>
#include <asio/awaitable.hpp>
#include <asio/ip/address.hpp>

namespace nlockd::nsm {

// getaddrinfo on Asio's resolver thread, never on the executor, abandoned after `timeout`, so
// that slow or broken DNS never stalls the monitor: the addresses of `name` (an IP literal is
// its own), empty when it does not resolve in time. All lookups of an io_context share that one
// thread: for the notifier's own outbound lookups only.
asio::awaitable<std::vector<asio::ip::address>> LookupWithin(asio::any_io_executor executor,
                                                             std::string name,
                                                             std::chrono::milliseconds timeout);

// Whom a lookup is for. An SM_NOTIFY may name anything, so the names of notifications that
// matched no monitored host (kNotifierName) are looked up apart from the names of monitored
// hosts (kMonitoredHost): made-up names on a DNS server that never answers must not delay, or
// decide, the check of a real host's reboot notification.
enum class LookupFor { kMonitoredHost, kNotifierName };

// Looks up the addresses of a monitored host's name, so that an SM_NOTIFY from a host
// registered by name (not by address) can be checked against where it came from. DNS lies
// outside the process: tests substitute a fake.
class NameResolver {
 public:
  virtual ~NameResolver() = default;
  // The normalised IP literals `name` resolves to; empty when it does not (in time), or when
  // the lookups for `purpose` are all taken.
  virtual asio::awaitable<std::vector<std::string>> Resolve(std::string name,
                                                            LookupFor purpose) = 0;
};

struct NameResolverOptions {
  // How long a caller waits for an answer.
  std::chrono::milliseconds deadline{5000};
  // Monitored hosts' names looked up at once, each on a thread of its own (the same name asked
  // again joins the lookup in flight). Past it, lookups queue: spoofed SM_NOTIFYs naming many
  // monitored hosts whose DNS hangs hold at most this many threads.
  size_t max_monitored_lookups = 32;
  // Names of unmatched SM_NOTIFYs looked up at once. Past it such a name is not looked up (its
  // notification is ignored): a flood of made-up names holds at most this many threads, which
  // a lookup that hangs keeps until getaddrinfo gives up, whatever `deadline` says.
  size_t max_notifier_lookups = 8;
};

// A blocking lookup: the addresses of `name`, empty when it does not resolve.
using BlockingLookup = std::function<std::vector<asio::ip::address>(const std::string& name)>;

// getaddrinfo (/etc/hosts, DNS, as nsswitch.conf says).
std::vector<asio::ip::address> SystemLookup(const std::string& name);

// NameResolver over a BlockingLookup run on threads of its own, one per name in flight, never
// on the executor and never on Asio's single resolver thread; answers on `executor`. The two
// kinds of lookup have separate thread budgets. getaddrinfo cannot be interrupted: a thread
// whose lookup hangs is detached and finishes on its own; its answer is dropped if the
// resolver is gone. Resolve runs on `executor` only.
class AsioNameResolver final : public NameResolver {
 public:
  AsioNameResolver(asio::any_io_executor executor, NameResolverOptions options = {},
                   BlockingLookup lookup = SystemLookup);
  ~AsioNameResolver() override;
  AsioNameResolver(const AsioNameResolver&) = delete;
  AsioNameResolver& operator=(const AsioNameResolver&) = delete;

  asio::awaitable<std::vector<std::string>> Resolve(std::string name, LookupFor purpose) override;

  // Threads looking up a name now, per purpose (tests, diagnostics).
  size_t running(LookupFor purpose) const;

 private:
  class Lane;
  asio::any_io_executor executor_;
  std::chrono::milliseconds deadline_;
  std::shared_ptr<Lane> monitored_;
  std::shared_ptr<Lane> notifier_;
};

}  // namespace nlockd::nsm
