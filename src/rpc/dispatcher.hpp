// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <asio/awaitable.hpp>

#include "rpc/call_context.hpp"
#include "rpc/message.hpp"
#include "rpc/reply_cache.hpp"
#include "xdr/decoder.hpp"
#include "xdr/encoder.hpp"

namespace nlockd::rpc {

// What a procedure handler made of a call.
enum class HandlerStatus {
  kSuccess,      // The result was encoded.
  kGarbageArgs,  // The arguments did not decode (or violated a bound).
  kSystemErr,    // Something on our side failed.
  kNoReply,      // Send nothing (a retransmission already being served, say).
};

// Observes every call the dispatcher answers: metrics and logs hang off it.
struct CallRecord {
  const CallContext& context;
  std::string_view procedure_name;  // Empty when the procedure is unknown.
  std::string_view outcome;         // "success", "garbage_args", "prog_unavail", ...
  std::chrono::steady_clock::duration duration;
  // What the handler recorded in CallContext::result for a "success" outcome; empty otherwise
  // (and for handlers that record nothing).
  std::string_view result = {};
};

struct ProcedureOptions {
  // Non-idempotent procedures: answer retransmissions from the reply cache (if one is set).
  bool cache_replies = false;
};

// Routes RPC calls to procedure handlers registered by (program, version, procedure), so that
// several programs (NLM, NSM, an embedding NFS server's own) share one port. It owns the RPC
// envelope: call header checks, credentials, and every reply that is not SUCCESS.
//
// Thread safety: register everything before serving; Dispatch may then run on any thread as
// long as the handlers allow it (nlockd runs all of them on one executor).
class Dispatcher {
 public:
  // Decodes arguments from `args`, encodes the result into `result`. Handlers are awaited
  // directly by Dispatch, so the references they get outlive the call.
  using Handler = std::function<asio::awaitable<HandlerStatus>(
      const CallContext& context, xdr::Decoder& args, xdr::Encoder& result)>;
  using Observer = std::function<void(const CallRecord&)>;

  // REQUIRES: (program, version, procedure) not registered yet.
  void Register(uint32_t program, uint32_t version, uint32_t procedure, std::string name,
                Handler handler, ProcedureOptions options = {});
  void SetObserver(Observer observer) { observer_ = std::move(observer); }
  // REQUIRES: `cache` outlives the dispatcher's calls and runs on their executor.
  void SetReplyCache(ReplyCache* cache) { cache_ = cache; }

  bool Serves(uint32_t program, uint32_t version) const;
  // Every (program, version) registered, for rpcbind.
  std::vector<std::pair<uint32_t, uint32_t>> ProgramVersions() const;

  // Answers one RPC message. `transport_context` carries the transport fields (transport,
  // addresses); the call fields are filled in here. Appends the reply (without record mark)
  // to `reply`, or nothing when no reply must be sent; returns whether a reply was appended.
  // REQUIRES: `message` and `reply` outlive the awaitable.
  asio::awaitable<bool> Dispatch(CallContext transport_context, std::span<const uint8_t> message,
                                 std::vector<uint8_t>& reply) const;
  // The same for a call whose header a transport has already read (an embedding host's), so
  // that it is not encoded again to be decoded here: `header.rpc_version` is checked, the
  // credential used, the verifier ignored; `args` are the bytes after the header.
  // REQUIRES: what `header` points to, `args` and `reply` outlive the awaitable.
  asio::awaitable<bool> Dispatch(CallContext transport_context, const CallHeader& header,
                                 std::span<const uint8_t> args, std::vector<uint8_t>& reply) const;

 private:
  struct Procedure {
    std::string name;
    Handler handler;
    ProcedureOptions options;
  };
  struct Version {
    uint32_t version;
    std::vector<Procedure> procedures;  // Indexed by procedure number; empty name = none.
  };
  struct Program {
    uint32_t program;
    std::vector<Version> versions;
    uint32_t low_version;
    uint32_t high_version;
  };

  // Where a call goes: to a procedure, or nowhere, with the outcome the observer is told
  // (empty: not observed, as for a message that is not a call) and whether the refusal's
  // reply, already encoded, is sent.
  struct Route {
    const Procedure* procedure = nullptr;
    std::string_view outcome;
    bool reply = false;
  };

  // Both Dispatch forms, once the header is read. Not a coroutine of its own per form: the
  // public ones return this one's awaitable, so a call costs one coroutine frame here (the
  // steps below are plain functions).
  asio::awaitable<bool> Answer(CallContext context, DecodedCall call, size_t message_size,
                               std::vector<uint8_t>& reply) const;
  // The envelope (header, credentials) and then FindProcedure; fills in the call fields of
  // `context` and encodes the reply of a refused call into `out`.
  Route Resolve(CallContext& context, const DecodedCall& call, size_t message_size,
                xdr::Encoder& out) const;
  Route FindProcedure(const CallContext& context, xdr::Encoder& out) const;
  const Program* FindProgram(uint32_t program) const;
  // A retransmission of a cached procedure's call: the route that answers it (from the cache,
  // or not at all while the first is still running). nullopt for a new call, with its `ticket`.
  // REQUIRES: cache_ set.
  std::optional<Route> BeginCached(const CallContext& context, const DecodedCall& call,
                                   std::vector<uint8_t>& reply,
                                   std::chrono::steady_clock::time_point start,
                                   std::optional<ReplyCache::Ticket>& ticket) const;
  void FinishCached(const ReplyCache::Ticket& ticket, HandlerStatus status,
                    std::span<const uint8_t> sent) const;
  void Observe(const CallContext& context, std::string_view name, std::string_view outcome,
               std::chrono::steady_clock::time_point start) const;

  std::vector<Program> programs_;
  Observer observer_;
  ReplyCache* cache_ = nullptr;
};

}  // namespace nlockd::rpc
