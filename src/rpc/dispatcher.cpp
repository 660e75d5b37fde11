// SPDX-License-Identifier: Apache-2.0
#include "rpc/dispatcher.hpp"

#include <algorithm>
#include <exception>

#include <spdlog/spdlog.h>

#include "base/error.hpp"
#include "rpc/address.hpp"

namespace nlockd::rpc {

namespace {

std::string_view OutcomeName(HandlerStatus status) {
  switch (status) {
    case HandlerStatus::kSuccess:
      return "success";
    case HandlerStatus::kGarbageArgs:
      return "garbage_args";
    case HandlerStatus::kSystemErr:
      return "system_err";
    case HandlerStatus::kNoReply:
      return "no_reply";
  }
  return "unknown";
}

// Credentials are checked before the program is looked at (RFC 5531 §9). Sets
// `context.auth_sys` for AUTH_SYS; false for a malformed AUTH_SYS body or an unknown flavour
// (Linux's sunrpc answers an unknown flavour with AUTH_BADCRED too).
bool AcceptCredential(CallContext& context, const OpaqueAuth& cred) {
  switch (static_cast<AuthFlavor>(cred.flavor)) {
    case AuthFlavor::kNone:
      return true;
    case AuthFlavor::kSys:
      context.auth_sys = DecodeAuthSys(cred.body);
      return context.auth_sys.has_value();
    default:
      return false;
  }
}

void LogGarbageArgs(const CallContext& context, std::string_view procedure,
                    const xdr::Decoder& args) {
  spdlog::info("rpc garbage args prog={} vers={} proc={} peer={} transport={} field={} ({})",
               context.program, context.version, procedure, AddressToString(context.peer_address),
               ToString(context.transport), args.failure()->field,
               xdr::ToString(args.failure()->error));
}

// Turns the reply the handler wrote (an accepted header at `reply_start`, then its result) into
// the one `status` calls for; false when nothing is to be sent.
bool ShapeReply(HandlerStatus status, size_t reply_start, size_t body_start, xdr::Encoder& out,
                std::vector<uint8_t>& reply) {
  switch (status) {
    case HandlerStatus::kSuccess:
      return true;
    case HandlerStatus::kNoReply:
      reply.resize(reply_start);
      return false;
    case HandlerStatus::kGarbageArgs:
    case HandlerStatus::kSystemErr:
      reply.resize(body_start);
      out.PatchU32(
          reply_start + kAcceptStatOffset,
          static_cast<uint32_t>(status == HandlerStatus::kGarbageArgs ? AcceptStat::kGarbageArgs
                                                                      : AcceptStat::kSystemErr));
      return true;
  }
  return true;
}

}  // namespace

void Dispatcher::Register(uint32_t program, uint32_t version, uint32_t procedure, std::string name,
                          Handler handler, ProcedureOptions options) {
  NLOCKD_REQUIRE(!name.empty() && handler);
  auto prog_it = std::find_if(programs_.begin(), programs_.end(),
                              [&](const Program& p) { return p.program == program; });
  if (prog_it == programs_.end()) {
    programs_.push_back(Program{program, {}, version, version});
    prog_it = programs_.end() - 1;
  }
  prog_it->low_version = std::min(prog_it->low_version, version);
  prog_it->high_version = std::max(prog_it->high_version, version);
  auto vers_it = std::find_if(prog_it->versions.begin(), prog_it->versions.end(),
                              [&](const Version& v) { return v.version == version; });
  if (vers_it == prog_it->versions.end()) {
    prog_it->versions.push_back(Version{version, {}});
    vers_it = prog_it->versions.end() - 1;
  }
  NLOCKD_REQUIRE(procedure < 1024, "procedure numbers are small");
  if (vers_it->procedures.size() <= procedure) vers_it->procedures.resize(procedure + 1);
  NLOCKD_REQUIRE(vers_it->procedures[procedure].name.empty(), "procedure registered twice");
  vers_it->procedures[procedure] = Procedure{std::move(name), std::move(handler), options};
}

bool Dispatcher::Serves(uint32_t program, uint32_t version) const {
  const Program* prog = FindProgram(program);
  return prog != nullptr && std::any_of(prog->versions.begin(), prog->versions.end(),
                                        [&](const Version& v) { return v.version == version; });
}

std::vector<std::pair<uint32_t, uint32_t>> Dispatcher::ProgramVersions() const {
  std::vector<std::pair<uint32_t, uint32_t>> out;
  for (const Program& prog : programs_) {
    for (const Version& vers : prog.versions) out.emplace_back(prog.program, vers.version);
  }
  return out;
}

const Dispatcher::Program* Dispatcher::FindProgram(uint32_t program) const {
  for (const Program& prog : programs_) {
    if (prog.program == program) return &prog;
  }
  return nullptr;
}

void Dispatcher::Observe(const CallContext& context, std::string_view name,
                         std::string_view outcome,
                         std::chrono::steady_clock::time_point start) const {
  if (observer_) {
    std::string_view result =
        outcome == OutcomeName(HandlerStatus::kSuccess) ? context.result : std::string_view();
    observer_(CallRecord{context, name, outcome, std::chrono::steady_clock::now() - start, result});
  }
}

asio::awaitable<bool> Dispatcher::Dispatch(CallContext context, std::span<const uint8_t> message,
                                           std::vector<uint8_t>& reply) const {
  return Answer(std::move(context), DecodeCall(message), message.size(), reply);
}

asio::awaitable<bool> Dispatcher::Dispatch(CallContext context, const CallHeader& header,
                                           std::span<const uint8_t> args,
                                           std::vector<uint8_t>& reply) const {
  DecodedCall call;
  if (header.rpc_version != kRpcVersion) {
    call.status = CallDecodeStatus::kRpcMismatch;
  } else if (header.cred.body.size() > kMaxAuthBytes || header.verf.body.size() > kMaxAuthBytes) {
    call.status = CallDecodeStatus::kMalformed;  // As DecodeCall has it.
  } else {
    call.status = CallDecodeStatus::kOk;
  }
  call.header = header;
  call.args = args;
  return Answer(std::move(context), call, args.size(), reply);
}

Dispatcher::Route Dispatcher::Resolve(CallContext& context, const DecodedCall& call,
                                      size_t message_size, xdr::Encoder& out) const {
  context.xid = call.header.xid;
  switch (call.status) {
    case CallDecodeStatus::kNotACall:
      return {};
    case CallDecodeStatus::kMalformed:
      spdlog::debug("rpc malformed call header peer={} transport={} bytes={}",
                    AddressToString(context.peer_address), ToString(context.transport),
                    message_size);
      return {nullptr, "malformed", false};
    case CallDecodeStatus::kRpcMismatch:
      EncodeRpcMismatch(out, context.xid);
      return {nullptr, "rpc_mismatch", true};
    case CallDecodeStatus::kOk:
      break;
  }
  context.program = call.header.program;
  context.version = call.header.version;
  context.procedure = call.header.procedure;
  if (!AcceptCredential(context, call.header.cred)) {
    EncodeAuthError(out, context.xid, AuthStat::kBadCred);
    return {nullptr, "auth_error", true};
  }
  return FindProcedure(context, out);
}

Dispatcher::Route Dispatcher::FindProcedure(const CallContext& context, xdr::Encoder& out) const {
  const Program* prog = FindProgram(context.program);
  if (!context.listener_programs.empty() &&
      std::find(context.listener_programs.begin(), context.listener_programs.end(),
                context.program) == context.listener_programs.end()) {
    prog = nullptr;
  }
  if (prog == nullptr) {
    EncodeAcceptedHeader(out, context.xid, AcceptStat::kProgUnavail);
    return {nullptr, "prog_unavail", true};
  }
  auto vers_it = std::find_if(prog->versions.begin(), prog->versions.end(),
                              [&](const Version& v) { return v.version == context.version; });
  if (vers_it == prog->versions.end()) {
    EncodeProgMismatch(out, context.xid, prog->low_version, prog->high_version);
    return {nullptr, "prog_mismatch", true};
  }
  if (context.procedure >= vers_it->procedures.size() ||
      vers_it->procedures[context.procedure].name.empty()) {
    EncodeAcceptedHeader(out, context.xid, AcceptStat::kProcUnavail);
    return {nullptr, "proc_unavail", true};
  }
  return {&vers_it->procedures[context.procedure], {}, true};
}

std::optional<Dispatcher::Route> Dispatcher::BeginCached(
    const CallContext& context, const DecodedCall& call, std::vector<uint8_t>& reply,
    std::chrono::steady_clock::time_point start, std::optional<ReplyCache::Ticket>& ticket) const {
  ReplyCache::Key key{context.peer_address, context.xid,       context.program,
                      context.version,      context.procedure, ReplyCache::Checksum(call.args)};
  ReplyCache::Ticket new_ticket;
  switch (cache_->Begin(key, reply, start, new_ticket)) {
    case ReplyCache::Lookup::kInProgress:
      return Route{nullptr, "duplicate_in_progress", false};
    case ReplyCache::Lookup::kReplay:
      return Route{nullptr, "duplicate_replayed", true};
    case ReplyCache::Lookup::kNew:
      ticket = new_ticket;
      break;
  }
  return std::nullopt;
}

void Dispatcher::FinishCached(const ReplyCache::Ticket& ticket, HandlerStatus status,
                              std::span<const uint8_t> sent) const {
  // A system error may be transient (the store was down): let a retransmission try again.
  if (status == HandlerStatus::kSuccess || status == HandlerStatus::kGarbageArgs) {
    cache_->Finish(ticket, sent);
  } else {
    cache_->Abandon(ticket);
  }
}

asio::awaitable<bool> Dispatcher::Answer(CallContext context, DecodedCall call, size_t message_size,
                                         std::vector<uint8_t>& reply) const {
  auto start = std::chrono::steady_clock::now();
  xdr::Encoder out(reply);
  const Route route = Resolve(context, call, message_size, out);
  if (route.procedure == nullptr) {
    if (!route.outcome.empty()) Observe(context, "", route.outcome, start);
    co_return route.reply;
  }
  const Procedure& procedure = *route.procedure;
  std::optional<ReplyCache::Ticket> cache_ticket;
  if (cache_ != nullptr && procedure.options.cache_replies) {
    if (std::optional<Route> duplicate = BeginCached(context, call, reply, start, cache_ticket)) {
      Observe(context, procedure.name, duplicate->outcome, start);
      co_return duplicate->reply;
    }
  }

  size_t reply_start = reply.size();
  EncodeAcceptedHeader(out, context.xid, AcceptStat::kSuccess);
  size_t body_start = reply.size();
  xdr::Decoder args(call.args);
  HandlerStatus status = HandlerStatus::kSystemErr;
  try {
    status = co_await procedure.handler(context, args, out);
  } catch (const std::exception& e) {
    // A fault of the machinery (the store, an allocation) or a caller's broken contract
    // (NLOCKD_REQUIRE): this call fails, the next is served. A broken invariant of our own
    // (NLOCKD_ASSERT) never gets here: it aborts the process.
    spdlog::error("rpc handler failed prog={} vers={} proc={} peer={} xid={}: {}", context.program,
                  context.version, procedure.name, AddressToString(context.peer_address),
                  context.xid, e.what());
    status = HandlerStatus::kSystemErr;
  }
  if (status == HandlerStatus::kGarbageArgs && args.failure()) {
    LogGarbageArgs(context, procedure.name, args);
  }
  Observe(context, procedure.name, OutcomeName(status), start);
  const bool replied = ShapeReply(status, reply_start, body_start, out, reply);
  if (cache_ticket) FinishCached(*cache_ticket, status, std::span(reply).subspan(reply_start));
  co_return replied;
}

}  // namespace nlockd::rpc
