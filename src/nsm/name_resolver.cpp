// SPDX-License-Identifier: Apache-2.0
#include "nsm/name_resolver.hpp"

#include <algorithm>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <system_error>
#include <thread>

#include <asio/ip/udp.hpp>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>
#include <netdb.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include "nsm/registry.hpp"
#include "rpc/address.hpp"
#include "rpc/use_tuple.hpp"

namespace nlockd::nsm {

asio::awaitable<std::vector<asio::ip::address>> LookupWithin(asio::any_io_executor executor,
                                                             std::string name,
                                                             std::chrono::milliseconds timeout) {
  asio::error_code ec;
  auto literal = asio::ip::make_address(name, ec);
  if (!ec) co_return std::vector<asio::ip::address>{literal};
  // The lookup's handler may outlive this coroutine (getaddrinfo cannot be interrupted): it
  // shares the state, and whichever of lookup and timer ends first wakes the coroutine.
  struct State {
    explicit State(const asio::any_io_executor& ex) : done(ex) {}
    asio::steady_timer done;
    std::vector<asio::ip::address> addresses;
    bool finished = false;
  };
  auto state = std::make_shared<State>(executor);
  auto resolver = std::make_shared<asio::ip::udp::resolver>(executor);
  state->done.expires_after(timeout);
  resolver->async_resolve(name, "",
                          [state, resolver](const asio::error_code& resolve_ec,
                                            const asio::ip::udp::resolver::results_type& results) {
                            if (!resolve_ec) {
                              for (const auto& entry : results) {
                                state->addresses.push_back(entry.endpoint().address());
                              }
                            }
                            state->finished = true;
                            state->done.cancel();
                          });
  co_await state->done.async_wait(rpc::kUseTuple);
  if (!state->finished) {
    resolver->cancel();
    co_return std::vector<asio::ip::address>{};
  }
  co_return std::move(state->addresses);
}

std::vector<asio::ip::address> SystemLookup(const std::string& name) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;  // one entry per address
  addrinfo* found = nullptr;
  std::vector<asio::ip::address> out;
  if (::getaddrinfo(name.c_str(), nullptr, &hints, &found) != 0) return out;
  for (const addrinfo* entry = found; entry != nullptr; entry = entry->ai_next) {
    if (entry->ai_family == AF_INET) {
      const auto* in = reinterpret_cast<const sockaddr_in*>(entry->ai_addr);
      asio::ip::address_v4::bytes_type bytes;
      std::memcpy(bytes.data(), &in->sin_addr, bytes.size());
      out.emplace_back(asio::ip::address_v4(bytes));
    } else if (entry->ai_family == AF_INET6) {
      const auto* in6 = reinterpret_cast<const sockaddr_in6*>(entry->ai_addr);
      asio::ip::address_v6::bytes_type bytes;
      std::memcpy(bytes.data(), &in6->sin6_addr, bytes.size());
      out.emplace_back(asio::ip::address_v6(bytes, in6->sin6_scope_id));
    }
  }
  ::freeaddrinfo(found);
  return out;
}

// The lookups of one purpose: which names are in flight (each on a thread of its own), who
// waits for each, and the names queued for a thread. Bookkeeping runs on the executor. A lookup
// thread holds only the Relay: it posts its answer to the lane unless the resolver is gone
// (the executor may not outlive it), and never owns the lane, whose timers must be destroyed
// while their io_context lives.
class AsioNameResolver::Lane : public std::enable_shared_from_this<Lane> {
 public:
  struct Relay {
    explicit Relay(asio::any_io_executor ex) : executor(std::move(ex)) {}
    std::mutex mutex;
    bool closed = false;             // guarded by mutex
    asio::any_io_executor executor;  // posted to while not closed
    std::weak_ptr<Lane> lane;        // guarded by mutex
  };

  struct Waiter {
    explicit Waiter(const asio::any_io_executor& executor) : done(executor) {}
    asio::steady_timer done;
    std::vector<std::string> addresses;
    bool finished = false;
  };

  Lane(asio::any_io_executor executor, size_t max_running, bool queue_when_full,
       BlockingLookup lookup)
      : executor_(std::move(executor)),
        max_running_(std::max<size_t>(max_running, 1)),
        queue_when_full_(queue_when_full),
        lookup_(std::move(lookup)),
        relay_(std::make_shared<Relay>(executor_)) {}

  // The waiter for `name`'s answer; null when every thread is taken and this lane does not
  // queue.
  std::shared_ptr<Waiter> Join(const std::string& name) {
    auto waiter = std::make_shared<Waiter>(executor_);
    if (auto flight = flights_.find(name); flight != flights_.end()) {
      flight->second.push_back(waiter);
      return waiter;
    }
    if (running_ >= max_running_ && !queue_when_full_) return nullptr;
    flights_[name].push_back(waiter);
    if (running_ < max_running_) {
      Start(name);
    } else {
      queued_.push_back(name);
    }
    return waiter;
  }

