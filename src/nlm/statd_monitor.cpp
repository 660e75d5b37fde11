// SPDX-License-Identifier: Apache-2.0
#include "nlm/statd_monitor.hpp"

#include <algorithm>
#include <array>

#include <spdlog/spdlog.h>

#include "rpc/rpcbind.hpp"
#include "xdr/decoder.hpp"
#include "xdr/encoder.hpp"

namespace nlockd::nlm {

namespace {

// NSM (the X/Open XNFS specification, chapter 11): program, version, SM_MON; NLM's status
// callback is its procedure 16 (NLM_SM_NOTIFY), of version 4 here.
constexpr uint32_t kSmProg = 100024;
constexpr uint32_t kSmVers = 1;
constexpr uint32_t kSmMon = 2;
constexpr int32_t kNlmProg = 100021;
constexpr int32_t kNlmVers = 4;
constexpr int32_t kNlmSmNotify = 16;
constexpr int32_t kStatSucc = 0;

}  // namespace

std::vector<uint8_t> EncodeSmMon(const std::string& mon_name, const std::string& my_name,
                                 const asio::ip::address& address) {
  std::vector<uint8_t> args;
  xdr::Encoder enc(args);
  enc.String(mon_name);
  enc.String(my_name);
  enc.I32(kNlmProg);
  enc.I32(kNlmVers);
  enc.I32(kNlmSmNotify);
  std::array<uint8_t, 16> priv{};
  if (address.is_v4()) {
    auto bytes = address.to_v4().to_bytes();
    std::copy(bytes.begin(), bytes.end(), priv.begin());
  } else if (address.is_v6()) {
    priv = address.to_v6().to_bytes();
  }
  enc.FixedOpaque(priv);
  return args;
}

asio::awaitable<bool> StatdMonitor::Monitor(MonitorRequest request) {
  auto start = std::chrono::steady_clock::now();
  rpc::PmapClient pmap(client_, options_.rpcbind_host, options_.rpcbind_port,
                       options_.deadline / 2);
  std::optional<uint16_t> port = co_await pmap.GetPort(kSmProg, kSmVers, rpc::kIpProtoUdp);
  if (!port || *port == 0) {
    ++failures_;
    spdlog::warn("nlm cannot monitor host={}: no status monitor {} on the rpcbind at {}:{}",
                 request.host, port ? "registered" : "answers", options_.rpcbind_host,
                 options_.rpcbind_port);
    co_return false;
  }
  rpc::CallOptions call;
  call.deadline =
      std::max(options_.deadline - std::chrono::duration_cast<std::chrono::milliseconds>(
                                       std::chrono::steady_clock::now() - start),
               std::chrono::milliseconds(1));
  // As a kernel lockd or Ganesha running as root calls: some status monitors trust only that.
  call.source = rpc::SourcePort::Reserved();
  // Named first: g++ 12 double-destroys temporaries in a co_await operand
  // (docs/decisions/0001-toolchain-pitfalls.md).
  rpc::CallTarget statd{"127.0.0.1", *port, rpc::Transport::kUdp};
  std::vector<uint8_t> args = EncodeSmMon(request.host, options_.my_name, request.address);
  rpc::CallResult result =
      co_await client_.Call(std::move(statd), kSmProg, kSmVers, kSmMon, std::move(args), call);
  int32_t stat = -1;
  int32_t state = 0;
  if (result.status == rpc::CallStatus::kOk) {
    xdr::Decoder dec(result.body);
    if (!dec.Enum(stat, "res_stat") || !dec.I32(state, "state")) stat = -1;
  }
  if (stat != kStatSucc) {
    ++failures_;
    spdlog::warn("nlm cannot monitor host={}: SM_MON to the status monitor at port {} {}",
                 request.host, *port,
                 result.status == rpc::CallStatus::kOk
                     ? std::string("answered stat_fail")
                     : std::string(rpc::ToString(result.status)) + " " + result.detail);
    co_return false;
  }
  spdlog::debug("nlm host={} monitored by the system's status monitor (state {})", request.host,
                state);
  co_return co_await local_.Monitor(std::move(request));
}

}  // namespace nlockd::nlm
