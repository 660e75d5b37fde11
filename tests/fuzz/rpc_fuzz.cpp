// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: bytes in -> record marking -> RPC message decode -> dispatch.
// The first input byte picks the path: even = a TCP byte stream, odd = one UDP datagram.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>

#include "rpc/dispatcher.hpp"
#include "rpc/record_marking.hpp"

namespace {

using nlockd::rpc::CallContext;
using nlockd::rpc::Dispatcher;
using nlockd::rpc::HandlerStatus;

asio::awaitable<HandlerStatus> Null(const CallContext&, nlockd::xdr::Decoder&,
                                    nlockd::xdr::Encoder&) {
  co_return HandlerStatus::kSuccess;
}

// Decodes a mix of XDR items the way the NLM and NSM argument decoders do.
asio::awaitable<HandlerStatus> Decode(const CallContext&, nlockd::xdr::Decoder& args,
                                      nlockd::xdr::Encoder& out) {
  std::string cookie, name, fh;
  bool flag = false;
  uint64_t offset = 0;
  std::array<uint8_t, 16> priv{};
  std::vector<uint32_t> list;
  auto item = [](nlockd::xdr::Decoder& d, uint32_t& v) { return d.U32(v, "item"); };
  if (!args.Opaque(cookie, 1024, "cookie") || !args.Bool(flag, "flag") ||
      !args.String(name, 1024, "name") || !args.Opaque(fh, 1024, "fh") ||
      !args.U64(offset, "offset") || !args.FixedOpaque(priv, "priv") ||
      !args.Array(list, 16, 4, item, "list")) {
    co_return HandlerStatus::kGarbageArgs;
  }
  out.Opaque(cookie);
  out.String(name);
  co_return HandlerStatus::kSuccess;
}

const Dispatcher& TheDispatcher() {
  static Dispatcher* dispatcher = [] {
    auto* d = new Dispatcher();
    for (uint32_t version : {1u, 3u, 4u}) {
      d->Register(100021, version, 0, "NULL", Null);
      d->Register(100021, version, 2, "DECODE", Decode);
    }
    d->Register(100024, 1, 0, "SM_NULL", Null);
    d->Register(100024, 1, 2, "DECODE", Decode);
    return d;
  }();
  return *dispatcher;
}

asio::awaitable<void> DispatchAll(std::vector<std::vector<uint8_t>> records) {
  for (const auto& record : records) {
    std::vector<uint8_t> reply;
    co_await TheDispatcher().Dispatch(CallContext{}, record, reply);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::vector<std::vector<uint8_t>> records;
  std::span<const uint8_t> input(data + 1, size - 1);
  if (data[0] % 2 == 0) {
    nlockd::rpc::RecordAssembler assembler(64 * 1024);
    (void)assembler.Feed(input, records);
  } else {
    records.emplace_back(input.begin(), input.end());
  }
  asio::io_context io;
  asio::co_spawn(io, DispatchAll(std::move(records)), asio::detached);
  io.run();
  return 0;
}
