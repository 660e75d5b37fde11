// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include <asio/any_io_executor.hpp>
#include <asio/awaitable.hpp>
#include <asio/ip/address.hpp>

namespace nlockd::nsm {

// getaddrinfo on Asio's resolver thread, never on the executor, abandoned after `timeout`, so
// that slow or broken DNS never stalls the monitor: the addresses of `name` (an IP literal is
// its own), empty when it does not resolve in time.
asio::awaitable<std::vector<asio::ip::address>> LookupWithin(asio::any_io_executor executor,
                                                             std::string name,
                                                             std::chrono::milliseconds timeout);

// Looks up the addresses of a monitored host's name, so that an SM_NOTIFY from a host
// registered by name (not by address) can be checked against where it came from. DNS lies
// outside the process: tests substitute a fake.
class NameResolver {
 public:
  virtual ~NameResolver() = default;
  // The normalised IP literals `name` resolves to; empty when it does not (in time).
  virtual asio::awaitable<std::vector<std::string>> Resolve(std::string name) = 0;
};

// LookupWithin the configured deadline.
class AsioNameResolver final : public NameResolver {
 public:
  AsioNameResolver(asio::any_io_executor executor, std::chrono::milliseconds deadline)
      : executor_(std::move(executor)), deadline_(deadline) {}

  asio::awaitable<std::vector<std::string>> Resolve(std::string name) override;

 private:
  asio::any_io_executor executor_;
  std::chrono::milliseconds deadline_;
};

}  // namespace nlockd::nsm
