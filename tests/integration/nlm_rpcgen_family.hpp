// SPDX-License-Identifier: Apache-2.0
#pragma once

// The shared body of nlm_rpcgen_v1.cpp and nlm_rpcgen_v4.cpp: everything written once against
// a traits type `F` that names one family's generated structs, XDR routines and stubs. It
// names nothing generated itself, so it may be included beside either generated header.

#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <rpc/rpc.h>

#include "integration/nlm_rpcgen.hpp"

namespace nlockd::integration::family {

// clnt_call and friends want xdrproc_t, a variadic type that no generated routine has; going
// through void(*)() keeps g++'s -Wcast-function-type quiet about a cast libtirpc requires.
template <typename Fn>
xdrproc_t AsXdrProc(Fn* fn) {
  return reinterpret_cast<xdrproc_t>(reinterpret_cast<void (*)()>(fn));
}

// The generated structs point into the caller's strings while a call is encoded; XDR never
// writes through them when encoding.
inline netobj Obj(const std::string& bytes) {
  return netobj{static_cast<u_int>(bytes.size()), const_cast<char*>(bytes.data())};
}
inline char* Str(const std::string& text) { return const_cast<char*>(text.c_str()); }
inline std::string FromObj(const netobj& obj) {
  return obj.n_bytes == nullptr ? std::string() : std::string(obj.n_bytes, obj.n_len);
}

template <typename F>
typename F::Lock ToLock(const NlmLock& lock) {
  typename F::Lock out{};
  out.caller_name = Str(lock.caller_name);
  out.fh = Obj(lock.fh);
  out.oh = Obj(lock.oh);
  out.svid = lock.svid;
  out.l_offset = static_cast<decltype(out.l_offset)>(lock.offset);
  out.l_len = static_cast<decltype(out.l_len)>(lock.length);
  return out;
}

template <typename F>
NlmLock FromLock(const typename F::Lock& lock) {
  return NlmLock{lock.caller_name == nullptr ? std::string() : std::string(lock.caller_name),
                 FromObj(lock.fh),
                 FromObj(lock.oh),
                 lock.svid,
                 lock.l_offset,
                 lock.l_len};
}

template <typename F>
typename F::LockArgs ToLockArgs(const NlmLock& lock, NlmLockFlags flags,
                                const std::string& cookie) {
  typename F::LockArgs args{};
  args.cookie = Obj(cookie);
  args.block = flags.block;
  args.exclusive = flags.exclusive;
  args.alock = ToLock<F>(lock);
  args.reclaim = flags.reclaim;
  args.state = flags.state;
  return args;
}

template <typename F>
typename F::TestArgs ToTestArgs(const NlmLock& lock, bool exclusive, const std::string& cookie) {
  typename F::TestArgs args{};
  args.cookie = Obj(cookie);
  args.exclusive = exclusive;
  args.alock = ToLock<F>(lock);
  return args;
}

template <typename F>
typename F::CancArgs ToCancArgs(const NlmLock& lock, bool exclusive, bool block,
                                const std::string& cookie) {
  typename F::CancArgs args{};
  args.cookie = Obj(cookie);
  args.block = block;
  args.exclusive = exclusive;
  args.alock = ToLock<F>(lock);
  return args;
}

template <typename F>
typename F::UnlockArgs ToUnlockArgs(const NlmLock& lock, const std::string& cookie) {
  typename F::UnlockArgs args{};
  args.cookie = Obj(cookie);
  args.alock = ToLock<F>(lock);
  return args;
}

template <typename F>
typename F::ShareArgs ToShareArgs(const NlmShare& share, bool reclaim, const std::string& cookie) {
  typename F::ShareArgs args{};
  args.cookie = Obj(cookie);
  args.share.caller_name = Str(share.caller_name);
  args.share.fh = Obj(share.fh);
  args.share.oh = Obj(share.oh);
  args.share.mode = static_cast<decltype(args.share.mode)>(share.mode);
  args.share.access = static_cast<decltype(args.share.access)>(share.access);
  args.reclaim = reclaim;
  return args;
}

template <typename F>
NlmReply FromRes(const typename F::Res& res) {
  return NlmReply{FromObj(res.cookie), static_cast<NlmStat>(res.stat.stat)};
}

template <typename F>
NlmTestReply FromTestRes(const typename F::TestRes& res) {
  NlmTestReply out{FromObj(res.cookie), static_cast<NlmStat>(res.stat.stat), std::nullopt};
  if (out.stat == NlmStat::kDenied) {
    const auto& holder = F::HolderOf(res);
    out.holder = NlmHolder{holder.exclusive != 0, holder.svid, FromObj(holder.oh), holder.l_offset,
                           holder.l_len};
  }
  return out;
}

template <typename F>
NlmGrantedArgs FromTestArgs(const typename F::TestArgs& args) {
  return NlmGrantedArgs{FromObj(args.cookie), args.exclusive != 0, FromLock<F>(args.alock)};
}

// Encodes `value` with a generated routine into fresh bytes.
template <typename T>
std::vector<uint8_t> Encode(bool_t (*routine)(XDR*, T*), const T& value) {
  std::vector<uint8_t> bytes(16384);
  XDR xdrs;
  xdrmem_create(&xdrs, reinterpret_cast<char*>(bytes.data()), static_cast<u_int>(bytes.size()),
                XDR_ENCODE);
  T copy = value;
  if (!routine(&xdrs, &copy)) bytes.clear();
  bytes.resize(bytes.empty() ? 0 : xdr_getpos(&xdrs));
  xdr_destroy(&xdrs);
  return bytes;
}

// Decodes bytes with a generated routine and converts the result before freeing it.
template <typename T, typename Convert>
auto Decode(bool_t (*routine)(XDR*, T*), std::span<const uint8_t> bytes, Convert convert)
    -> std::optional<decltype(convert(std::declval<const T&>()))> {
  std::vector<char> copy(bytes.begin(), bytes.end());
  XDR xdrs;
  xdrmem_create(&xdrs, copy.data(), static_cast<u_int>(copy.size()), XDR_DECODE);
  T value{};
  bool ok = routine(&xdrs, &value) != 0;
  xdr_destroy(&xdrs);
  std::optional<decltype(convert(std::declval<const T&>()))> out;
  if (ok) out = convert(value);
  xdr_free(AsXdrProc(routine), reinterpret_cast<char*>(&value));
  return out;
}

template <typename F>
class Client : public NlmRpcgenClient {
 public:
  explicit Client(CLIENT* client) : client_(client) {}
  ~Client() override { clnt_destroy(client_); }
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  bool Null() override { return Call(F::null, static_cast<void*>(nullptr)) != nullptr; }

