// SPDX-License-Identifier: Apache-2.0
#include "nsm/name_resolver.hpp"

#include <memory>
#include <optional>

#include <asio/ip/udp.hpp>
#include <asio/steady_timer.hpp>

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

asio::awaitable<std::vector<std::string>> AsioNameResolver::Resolve(std::string name) {
  std::vector<std::string> out;
  for (const auto& address : co_await LookupWithin(executor_, std::move(name), deadline_)) {
    out.push_back(rpc::AddressToString(rpc::NormalizeAddress(address)));
  }
  co_return out;
}

}  // namespace nlockd::nsm