  // The caller stopped waiting (its deadline passed).
  void Leave(const std::string& name, const std::shared_ptr<Waiter>& waiter) {
    auto flight = flights_.find(name);
    if (flight == flights_.end()) return;
    std::erase(flight->second, waiter);
  }

  void Close() {
    std::lock_guard lock(relay_->mutex);
    relay_->closed = true;
  }

  size_t running() const { return running_; }

 private:
  void Start(const std::string& name) {
    ++running_;
    {
      std::lock_guard lock(relay_->mutex);
      relay_->lane = weak_from_this();
    }
    try {
      std::thread([relay = relay_, name, lookup = lookup_] {
        std::vector<asio::ip::address> addresses = lookup(name);
        std::lock_guard lock(relay->mutex);
        // Checked first: once closed, a reference taken here could be the lane's last.
        if (relay->closed) return;
        std::shared_ptr<Lane> lane = relay->lane.lock();
        if (!lane) return;
        // The lane's reference moves into the handler: this thread keeps none.
        asio::post(relay->executor, [lane = std::move(lane), name, found = std::move(addresses)] {
          lane->Complete(name, found);
        });
      }).detach();
    } catch (const std::system_error& e) {
      spdlog::warn("nsm cannot start a name lookup: {}", e.what());
      asio::post(executor_, [self = shared_from_this(), name] { self->Complete(name, {}); });
    }
  }

  void Complete(const std::string& name, const std::vector<asio::ip::address>& addresses) {
    --running_;
    std::vector<std::string> normalised;
    for (const auto& address : addresses) {
      std::string text = rpc::AddressToString(rpc::NormalizeAddress(address));
      if (std::find(normalised.begin(), normalised.end(), text) == normalised.end()) {
        normalised.push_back(std::move(text));
      }
    }
    if (auto flight = flights_.extract(name)) {
      for (const auto& waiter : flight.mapped()) {
        waiter->addresses = normalised;
        waiter->finished = true;
        waiter->done.cancel();
      }
    }
    while (running_ < max_running_ && !queued_.empty()) {
      std::string next = std::move(queued_.front());
      queued_.pop_front();
      auto flight = flights_.find(next);
      if (flight == flights_.end()) continue;
      if (flight->second.empty()) {  // everyone who asked stopped waiting
        flights_.erase(flight);
        continue;
      }
      Start(next);
    }
  }

  asio::any_io_executor executor_;
  const size_t max_running_;
  const bool queue_when_full_;
  BlockingLookup lookup_;
  std::map<std::string, std::vector<std::shared_ptr<Waiter>>> flights_;
  std::deque<std::string> queued_;
  size_t running_ = 0;
  std::shared_ptr<Relay> relay_;
};

AsioNameResolver::AsioNameResolver(asio::any_io_executor executor, NameResolverOptions options,
                                   BlockingLookup lookup)
    : executor_(executor),
      deadline_(options.deadline),
      monitored_(std::make_shared<Lane>(executor, options.max_monitored_lookups,
                                        /*queue_when_full=*/true, lookup)),
      notifier_(std::make_shared<Lane>(executor, options.max_notifier_lookups,
                                       /*queue_when_full=*/false, std::move(lookup))) {}

AsioNameResolver::~AsioNameResolver() {
  monitored_->Close();
  notifier_->Close();
}

size_t AsioNameResolver::running(LookupFor purpose) const {
  return purpose == LookupFor::kMonitoredHost ? monitored_->running() : notifier_->running();
}

asio::awaitable<std::vector<std::string>> AsioNameResolver::Resolve(std::string name,
                                                                    LookupFor purpose) {
  asio::error_code ec;
  const auto literal = asio::ip::make_address(name, ec);
  if (!ec) co_return std::vector<std::string>{rpc::AddressToString(rpc::NormalizeAddress(literal))};
  // Host names compare case-insensitively: "Client" joins the lookup of "client".
  const std::string key = FoldName(name);
  // Held across the wait: the lane outlives this coroutine's use of it.
  std::shared_ptr<Lane> lane = purpose == LookupFor::kMonitoredHost ? monitored_ : notifier_;
  std::shared_ptr<Lane::Waiter> waiter = lane->Join(key);
  if (!waiter) co_return std::vector<std::string>{};
  waiter->done.expires_after(deadline_);
  co_await waiter->done.async_wait(rpc::kUseTuple);
  if (!waiter->finished) {
    lane->Leave(key, waiter);
    co_return std::vector<std::string>{};
  }
  co_return std::move(waiter->addresses);
}

}  // namespace nlockd::nsm
