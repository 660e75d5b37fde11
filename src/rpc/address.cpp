// SPDX-License-Identifier: Apache-2.0
#include "rpc/address.hpp"

namespace nlockd::rpc {

asio::ip::address NormalizeAddress(const asio::ip::address& address) {
  if (address.is_v6() && address.to_v6().is_v4_mapped()) {
    return asio::ip::make_address_v4(asio::ip::v4_mapped, address.to_v6());
  }
  return address;
}

std::string AddressToString(const asio::ip::address& address) {
  return NormalizeAddress(address).to_string();
}

bool IsLoopback(const asio::ip::address& address) {
  return NormalizeAddress(address).is_loopback();
}

}  // namespace nlockd::rpc
