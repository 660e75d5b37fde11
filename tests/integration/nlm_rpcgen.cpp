// SPDX-License-Identifier: Apache-2.0
// The version-independent half of nlm_rpcgen.hpp: creating libtirpc clients and picking the
// generated code of a version family.
#include "integration/nlm_rpcgen.hpp"

#include <sys/time.h>

namespace nlockd::integration {

namespace {

constexpr bool IsV4(uint32_t version) { return version == 4; }

// Every call ends within this (the stubs' own 25 s is longer than a test wants to hang).
constexpr timeval kCallTimeout{10, 0};

std::unique_ptr<NlmRpcgenClient> Wrap(CLIENT* client, uint32_t version) {
  if (client == nullptr) return nullptr;
  timeval timeout = kCallTimeout;
  clnt_control(client, CLSET_TIMEOUT, reinterpret_cast<char*>(&timeout));
  return IsV4(version) ? detail::MakeClientV4(client) : detail::MakeClientV1(client);
}

}  // namespace

std::string_view ToString(NlmStat stat) {
  switch (stat) {
    case NlmStat::kGranted:
      return "granted";
    case NlmStat::kDenied:
      return "denied";
    case NlmStat::kDeniedNolocks:
      return "denied_nolocks";
    case NlmStat::kBlocked:
      return "blocked";
    case NlmStat::kDeniedGracePeriod:
      return "denied_grace_period";
    case NlmStat::kDeadlck:
      return "deadlck";
    case NlmStat::kRofs:
      return "rofs";
    case NlmStat::kStaleFh:
      return "stale_fh";
    case NlmStat::kFbig:
      return "fbig";
    case NlmStat::kFailed:
      return "failed";
  }
  return "unknown";
}

std::unique_ptr<NlmRpcgenClient> NlmRpcgenClient::Connect(uint32_t version, bool tcp,
                                                          const sockaddr_in& server) {
  sockaddr_in address = server;
  int sock = RPC_ANYSOCK;
  if (tcp) return Wrap(clnttcp_create(&address, kNlmProgram, version, &sock, 0, 0), version);
  timeval retry{0, 500000};
  return Wrap(clntudp_create(&address, kNlmProgram, version, retry, &sock), version);
}

std::unique_ptr<NlmRpcgenClient> NlmRpcgenClient::ConnectViaRpcbind(uint32_t version, bool tcp,
                                                                    const std::string& host) {
  return Wrap(clnt_create(host.c_str(), kNlmProgram, version, tcp ? "tcp" : "udp"), version);
}

std::string NlmRpcgenClient::CreateError() { return clnt_spcreateerror("clnt_create"); }

std::vector<uint8_t> EncodeLockArgs(uint32_t version, const NlmLock& lock, NlmLockFlags flags,
                                    const std::string& cookie) {
  return IsV4(version) ? detail::EncodeLockArgsV4(lock, flags, cookie)
                       : detail::EncodeLockArgsV1(lock, flags, cookie);
}

std::vector<uint8_t> EncodeTestArgs(uint32_t version, const NlmLock& lock, bool exclusive,
                                    const std::string& cookie) {
  return IsV4(version) ? detail::EncodeTestArgsV4(lock, exclusive, cookie)
                       : detail::EncodeTestArgsV1(lock, exclusive, cookie);
}

std::vector<uint8_t> EncodeCancelArgs(uint32_t version, const NlmLock& lock, bool exclusive,
                                      bool block, const std::string& cookie) {
  return IsV4(version) ? detail::EncodeCancelArgsV4(lock, exclusive, block, cookie)
                       : detail::EncodeCancelArgsV1(lock, exclusive, block, cookie);
}

std::vector<uint8_t> EncodeUnlockArgs(uint32_t version, const NlmLock& lock,
                                      const std::string& cookie) {
  return IsV4(version) ? detail::EncodeUnlockArgsV4(lock, cookie)
                       : detail::EncodeUnlockArgsV1(lock, cookie);
}

std::vector<uint8_t> EncodeShareArgs(uint32_t version, const NlmShare& share, bool reclaim,
                                     const std::string& cookie) {
  return IsV4(version) ? detail::EncodeShareArgsV4(share, reclaim, cookie)
                       : detail::EncodeShareArgsV1(share, reclaim, cookie);
}

std::optional<NlmReply> DecodeRes(uint32_t version, std::span<const uint8_t> bytes) {
  return IsV4(version) ? detail::DecodeResV4(bytes) : detail::DecodeResV1(bytes);
}

std::optional<NlmTestReply> DecodeTestRes(uint32_t version, std::span<const uint8_t> bytes) {
  return IsV4(version) ? detail::DecodeTestResV4(bytes) : detail::DecodeTestResV1(bytes);
}

std::optional<NlmGrantedArgs> GetGrantedArgs(uint32_t version, SVCXPRT* transport) {
  return IsV4(version) ? detail::GetGrantedArgsV4(transport) : detail::GetGrantedArgsV1(transport);
}

bool ReplyRes(uint32_t version, SVCXPRT* transport, const NlmReply& res) {
  return IsV4(version) ? detail::ReplyResV4(transport, res) : detail::ReplyResV1(transport, res);
}

std::optional<NlmReply> GetResArgs(uint32_t version, SVCXPRT* transport) {
  return IsV4(version) ? detail::GetResArgsV4(transport) : detail::GetResArgsV1(transport);
}

std::optional<NlmTestReply> GetTestResArgs(uint32_t version, SVCXPRT* transport) {
  return IsV4(version) ? detail::GetTestResArgsV4(transport) : detail::GetTestResArgsV1(transport);
}

}  // namespace nlockd::integration
