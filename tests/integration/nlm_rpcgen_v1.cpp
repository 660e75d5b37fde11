// SPDX-License-Identifier: Apache-2.0
// nlm_rpcgen.hpp for versions 1 and 3: the stubs and XDR routines rpcgen made from
// the system's rpcsvc/nlm_prot.x (with NLM_NULL added). The CLIENT carries the version: the
// version-1 stubs serve version 3 too, and the version-3 ones (SHARE...) sent on a version-1
// CLIENT are what a confused client would send.
#include "integration/nlm_rpcgen_family.hpp"
#include "nlm_prot_test.h"

namespace nlockd::integration {

namespace {

struct V1 {
  using Lock = nlm_lock;
  using LockArgs = nlm_lockargs;
  using CancArgs = nlm_cancargs;
  using TestArgs = nlm_testargs;
  using UnlockArgs = nlm_unlockargs;
  using ShareArgs = nlm_shareargs;
  using Res = nlm_res;
  using TestRes = nlm_testres;
  using ShareRes = nlm_shareres;
  using Notify = nlm_notify;

  static const nlm_holder& HolderOf(const nlm_testres& res) {
    return res.stat.nlm_testrply_u.holder;
  }

  static constexpr auto xdr_lockargs = xdr_nlm_lockargs;
  static constexpr auto xdr_cancargs = xdr_nlm_cancargs;
  static constexpr auto xdr_testargs = xdr_nlm_testargs;
  static constexpr auto xdr_unlockargs = xdr_nlm_unlockargs;
  static constexpr auto xdr_shareargs = xdr_nlm_shareargs;
  static constexpr auto xdr_res = xdr_nlm_res;
  static constexpr auto xdr_testres = xdr_nlm_testres;
  static constexpr auto xdr_shareres = xdr_nlm_shareres;

  static constexpr auto test_msg = nlm_test_msg_1;
  static constexpr auto lock_msg = nlm_lock_msg_1;
  static constexpr auto cancel_msg = nlm_cancel_msg_1;
  static constexpr auto unlock_msg = nlm_unlock_msg_1;
  static constexpr auto null = nlm_null_1;
  static constexpr auto test = nlm_test_1;
  static constexpr auto lock = nlm_lock_1;
  static constexpr auto cancel = nlm_cancel_1;
  static constexpr auto unlock = nlm_unlock_1;
  static constexpr auto share = nlm_share_3;
  static constexpr auto unshare = nlm_unshare_3;
  static constexpr auto nm_lock = nlm_nm_lock_3;
  static constexpr auto free_all = nlm_free_all_3;
  static constexpr auto granted_res = nlm_granted_res_1;
};

}  // namespace

namespace detail {

std::unique_ptr<NlmRpcgenClient> MakeClientV1(CLIENT* client) {
  return std::make_unique<family::Client<V1>>(client);
}

std::vector<uint8_t> EncodeLockArgsV1(const NlmLock& lock, NlmLockFlags flags,
                                      const std::string& cookie) {
  return family::Encode(V1::xdr_lockargs, family::ToLockArgs<V1>(lock, flags, cookie));
}

std::vector<uint8_t> EncodeTestArgsV1(const NlmLock& lock, bool exclusive,
                                      const std::string& cookie) {
  return family::Encode(V1::xdr_testargs, family::ToTestArgs<V1>(lock, exclusive, cookie));
}

std::vector<uint8_t> EncodeCancelArgsV1(const NlmLock& lock, bool exclusive, bool block,
                                        const std::string& cookie) {
  return family::Encode(V1::xdr_cancargs, family::ToCancArgs<V1>(lock, exclusive, block, cookie));
}

std::vector<uint8_t> EncodeUnlockArgsV1(const NlmLock& lock, const std::string& cookie) {
  return family::Encode(V1::xdr_unlockargs, family::ToUnlockArgs<V1>(lock, cookie));
}

std::vector<uint8_t> EncodeShareArgsV1(const NlmShare& share, bool reclaim,
                                       const std::string& cookie) {
  return family::Encode(V1::xdr_shareargs, family::ToShareArgs<V1>(share, reclaim, cookie));
}

std::optional<NlmReply> DecodeResV1(std::span<const uint8_t> bytes) {
  return family::Decode(V1::xdr_res, bytes, family::FromRes<V1>);
}

std::optional<NlmTestReply> DecodeTestResV1(std::span<const uint8_t> bytes) {
  return family::Decode(V1::xdr_testres, bytes, family::FromTestRes<V1>);
}

std::optional<NlmGrantedArgs> GetGrantedArgsV1(SVCXPRT* transport) {
  return family::GetArgs(transport, V1::xdr_testargs, family::FromTestArgs<V1>);
}

std::optional<NlmReply> GetResArgsV1(SVCXPRT* transport) {
  return family::GetArgs(transport, V1::xdr_res, family::FromRes<V1>);
}

std::optional<NlmTestReply> GetTestResArgsV1(SVCXPRT* transport) {
  return family::GetArgs(transport, V1::xdr_testres, family::FromTestRes<V1>);
}

bool ReplyResV1(SVCXPRT* transport, const NlmReply& res) {
  return family::ReplyRes<V1>(transport, res);
}

}  // namespace detail

}  // namespace nlockd::integration