  std::optional<NlmTestReply> Test(const NlmLock& lock, bool exclusive,
                                   const std::string& cookie) override {
    auto args = ToTestArgs<F>(lock, exclusive, cookie);
    return Result(Call(F::test, &args), F::xdr_testres, FromTestRes<F>);
  }

  std::optional<NlmReply> Lock(const NlmLock& lock, NlmLockFlags flags,
                               const std::string& cookie) override {
    auto args = ToLockArgs<F>(lock, flags, cookie);
    return Result(Call(F::lock, &args), F::xdr_res, FromRes<F>);
  }

  std::optional<NlmReply> NmLock(const NlmLock& lock, NlmLockFlags flags,
                                 const std::string& cookie) override {
    auto args = ToLockArgs<F>(lock, flags, cookie);
    return Result(Call(F::nm_lock, &args), F::xdr_res, FromRes<F>);
  }

  std::optional<NlmReply> Cancel(const NlmLock& lock, bool exclusive, bool block,
                                 const std::string& cookie) override {
    auto args = ToCancArgs<F>(lock, exclusive, block, cookie);
    return Result(Call(F::cancel, &args), F::xdr_res, FromRes<F>);
  }

  std::optional<NlmReply> Unlock(const NlmLock& lock, const std::string& cookie) override {
    auto args = ToUnlockArgs<F>(lock, cookie);
    return Result(Call(F::unlock, &args), F::xdr_res, FromRes<F>);
  }

  std::optional<NlmShareReply> Share(const NlmShare& share, bool reclaim,
                                     const std::string& cookie) override {
    auto args = ToShareArgs<F>(share, reclaim, cookie);
    return Result(Call(F::share, &args), F::xdr_shareres, ShareReply);
  }

