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

// One row of the procedure table.
struct Procedure {
  uint32_t number;
  const char* name;
  rpc::Dispatcher::Handler handler;
  // Changes state: retransmissions are answered from the reply cache.
  bool cached = false;
  uint32_t since = NLM_VERS;  // The first version that has it.
};

}  // namespace

template <typename Args, typename Result, typename Now, typename Later>
rpc::Dispatcher::Handler NlmService::Answering(Now now, Later later) {
  return [this, now, later](const rpc::CallContext& c, xdr::Decoder& in, xdr::Encoder& out) {
    return Serve<Args, Result>(c, in, out, now, later);
  };
}

template <typename Args, typename Result, typename Method>
rpc::Dispatcher::Handler NlmService::AnsweringByRes(uint32_t res_procedure, Method method) {
  return [this, res_procedure, method](const rpc::CallContext& c, xdr::Decoder& in, xdr::Encoder&) {
    return ServeMsg<Args, Result>(c, in, res_procedure, method);
  };
}

template <typename Args>
rpc::Dispatcher::Handler NlmService::Taking(void (NlmService::*method)(const rpc::CallContext&,
                                                                       const Args&)) {
  return [this, method](const rpc::CallContext& c, xdr::Decoder& in,
                        xdr::Encoder&) -> asio::awaitable<rpc::HandlerStatus> {
    Args args;
    if (!Decode(in, c.version, args)) return Ready(rpc::HandlerStatus::kGarbageArgs);
    (this->*method)(c, args);
    return Ready(rpc::HandlerStatus::kSuccess);
  };
}

void NlmService::Register(rpc::Dispatcher& dispatcher) {
  using rpc::CallContext;
  // The coroutine forms, and the Try forms that answer without one when they can (see
  // NlmService::TryLock). _MSG calls take the coroutine forms.
  auto test = [this](const CallContext& c, nlm4_testargs a) { return Test(c, std::move(a)); };
  auto lock = [this](const CallContext& c, nlm4_lockargs a) { return Lock(c, std::move(a), true); };
  auto nm_lock = [this](const CallContext& c, nlm4_lockargs a) {
    return Lock(c, std::move(a), false);
  };
  auto cancel = [this](const CallContext& c, nlm4_cancargs a) { return Cancel(c, std::move(a)); };
  auto unlock = [this](const CallContext& c, nlm4_unlockargs a) { return Unlock(c, std::move(a)); };
  auto granted = [this](const CallContext&, nlm4_testargs a) { return Ready(Granted(a)); };
  auto share = [this](const CallContext& c, nlm4_shareargs a) { return Share(c, std::move(a)); };
  auto unshare = [this](const CallContext& c, nlm4_shareargs a) {
    return Unshare(c, std::move(a));
  };
  auto test_now = [this](const CallContext& c, nlm4_testargs& a) { return TryTest(c, a); };
  auto lock_now = [this](const CallContext& c, nlm4_lockargs& a) { return TryLock(c, a, true); };
  auto nm_lock_now = [this](const CallContext& c, nlm4_lockargs& a) {
    return TryLock(c, a, false);
  };
  auto unlock_now = [this](const CallContext& c, nlm4_unlockargs& a) { return TryUnlock(c, a); };
  auto granted_now = [this](const CallContext&, nlm4_testargs& a) {
    return std::optional<nlm4_res>(Granted(a));
  };
  const NotNow<nlm4_res> never_now;
  const NotNow<nlm4_shareres> never_now_share;
  auto free_all = [this](const CallContext& c, xdr::Decoder& in,
                         xdr::Encoder&) -> asio::awaitable<rpc::HandlerStatus> {
    nlm4_notify notify;
    if (!Decode(in, c.version, notify)) return Ready(rpc::HandlerStatus::kGarbageArgs);
    return Done(FreeAll(c, std::move(notify)));
  };

  const Procedure procedures[] = {
      {NLM_NULL, "NULL", NullProc},
      {NLM_TEST, "TEST", Answering<nlm4_testargs, nlm4_testres>(test_now, test)},
      {NLM_LOCK, "LOCK", Answering<nlm4_lockargs, nlm4_res>(lock_now, lock), true},
      {NLM_CANCEL, "CANCEL", Answering<nlm4_cancargs, nlm4_res>(never_now, cancel), true},
      {NLM_UNLOCK, "UNLOCK", Answering<nlm4_unlockargs, nlm4_res>(unlock_now, unlock), true},
      {NLM_GRANTED, "GRANTED", Answering<nlm4_testargs, nlm4_res>(granted_now, granted)},
      {NLM_TEST_MSG, "TEST_MSG", AnsweringByRes<nlm4_testargs, nlm4_testres>(NLM_TEST_RES, test)},
      {NLM_LOCK_MSG, "LOCK_MSG", AnsweringByRes<nlm4_lockargs, nlm4_res>(NLM_LOCK_RES, lock), true},
      {NLM_CANCEL_MSG, "CANCEL_MSG",
       AnsweringByRes<nlm4_cancargs, nlm4_res>(NLM_CANCEL_RES, cancel), true},
      {NLM_UNLOCK_MSG, "UNLOCK_MSG",
       AnsweringByRes<nlm4_unlockargs, nlm4_res>(NLM_UNLOCK_RES, unlock), true},
      {NLM_GRANTED_MSG, "GRANTED_MSG",
       AnsweringByRes<nlm4_testargs, nlm4_res>(NLM_GRANTED_RES, granted)},
      // _RES calls answer _MSG calls we made; only GRANTED_RES carries news for us.
      {NLM_TEST_RES, "RES", NullProc},
      {NLM_LOCK_RES, "RES", NullProc},
      {NLM_CANCEL_RES, "RES", NullProc},
      {NLM_UNLOCK_RES, "RES", NullProc},
      {NLM_GRANTED_RES, "GRANTED_RES", Taking<nlm4_res>(&NlmService::GrantedRes)},
      {NLM_SM_NOTIFY, "SM_NOTIFY", Taking<nlm_sm_status>(&NlmService::SmNotify)},
      {NLM_SHARE, "SHARE", Answering<nlm4_shareargs, nlm4_shareres>(never_now_share, share), true,
       NLM_VERSX},
      {NLM_UNSHARE, "UNSHARE", Answering<nlm4_shareargs, nlm4_shareres>(never_now_share, unshare),
       true, NLM_VERSX},
      {NLM_NM_LOCK, "NM_LOCK", Answering<nlm4_lockargs, nlm4_res>(nm_lock_now, nm_lock), true,
       NLM_VERSX},
      {NLM_FREE_ALL, "FREE_ALL", free_all, true, NLM_VERSX},
  };
  for (uint32_t version : {NLM_VERS, NLM_VERSX, NLM4_VERS}) {
    for (const Procedure& procedure : procedures) {
      if (version < procedure.since) continue;
      dispatcher.Register(NLM_PROG, version, procedure.number, procedure.name, procedure.handler,
                          rpc::ProcedureOptions{.cache_replies = procedure.cached});
    }
  }
}

}  // namespace nlockd::nlm
