#include "nsm/name_resolver.hpp"

#include <asio/experimental/awaitable_operators.hpp>
#include <asio/ip/udp.hpp>
#include <asio/steady_timer.hpp>

#include "rpc/address.hpp"
#include "rpc/use_tuple.hpp"

namespace nlockd::nsm {

using namespace asio::experimental::awaitable_operators;

asio::awaitable<std::vector<std::string>> AsioNameResolver::Lookup(std::string name) {
  asio::ip::udp::resolver resolver(executor_);
  auto [ec, results] = co_await resolver.async_resolve(name, "", rpc::kUseTuple);
  std::vector<std::string> out;
  if (ec) co_return out;
  for (const auto& entry : results) {
    out.push_back(rpc::AddressToString(rpc::NormalizeAddress(entry.endpoint().address())));
  }
  co_return out;
}

asio::awaitable<std::vector<std::string>> AsioNameResolver::Resolve(std::string name) {
  asio::steady_timer deadline(executor_, deadline_);
  // Named first: g++ 12 double-destroys temporaries in a co_await operand (see rpc/client.cpp).
  auto lookup = Lookup(std::move(name));
  auto timeout = deadline.async_wait(rpc::kUseTuple);
  auto outcome = co_await (std::move(lookup) || std::move(timeout));
  if (outcome.index() == 1) co_return std::vector<std::string>{};
  co_return std::get<0>(std::move(outcome));
}

}  // namespace nlockd::nsm
