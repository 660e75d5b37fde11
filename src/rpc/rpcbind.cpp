#include "rpc/rpcbind.hpp"

#include <spdlog/spdlog.h>

#include "xdr/decoder.hpp"
#include "xdr/encoder.hpp"

namespace nlockd::rpc {

asio::awaitable<std::optional<std::vector<uint8_t>>> PmapClient::Call(uint32_t procedure,
                                                                      PmapMapping mapping) {
  std::vector<uint8_t> args;
  xdr::Encoder enc(args);
  enc.U32(mapping.program);
  enc.U32(mapping.version);
  enc.U32(mapping.protocol);
  enc.U32(mapping.port);
  CallOptions options;
  options.deadline = deadline_;
  // A named target: g++ 12 copies a prvalue coroutine argument bitwise, which breaks a
  // std::string in its small-string buffer. Pass class-type arguments as lvalues or xvalues.
  CallTarget target{host_, port_, Transport::kUdp};
  CallResult result = co_await client_.Call(target, kPmapProgram, kPmapVersion, procedure,
                                            std::move(args), options);
  if (result.status != CallStatus::kOk) {
    spdlog::debug("pmap call {} to {}:{} failed: {} {}", procedure, host_, port_,
                  ToString(result.status), result.detail);
    co_return std::nullopt;
  }
  co_return std::move(result.body);
}

asio::awaitable<std::optional<uint16_t>> PmapClient::GetPort(uint32_t program, uint32_t version,
                                                             uint32_t protocol) {
  auto body = co_await Call(kPmapProcGetPort, PmapMapping{program, version, protocol, 0});
  if (!body) co_return std::nullopt;
  xdr::Decoder dec(*body);
  uint32_t port = 0;
  if (!dec.U32(port, "port") || port > UINT16_MAX) co_return std::nullopt;
  co_return static_cast<uint16_t>(port);
}

asio::awaitable<std::optional<bool>> PmapClient::Set(PmapMapping mapping) {
  auto body = co_await Call(kPmapProcSet, mapping);
  if (!body) co_return std::nullopt;
  xdr::Decoder dec(*body);
  bool ok = false;
  if (!dec.Bool(ok, "result")) co_return std::nullopt;
  co_return ok;
}

asio::awaitable<std::optional<bool>> PmapClient::Unset(uint32_t program, uint32_t version) {
  auto body = co_await Call(kPmapProcUnset, PmapMapping{program, version, 0, 0});
  if (!body) co_return std::nullopt;
  xdr::Decoder dec(*body);
  bool ok = false;
  if (!dec.Bool(ok, "result")) co_return std::nullopt;
  co_return ok;
}

asio::awaitable<bool> RpcbindRegistration::Register(
    std::vector<std::pair<uint32_t, uint32_t>> program_versions, uint16_t port) {
  bool all = true;
  for (const auto& [program, version] : program_versions) {
    // A stale mapping from an earlier run would make SET fail: clear it first.
    auto unset = co_await pmap_.Unset(program, version);
    if (!unset) {
      spdlog::info("no portmapper answers on 127.0.0.1:111; not registering with rpcbind");
      co_return false;
    }
    for (uint32_t protocol : {kIpProtoTcp, kIpProtoUdp}) {
      auto set = co_await pmap_.Set(PmapMapping{program, version, protocol, port});
      if (set.value_or(false)) {
        registered_.emplace_back(program, version);
      } else {
        all = false;
        spdlog::warn("rpcbind refused program={} version={} protocol={} port={}", program,
                     version, protocol == kIpProtoTcp ? "tcp" : "udp", port);
      }
    }
  }
  if (all) spdlog::info("registered {} programs with rpcbind", program_versions.size());
  co_return all;
}

asio::awaitable<void> RpcbindRegistration::Unregister() {
  auto pairs = std::move(registered_);
  registered_.clear();
  std::pair<uint32_t, uint32_t> last{0, 0};
  for (const auto& pair : pairs) {
    if (pair == last) continue;  // Registered once per protocol, unset once for both.
    last = pair;
    co_await pmap_.Unset(pair.first, pair.second);
  }
}

}  // namespace nlockd::rpc
