// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <asio/experimental/as_tuple.hpp>
#include <asio/use_awaitable.hpp>

namespace nlockd::rpc {

// Completion token for awaiting an operation as (error_code, result...) instead of throwing:
// socket errors are values in connection loops, where a peer hanging up is routine. Asio 1.22
// keeps as_tuple in experimental/.
inline constexpr auto kUseTuple = asio::experimental::as_tuple(asio::use_awaitable);

}  // namespace nlockd::rpc
