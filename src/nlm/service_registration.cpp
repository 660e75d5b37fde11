// SPDX-License-Identifier: Apache-2.0
// The procedure table of NlmService: every procedure of versions 1, 3 and 4, in one place.
// The class's header comes first: Asio picks its coroutine-frame allocator by what was included
// before it, and every file must pick the same one (a mismatch aborts under ASan).
#include "nlm/service.hpp"

namespace nlockd::nlm {

namespace {

// Whether the request reclaims a lock or share held before a restart (nlm_reclaims_total).
bool Reclaims(const nlm4_lockargs& args) { return args.reclaim; }
bool Reclaims(const nlm4_shareargs& args) { return args.reclaim; }
template <typename Args>
bool Reclaims(const Args& /*args*/) {
  return false;
}

}  // namespace

template <typename Result>
void NlmService::NoteResult(const rpc::CallContext& context, bool reclaim, const Result& result) {
  // The status on the wire: version 1 and 3 callers get (and are counted with) the mapped one.
  const nlm4_stats stat = StatusForVersion(result.stat, context.version);
  context.result = ToString(stat);
  if (reclaim && stat == NLM4_GRANTED) ++stats_.reclaims_granted;
}

template <typename Args, typename Result, typename Now, typename Later>
asio::awaitable<rpc::HandlerStatus> NlmService::Serve(const rpc::CallContext& context,
                                                      xdr::Decoder& in, xdr::Encoder& out, Now now,
                                                      Later later) {
  Args args;
  if (!Decode(in, context.version, args)) co_return rpc::HandlerStatus::kGarbageArgs;
  const bool reclaim = Reclaims(args);
  std::optional<Result> result = now(context, args);
  if (!result) result = co_await later(context, std::move(args));
  Encode(out, context.version, *result);
  NoteResult(context, reclaim, *result);
  co_return rpc::HandlerStatus::kSuccess;
}

template <typename Args, typename Result, typename Method>
asio::awaitable<rpc::HandlerStatus> NlmService::ServeMsg(const rpc::CallContext& context,
                                                         xdr::Decoder& in, uint32_t res_procedure,
                                                         Method method) {
  Args args;
  // Arguments that do not decode get the RPC-level GARBAGE_ARGS reply (RFC 5531 §9), as every
  // other procedure's do, and no _RES: the cookie may not have decoded, and a callback to the
  // source of an unauthenticated datagram would make us a reflector.
  if (!Decode(in, context.version, args)) co_return rpc::HandlerStatus::kGarbageArgs;
  const bool reclaim = Reclaims(args);
  Result result = co_await method(context, std::move(args));
  std::vector<uint8_t> body;
  xdr::Encoder enc(body);
  Encode(enc, context.version, result);
  NoteResult(context, reclaim, result);  // Counted with the status its _RES carries.
  SpawnRes(context, res_procedure, std::move(body));
  co_return rpc::HandlerStatus::kSuccess;
}

namespace {

// The `now` of procedures that always run their coroutine form.
template <typename Result>
struct NotNow {
  template <typename Args>
  std::optional<Result> operator()(const rpc::CallContext&, Args&) const {
    return std::nullopt;
  }
};

template <typename T>
asio::awaitable<T> Ready(T value) {
  co_return value;
}

// A procedure with no reply body: done once `work` is.
asio::awaitable<rpc::HandlerStatus> Done(asio::awaitable<void> work) {
  co_await std::move(work);
  co_return rpc::HandlerStatus::kSuccess;
}

asio::awaitable<rpc::HandlerStatus> NullProc(const rpc::CallContext&, xdr::Decoder&,
                                             xdr::Encoder&) {
  co_return rpc::HandlerStatus::kSuccess;
}

}  // namespace

void NlmService::Register(rpc::Dispatcher& dispatcher) {
  using rpc::CallContext;
  using rpc::HandlerStatus;
  // Procedures that change state answer retransmissions from the reply cache.
  const rpc::ProcedureOptions cached{.cache_replies = true};

  auto test = [this](const CallContext& c, nlm4_testargs a) { return Test(c, std::move(a)); };
  auto lock = [this](const CallContext& c, nlm4_lockargs a) { return Lock(c, std::move(a), true); };
  auto nm_lock = [this](const CallContext& c, nlm4_lockargs a) {
    return Lock(c, std::move(a), false);
  };
  auto cancel = [this](const CallContext& c, nlm4_cancargs a) { return Cancel(c, std::move(a)); };
  auto unlock = [this](const CallContext& c, nlm4_unlockargs a) { return Unlock(c, std::move(a)); };
  auto granted = [this](const CallContext&, nlm4_testargs a) { return Ready(Granted(a)); };
  // The Try forms (see NlmService::TryLock).
  auto test_now = [this](const CallContext& c, nlm4_testargs& a) { return TryTest(c, a); };
  auto lock_now = [this](const CallContext& c, nlm4_lockargs& a) { return TryLock(c, a, true); };
  auto nm_lock_now = [this](const CallContext& c, nlm4_lockargs& a) {
    return TryLock(c, a, false);
  };
  auto unlock_now = [this](const CallContext& c, nlm4_unlockargs& a) { return TryUnlock(c, a); };
  auto granted_now = [this](const CallContext&, nlm4_testargs& a) {
    return std::optional<nlm4_res>(Granted(a));
  };
  const NotNow<nlm4_res> never_now;  // CANCEL: always the coroutine form.
  const NotNow<nlm4_shareres> never_now_share;
  auto share = [this](const CallContext& c, nlm4_shareargs a) { return Share(c, std::move(a)); };
  auto unshare = [this](const CallContext& c, nlm4_shareargs a) {
    return Unshare(c, std::move(a));
  };

  for (uint32_t version : {NLM_VERS, NLM_VERSX, NLM4_VERS}) {
    dispatcher.Register(NLM_PROG, version, NLM_NULL, "NULL", NullProc);
    dispatcher.Register(
        NLM_PROG, version, NLM_TEST, "TEST",
        [this, test_now, test](const CallContext& c, xdr::Decoder& in, xdr::Encoder& out) {
          return Serve<nlm4_testargs, nlm4_testres>(c, in, out, test_now, test);
        });
    dispatcher.Register(
        NLM_PROG, version, NLM_LOCK, "LOCK",
        [this, lock_now, lock](const CallContext& c, xdr::Decoder& in, xdr::Encoder& out) {
          return Serve<nlm4_lockargs, nlm4_res>(c, in, out, lock_now, lock);
        },
        cached);
    dispatcher.Register(
        NLM_PROG, version, NLM_CANCEL, "CANCEL",
        [this, never_now, cancel](const CallContext& c, xdr::Decoder& in, xdr::Encoder& out) {
          return Serve<nlm4_cancargs, nlm4_res>(c, in, out, never_now, cancel);
        },
        cached);
    dispatcher.Register(
        NLM_PROG, version, NLM_UNLOCK, "UNLOCK",
        [this, unlock_now, unlock](const CallContext& c, xdr::Decoder& in, xdr::Encoder& out) {
          return Serve<nlm4_unlockargs, nlm4_res>(c, in, out, unlock_now, unlock);
        },
        cached);
    dispatcher.Register(
        NLM_PROG, version, NLM_GRANTED, "GRANTED",
        [this, granted_now, granted](const CallContext& c, xdr::Decoder& in, xdr::Encoder& out) {
          return Serve<nlm4_testargs, nlm4_res>(c, in, out, granted_now, granted);
        });

    dispatcher.Register(NLM_PROG, version, NLM_TEST_MSG, "TEST_MSG",
                        [this, test](const CallContext& c, xdr::Decoder& in, xdr::Encoder&) {
                          return ServeMsg<nlm4_testargs, nlm4_testres>(c, in, NLM_TEST_RES, test);
                        });
    dispatcher.Register(
        NLM_PROG, version, NLM_LOCK_MSG, "LOCK_MSG",
        [this, lock](const CallContext& c, xdr::Decoder& in, xdr::Encoder&) {
          return ServeMsg<nlm4_lockargs, nlm4_res>(c, in, NLM_LOCK_RES, lock);
        },
        cached);
    dispatcher.Register(
        NLM_PROG, version, NLM_CANCEL_MSG, "CANCEL_MSG",
        [this, cancel](const CallContext& c, xdr::Decoder& in, xdr::Encoder&) {
          return ServeMsg<nlm4_cancargs, nlm4_res>(c, in, NLM_CANCEL_RES, cancel);
        },
        cached);
    dispatcher.Register(
        NLM_PROG, version, NLM_UNLOCK_MSG, "UNLOCK_MSG",
        [this, unlock](const CallContext& c, xdr::Decoder& in, xdr::Encoder&) {
          return ServeMsg<nlm4_unlockargs, nlm4_res>(c, in, NLM_UNLOCK_RES, unlock);
        },
        cached);
    dispatcher.Register(NLM_PROG, version, NLM_GRANTED_MSG, "GRANTED_MSG",
                        [this, granted](const CallContext& c, xdr::Decoder& in, xdr::Encoder&) {
                          return ServeMsg<nlm4_testargs, nlm4_res>(c, in, NLM_GRANTED_RES, granted);
                        });

    // _RES calls answer _MSG calls we made; only GRANTED_RES carries news for us.
    for (uint32_t res : {NLM_TEST_RES, NLM_LOCK_RES, NLM_CANCEL_RES, NLM_UNLOCK_RES}) {
      dispatcher.Register(NLM_PROG, version, res, "RES", NullProc);
    }
    dispatcher.Register(NLM_PROG, version, NLM_GRANTED_RES, "GRANTED_RES",
                        [this](const CallContext& c, xdr::Decoder& in,
                               xdr::Encoder&) -> asio::awaitable<HandlerStatus> {
                          nlm4_res res;
                          if (!Decode(in, c.version, res)) {
                            return Ready(HandlerStatus::kGarbageArgs);
                          }
                          GrantedRes(c, res);
                          return Ready(HandlerStatus::kSuccess);
                        });
    dispatcher.Register(NLM_PROG, version, NLM_SM_NOTIFY, "SM_NOTIFY",
                        [this](const CallContext& c, xdr::Decoder& in,
                               xdr::Encoder&) -> asio::awaitable<HandlerStatus> {
                          nlm_sm_status status;
                          if (!Decode(in, c.version, status)) {
                            return Ready(HandlerStatus::kGarbageArgs);
                          }
                          SmNotify(c, status);
                          return Ready(HandlerStatus::kSuccess);
                        });
    if (version == NLM_VERS) continue;  // SHARE and friends came with version 3.

    dispatcher.Register(
        NLM_PROG, version, NLM_SHARE, "SHARE",
        [this, never_now_share, share](const CallContext& c, xdr::Decoder& in, xdr::Encoder& out) {
          return Serve<nlm4_shareargs, nlm4_shareres>(c, in, out, never_now_share, share);
        },
        cached);
    dispatcher.Register(
        NLM_PROG, version, NLM_UNSHARE, "UNSHARE",
        [this, never_now_share, unshare](const CallContext& c, xdr::Decoder& in,
                                         xdr::Encoder& out) {
          return Serve<nlm4_shareargs, nlm4_shareres>(c, in, out, never_now_share, unshare);
        },
        cached);
    dispatcher.Register(
        NLM_PROG, version, NLM_NM_LOCK, "NM_LOCK",
        [this, nm_lock_now, nm_lock](const CallContext& c, xdr::Decoder& in, xdr::Encoder& out) {
          return Serve<nlm4_lockargs, nlm4_res>(c, in, out, nm_lock_now, nm_lock);
        },
        cached);
    dispatcher.Register(
        NLM_PROG, version, NLM_FREE_ALL, "FREE_ALL",
        [this](const CallContext& c, xdr::Decoder& in,
               xdr::Encoder&) -> asio::awaitable<HandlerStatus> {
          nlm4_notify notify;
          if (!Decode(in, c.version, notify)) return Ready(HandlerStatus::kGarbageArgs);
          return Done(FreeAll(c, std::move(notify)));
        },
        cached);
  }
}

}  // namespace nlockd::nlm
