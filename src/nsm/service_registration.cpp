// SPDX-License-Identifier: Apache-2.0
// The procedure table of NsmService, in one place.
#include "nsm/service.hpp"

namespace nlockd::nsm {

namespace {

using rpc::CallContext;
using rpc::HandlerStatus;

asio::awaitable<HandlerStatus> NullProc(const CallContext&, xdr::Decoder&, xdr::Encoder&) {
  co_return HandlerStatus::kSuccess;
}

// The result label of nsm_requests_total (CallContext::result), unless the call was refused
// (CallerAllowed recorded "denied"): the res of an sm_stat_res; an sm_stat carries none.
void NoteResult(const CallContext& context, const sm_stat_res& result) {
  if (!context.result.empty()) return;
  context.result = result.res_stat == stat_succ ? "stat_succ" : "stat_fail";
}
void NoteResult(const CallContext& /*context*/, const sm_stat& /*result*/) {}

// Decode, call, encode for the procedures with a result.
template <typename Args, typename Result, typename Method>
asio::awaitable<HandlerStatus> Serve(const CallContext& context, xdr::Decoder& in,
                                     xdr::Encoder& out, Method method) {
  Args args;
  if (!Decode(in, args)) co_return HandlerStatus::kGarbageArgs;
  Result result = co_await method(context, std::move(args));
  Encode(out, result);
  NoteResult(context, result);
  co_return HandlerStatus::kSuccess;
}

template <typename T>
asio::awaitable<T> Ready(T value) {
  co_return value;
}

}  // namespace

void NsmService::Register(rpc::Dispatcher& dispatcher) {
  // SM_MON and the other writes answer retransmissions from the reply cache: a repeated
  // SM_SIMU_CRASH must not bump the state twice.
  const rpc::ProcedureOptions cached{.cache_replies = true};

  auto stat = [this](const CallContext& c, sm_name a) { return Ready(Stat(c, a)); };
  auto monitor = [this](const CallContext& c, mon a) { return Mon(c, std::move(a)); };
  auto unmon = [this](const CallContext& c, mon_id a) { return Unmon(c, std::move(a)); };
  auto unmon_all = [this](const CallContext& c, my_id a) { return UnmonAll(c, std::move(a)); };

  dispatcher.Register(SM_PROG, SM_VERS, SM_NULL, "SM_NULL", NullProc);
  dispatcher.Register(SM_PROG, SM_VERS, SM_STAT, "SM_STAT",
                      [stat](const CallContext& c, xdr::Decoder& in, xdr::Encoder& out) {
                        return Serve<sm_name, sm_stat_res>(c, in, out, stat);
                      });
  dispatcher.Register(
      SM_PROG, SM_VERS, SM_MON, "SM_MON",
      [monitor](const CallContext& c, xdr::Decoder& in, xdr::Encoder& out) {
        return Serve<mon, sm_stat_res>(c, in, out, monitor);
      },
      cached);
  dispatcher.Register(
      SM_PROG, SM_VERS, SM_UNMON, "SM_UNMON",
      [unmon](const CallContext& c, xdr::Decoder& in, xdr::Encoder& out) {
        return Serve<mon_id, sm_stat>(c, in, out, unmon);
      },
      cached);
  dispatcher.Register(
      SM_PROG, SM_VERS, SM_UNMON_ALL, "SM_UNMON_ALL",
      [unmon_all](const CallContext& c, xdr::Decoder& in, xdr::Encoder& out) {
        return Serve<my_id, sm_stat>(c, in, out, unmon_all);
      },
      cached);
  dispatcher.Register(
      SM_PROG, SM_VERS, SM_SIMU_CRASH, "SM_SIMU_CRASH",
      [this](const CallContext& c, xdr::Decoder&, xdr::Encoder&) { return SimuCrashCall(c); },
      cached);
  dispatcher.Register(
      SM_PROG, SM_VERS, SM_NOTIFY, "SM_NOTIFY",
      [this](const CallContext& c, xdr::Decoder& in, xdr::Encoder&) { return NotifyCall(c, in); });
}

asio::awaitable<HandlerStatus> NsmService::SimuCrashCall(const CallContext& context) {
  co_await SimuCrash(context);
  co_return HandlerStatus::kSuccess;
}

asio::awaitable<HandlerStatus> NsmService::NotifyCall(const CallContext& context,
                                                      xdr::Decoder& in) {
  stat_chge args;
  if (!Decode(in, args)) co_return HandlerStatus::kGarbageArgs;
  Notify(context, args);
  co_return HandlerStatus::kSuccess;
}

}  // namespace nlockd::nsm
