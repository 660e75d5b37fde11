// SPDX-License-Identifier: Apache-2.0
#pragma once

// Shared by the NLM integration tests that talk to nlockd on 127.0.0.1 from this process:
// starting it, making rpcgen clients, and naming lock owners.

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <arpa/inet.h>
#include <gtest/gtest.h>

#include "integration/nlm_rpcgen.hpp"
#include "integration/nlockd_process.hpp"

namespace nlockd::integration {

// nlockd on 127.0.0.1 with no rpcbind registration; no grace unless asked for.
inline std::unique_ptr<NlockdProcess> StartLocalNlockd(int grace_seconds = 0) {
  return std::make_unique<NlockdProcess>(
      NLOCKD_BINARY, std::vector<std::string>{"--listen", "127.0.0.1:0", "--rpcbind-register=false",
                                              "--grace", std::to_string(grace_seconds)});
}

inline sockaddr_in LoopbackAddress(uint16_t port) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return address;
}

// A lock owner of one client host: (caller_name, svid, oh) on one file.
inline NlmLock Owner(const std::string& fh, int32_t svid, uint64_t offset, uint64_t length,
                     const std::string& caller = "client") {
  return NlmLock{caller, fh, std::to_string(svid) + "@" + caller, svid, offset, length};
}

inline NlmLock At(NlmLock lock, uint64_t offset, uint64_t length) {
  lock.offset = offset;
  lock.length = length;
  return lock;
}

// A reply as a string to compare with a literal: its status ("granted"), for a denied TEST
// also the holder; or the RPC error when no reply came.
template <typename Reply>
std::string Outcome(const std::optional<Reply>& reply, const NlmRpcgenClient& client) {
  if (!reply) return "rpc error: " + client.error();
  return std::string(ToString(reply->stat));
}

inline std::string Outcome(const std::optional<NlmTestReply>& reply,
                           const NlmRpcgenClient& client) {
  if (!reply) return "rpc error: " + client.error();
  std::string out(ToString(reply->stat));
  if (reply->holder) {
    const NlmHolder& h = *reply->holder;
    out += " by svid=" + std::to_string(h.svid) + " oh=" + h.oh + " [" + std::to_string(h.offset) +
           "+" + std::to_string(h.length) + ")" + (h.exclusive ? " exclusive" : " shared");
  }
  return out;
}

}  // namespace nlockd::integration