  std::optional<NlmShareReply> Unshare(const NlmShare& share, const std::string& cookie) override {
    auto args = ToShareArgs<F>(share, false, cookie);
    return Result(Call(F::unshare, &args), F::xdr_shareres, ShareReply);
  }

  bool FreeAll(const std::string& name, int32_t state) override {
    typename F::Notify args{};
    args.name = Str(name);
    args.state = state;
    return Call(F::free_all, &args) != nullptr;
  }

  bool TestMsg(const NlmLock& lock, bool exclusive, const std::string& cookie) override {
    auto args = ToTestArgs<F>(lock, exclusive, cookie);
    return Call(F::test_msg, &args) != nullptr;
  }

  bool LockMsg(const NlmLock& lock, NlmLockFlags flags, const std::string& cookie) override {
    auto args = ToLockArgs<F>(lock, flags, cookie);
    return Call(F::lock_msg, &args) != nullptr;
  }

  bool CancelMsg(const NlmLock& lock, bool exclusive, bool block,
                 const std::string& cookie) override {
    auto args = ToCancArgs<F>(lock, exclusive, block, cookie);
    return Call(F::cancel_msg, &args) != nullptr;
  }

  bool UnlockMsg(const NlmLock& lock, const std::string& cookie) override {
    auto args = ToUnlockArgs<F>(lock, cookie);
    return Call(F::unlock_msg, &args) != nullptr;
  }

  bool GrantedRes(const NlmReply& res) override {
    typename F::Res args{};
    args.cookie = Obj(res.cookie);
    args.stat.stat = static_cast<decltype(args.stat.stat)>(res.stat);
    return Call(F::granted_res, &args) != nullptr;
  }

 private:
  static NlmShareReply ShareReply(const typename F::ShareRes& res) {
    return NlmShareReply{FromObj(res.cookie), static_cast<NlmStat>(res.stat), res.sequence};
  }

  // Runs a stub and records how the call went.
  template <typename R, typename A>
  R* Call(R* (*stub)(A*, CLIENT*), A* args) {
    R* result = stub(args, client_);
    rpc_err err{};
    clnt_geterr(client_, &err);
    last_status_ = static_cast<int>(err.re_status);
    error_ = result == nullptr ? clnt_sperror(client_, "call") : "";
    if (result == nullptr && last_status_ == RPC_SUCCESS) last_status_ = RPC_FAILED;
    return result;
  }

  // Converts a stub's static result and frees what XDR allocated in it.
  template <typename R, typename Convert>
  auto Result(R* result, bool_t (*routine)(XDR*, R*), Convert convert)
      -> std::optional<decltype(convert(*result))> {
    if (result == nullptr) return std::nullopt;
    auto out = convert(*result);
    clnt_freeres(client_, AsXdrProc(routine), reinterpret_cast<char*>(result));
    return out;
  }

  CLIENT* client_;
};

}  // namespace nlockd::integration::family

namespace nlockd::integration::family {

// The serving side (a callback server): the argument of the GRANTED call being served.
// The argument of the call being served, decoded by `routine` and converted before it is freed.
template <typename T, typename Convert>
auto GetArgs(SVCXPRT* transport, bool_t (*routine)(XDR*, T*), Convert convert)
    -> std::optional<decltype(convert(std::declval<const T&>()))> {
  T args{};
  if (!svc_getargs(transport, AsXdrProc(routine), reinterpret_cast<char*>(&args))) {
    return std::nullopt;
  }
  auto out = convert(args);
  svc_freeargs(transport, AsXdrProc(routine), reinterpret_cast<char*>(&args));
  return out;
}

template <typename F>
bool ReplyRes(SVCXPRT* transport, const NlmReply& res) {
  typename F::Res out{};
  out.cookie = Obj(res.cookie);
  out.stat.stat = static_cast<decltype(out.stat.stat)>(res.stat);
  return svc_sendreply(transport, AsXdrProc(F::xdr_res), reinterpret_cast<char*>(&out)) != 0;
}

}  // namespace nlockd::integration::family
