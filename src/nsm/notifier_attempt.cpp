// SPDX-License-Identifier: Apache-2.0
// Notifier::Attempt: one SM_NOTIFY to one host (resolve, the peer's rpcbind, the call).
#include <algorithm>

#include <asio/ip/address.hpp>
#include <asio/ip/udp.hpp>

#include "nsm/name_resolver.hpp"
#include "nsm/notifier.hpp"
#include "nsm/wire.hpp"
#include "rpc/client.hpp"
#include "rpc/rpcbind.hpp"
#include "xdr/decoder.hpp"
#include "xdr/encoder.hpp"

namespace nlockd::nsm {

namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

milliseconds Remaining(steady_clock::time_point deadline) {
  return std::max(milliseconds(0),
                  std::chrono::duration_cast<milliseconds>(deadline - steady_clock::now()));
}

// Resolves `name` with asio's resolver, giving up after `timeout`. getaddrinfo cannot be
// interrupted, so on timeout the lookup is cancelled and left to finish on the resolver's
// thread; its late result is dropped. The handler (a plain lambda, not a coroutine) keeps the
// resolver and the shared state alive until then.
asio::awaitable<std::optional<asio::ip::address>> ResolveWithin(asio::any_io_executor executor,
                                                                std::string name,
                                                                milliseconds timeout) {
  auto addresses = co_await LookupWithin(std::move(executor), std::move(name), timeout);
  if (addresses.empty()) co_return std::nullopt;
  co_return addresses.front();
}

}  // namespace

// One try: resolve (unless an IP literal), ask the peer's rpcbind for statd's port (unless
// configured or cached), send SM_NOTIFY; all within attempt_deadline.
asio::awaitable<Notifier::AttemptResult> Notifier::Attempt(NotifyAttempt attempt) {
  using Failure = AttemptResult::Failure;
  AttemptResult result;
  const steady_clock::time_point deadline = steady_clock::now() + options_.attempt_deadline;

  const std::string& host = attempt.address.empty() ? attempt.mon_name : attempt.address;
  std::optional<asio::ip::address> address =
      co_await ResolveWithin(executor_, host, Remaining(deadline));
  if (!address) {
    result.failure = Failure::kResolve;
    result.detail = "cannot resolve " + host + " in time";
    co_return result;
  }

  uint16_t port = 0;
  bool tcp = false;
  if (options_.statd_port != 0) {
    port = options_.statd_port;
    tcp = options_.statd_transport == rpc::Transport::kTcp;
  } else if (attempt.port) {
    port = attempt.port->port;
    tcp = attempt.port->tcp;
  } else {
    // UDP first, as sm-notify sends over UDP; TCP only when statd is registered for TCP only.
    std::optional<uint16_t> found = co_await GetPort(*address, rpc::kIpProtoUdp, deadline);
    if (found && *found == 0 && Remaining(deadline) > milliseconds(0)) {
      found = co_await GetPort(*address, rpc::kIpProtoTcp, deadline);
      tcp = true;
    }
    if (!found || *found == 0) {
      result.failure = Failure::kRpcbind;
      result.detail = found ? "statd not registered with the peer's rpcbind"
                            : "the peer's rpcbind did not answer";
      co_return result;
    }
    port = *found;
    result.learned = PeerPort{port, tcp};
  }

  const milliseconds left = Remaining(deadline);
  if (left <= milliseconds(0)) {
    result.failure = Failure::kCall;
    result.detail = "attempt deadline spent before the call";
    co_return result;
  }
  std::vector<uint8_t> args;
  xdr::Encoder enc(args);
  stat_chge change{attempt.our_name, attempt.state};
  Encode(enc, change);
  ++stats_.sent;
  rpc::CallResult reply;
  if (tcp) {
    rpc::CallTarget target;
    target.host = address->to_string();
    target.port = port;
    target.transport = rpc::Transport::kTcp;
    rpc::CallOptions call_options;
    call_options.deadline = left;
    if (options_.source_port != 0)
      call_options.source = rpc::SourcePort::Fixed(options_.source_port);
    reply =
        co_await client_.Call(target, SM_PROG, SM_VERS, SM_NOTIFY, std::move(args), call_options);
  } else {
    asio::ip::udp::endpoint peer(*address, port);
    reply = co_await channel_.Call(peer, SM_PROG, SM_VERS, SM_NOTIFY, std::move(args), left,
                                   options_.udp_retry);
  }
  if (reply.status != rpc::CallStatus::kOk) {
    result.failure = Failure::kCall;
    result.detail = std::string(rpc::ToString(reply.status)) + ": " + reply.detail;
  }
  co_return result;
}

// PMAP GETPORT(100024, 1, protocol) to the peer's portmapper (RFC 1833 section 3), over UDP.
// The port (0: not registered), or nullopt when the portmapper did not answer in time.
asio::awaitable<std::optional<uint16_t>> Notifier::GetPort(asio::ip::address address,
                                                           uint32_t protocol,
                                                           steady_clock::time_point deadline) {
  const milliseconds left = Remaining(deadline);
  if (left <= milliseconds(0)) co_return std::nullopt;
  std::vector<uint8_t> args;
  xdr::Encoder enc(args);
  enc.U32(SM_PROG);
  enc.U32(SM_VERS);
  enc.U32(protocol);
  enc.U32(0);
  asio::ip::udp::endpoint rpcbind(address, options_.rpcbind_port);
  rpc::CallResult reply =
      co_await channel_.Call(rpcbind, rpc::kPmapProgram, rpc::kPmapVersion, rpc::kPmapProcGetPort,
                             std::move(args), left, options_.udp_retry);
  if (reply.status != rpc::CallStatus::kOk) co_return std::nullopt;
  xdr::Decoder dec(reply.body);
  uint32_t port = 0;
  if (!dec.U32(port, "port") || port > UINT16_MAX) co_return std::nullopt;
  co_return static_cast<uint16_t>(port);
}

}  // namespace nlockd::nsm
