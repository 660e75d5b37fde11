// SPDX-License-Identifier: Apache-2.0
// nlm_rpcgen.hpp for version 4: the stubs and XDR routines rpcgen made from
// tests/integration/rpcgen/nlm4_prot.x (RFC 1813, Appendix II).
#include "integration/nlm_rpcgen_family.hpp"
#include "nlm4_prot_test.h"

namespace nlockd::integration {

namespace {

struct V4 {
  using Lock = nlm4_lock;
  using LockArgs = nlm4_lockargs;
  using CancArgs = nlm4_cancargs;
  using TestArgs = nlm4_testargs;
  using UnlockArgs = nlm4_unlockargs;
  using ShareArgs = nlm4_shareargs;
  using Res = nlm4_res;
  using TestRes = nlm4_testres;
  using ShareRes = nlm4_shareres;
  using Notify = nlm4_notify;

  static const nlm4_holder& HolderOf(const nlm4_testres& res) {
    return res.stat.nlm4_testrply_u.holder;
  }

  static constexpr auto xdr_lockargs = xdr_nlm4_lockargs;
  static constexpr auto xdr_cancargs = xdr_nlm4_cancargs;
  static constexpr auto xdr_testargs = xdr_nlm4_testargs;
  static constexpr auto xdr_unlockargs = xdr_nlm4_unlockargs;
  static constexpr auto xdr_shareargs = xdr_nlm4_shareargs;
  static constexpr auto xdr_res = xdr_nlm4_res;
  static constexpr auto xdr_testres = xdr_nlm4_testres;
  static constexpr auto xdr_shareres = xdr_nlm4_shareres;

  static constexpr auto test_msg = nlmproc4_test_msg_4;
  static constexpr auto lock_msg = nlmproc4_lock_msg_4;
  static constexpr auto cancel_msg = nlmproc4_cancel_msg_4;
  static constexpr auto unlock_msg = nlmproc4_unlock_msg_4;
  static constexpr auto null = nlmproc4_null_4;
  static constexpr auto test = nlmproc4_test_4;
  static constexpr auto lock = nlmproc4_lock_4;
  static constexpr auto cancel = nlmproc4_cancel_4;
  static constexpr auto unlock = nlmproc4_unlock_4;
  static constexpr auto share = nlmproc4_share_4;
  static constexpr auto unshare = nlmproc4_unshare_4;
  static constexpr auto nm_lock = nlmproc4_nm_lock_4;
  static constexpr auto free_all = nlmproc4_free_all_4;
  static constexpr auto granted_res = nlmproc4_granted_res_4;
};

}  // namespace

namespace detail {

std::unique_ptr<NlmRpcgenClient> MakeClientV4(CLIENT* client) {
  return std::make_unique<family::Client<V4>>(client);
}

std::vector<uint8_t> EncodeLockArgsV4(const NlmLock& lock, NlmLockFlags flags,
                                      const std::string& cookie) {
  return family::Encode(V4::xdr_lockargs, family::ToLockArgs<V4>(lock, flags, cookie));
}

std::vector<uint8_t> EncodeTestArgsV4(const NlmLock& lock, bool exclusive,
                                      const std::string& cookie) {
  return family::Encode(V4::xdr_testargs, family::ToTestArgs<V4>(lock, exclusive, cookie));
}

std::vector<uint8_t> EncodeCancelArgsV4(const NlmLock& lock, bool exclusive, bool block,
                                        const std::string& cookie) {
  return family::Encode(V4::xdr_cancargs, family::ToCancArgs<V4>(lock, exclusive, block, cookie));
}

std::vector<uint8_t> EncodeUnlockArgsV4(const NlmLock& lock, const std::string& cookie) {
  return family::Encode(V4::xdr_unlockargs, family::ToUnlockArgs<V4>(lock, cookie));
}

std::vector<uint8_t> EncodeShareArgsV4(const NlmShare& share, bool reclaim,
                                       const std::string& cookie) {
  return family::Encode(V4::xdr_shareargs, family::ToShareArgs<V4>(share, reclaim, cookie));
}

std::optional<NlmReply> DecodeResV4(std::span<const uint8_t> bytes) {
  return family::Decode(V4::xdr_res, bytes, family::FromRes<V4>);
}

std::optional<NlmTestReply> DecodeTestResV4(std::span<const uint8_t> bytes) {
  return family::Decode(V4::xdr_testres, bytes, family::FromTestRes<V4>);
}

std::optional<NlmGrantedArgs> GetGrantedArgsV4(SVCXPRT* transport) {
  return family::GetArgs(transport, V4::xdr_testargs, family::FromTestArgs<V4>);
}

std::optional<NlmReply> GetResArgsV4(SVCXPRT* transport) {
  return family::GetArgs(transport, V4::xdr_res, family::FromRes<V4>);
}

std::optional<NlmTestReply> GetTestResArgsV4(SVCXPRT* transport) {
  return family::GetArgs(transport, V4::xdr_testres, family::FromTestRes<V4>);
}

bool ReplyResV4(SVCXPRT* transport, const NlmReply& res) {
  return family::ReplyRes<V4>(transport, res);
}

}  // namespace detail

}  // namespace nlockd::integration
