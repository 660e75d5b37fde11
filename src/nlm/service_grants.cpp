// SPDX-License-Identifier: Apache-2.0
// NlmService's GRANTED callbacks: the record each blocked LOCK leaves for its callback, and the
// delivery of a grant (cookie, retries, GRANTED_RES) until it is acknowledged, refused, or
// taken back by CANCEL, UNLOCK or a host release.
#include <spdlog/spdlog.h>

#include "base/logging.hpp"
#include "nlm/service.hpp"
#include "rpc/use_tuple.hpp"

namespace nlockd::nlm {

namespace {

bool IsMsgProcedure(uint32_t procedure) {
  return procedure >= NLM_TEST_MSG && procedure <= NLM_GRANTED_MSG;
}

}  // namespace

// --- Waiter records -----------------------------------------------------------------------------

void NlmService::RememberWaiter(lock::WaiterId id, const rpc::CallContext& context,
                                const lock::LockRequest& request) {
  const std::string& host = request.owner.host.value();
  std::unique_ptr<WaiterRecord>& record = waiters_[id.value()];
  if (!record) {
    record = std::make_unique<WaiterRecord>();
    ++waiters_per_host_[host];
  } else if (record->ack) {
    return;  // Its callback runs already; a retransmitted LOCK changes nothing.
  }
  record->host = host;
  record->file = request.file;
  record->callback = ClientAddress{context.peer_address, std::nullopt, rpc::Transport::kUdp,
                                   context.local_address};
  // A _MSG over UDP is answered to its source port (as Linux clients expect); otherwise the
  // client's rpcbind names its NLM port.
  if (context.transport == rpc::Transport::kUdp && IsMsgProcedure(context.procedure)) {
    record->callback.port = context.peer_port;
  }
  record->version = context.version;
  record->caller_name = request.host_label.empty() ? host : request.host_label;
}

void NlmService::ForgetWaiters(const lock::WaiterIds& removed) {
  for (const lock::WaiterId& id : removed) DropWaiterRecord(id.value());
}

void NlmService::ForgetHostWaiters(const std::string& host) {
  if (!waiters_per_host_.contains(host)) return;
  std::vector<uint64_t> gone;
  for (const auto& [id, record] : waiters_) {
    if (record->host == host && !record->gone) gone.push_back(id);
  }
  for (uint64_t id : gone) DropWaiterRecord(id);
}

void NlmService::DropWaiterRecord(uint64_t id) {
  auto it = waiters_.find(id);
  if (it == waiters_.end()) return;
  WaiterRecord& record = *it->second;
  if (record.ack) {
    // DeliverGrant owns the record now: tell it to stop, and wake it.
    record.gone = true;
    record.ack->woken.Set();
    return;
  }
  auto count = waiters_per_host_.find(record.host);
  if (count != waiters_per_host_.end() && --count->second == 0) waiters_per_host_.erase(count);
  waiters_.erase(it);
}

bool NlmService::GrantStillPending(uint64_t id) const {
  auto it = waiters_.find(id);
  return it != waiters_.end() && !it->second->gone;
}

void NlmService::AcceptGrant(uint64_t id) {
  auto it = waiters_.find(id);
  if (it == waiters_.end() || !it->second->ack || it->second->ack->accepted) return;
  // False when the grant was taken back first (CANCEL, UNLOCK, a host release): nothing to keep.
  if (!locks_.AcknowledgeGrant(lock::WaiterId(id))) return;
  it->second->ack->accepted = true;
  ++stats_.callbacks_acknowledged;
}

// --- GRANTED callbacks ------------------------------------------------------------------------

asio::awaitable<void> NlmService::DeliverGrant(lock::WaiterGrant grant) {
  const uint64_t id = grant.id.value();
  auto found = waiters_.find(id);
  if (found != waiters_.end() && found->second->ack) co_return;  // Its callback runs already.
  if (found == waiters_.end() || found->second->gone) {
    // No request to answer (its waiter is gone, or was never NLM's): nobody to call back.
    // RevokeGrant does nothing if the owner already settled the grant.
    DropWaiterRecord(id);
    RevokeUnaccepted(grant);
    co_return;
  }
  WaiterRecord& record = *found->second;
  record.ack = std::make_shared<GrantAck>(executor_);
  do {
    record.cookie = cookies_.Next();
  } while (!waiter_by_cookie_.emplace(record.cookie, id).second);
  // The record outlives this coroutine's waits (only this coroutine erases it), but its map
  // may rehash: keep what the loop needs.
  std::shared_ptr<GrantAck> ack = record.ack;
  const ClientAddress client = record.callback;
  const uint32_t version = record.version;
  const std::string host = record.host;

  nlm4_testargs args;
  args.cookie = record.cookie;
  args.exclusive = grant.type == lock::LockType::kExclusive;
  args.alock.caller_name = record.caller_name;
  args.alock.fh = grant.file.value();
  args.alock.oh = grant.owner.oh.value();
  args.alock.svid = grant.owner.svid;
  args.alock.l_offset = grant.range.offset();
  args.alock.l_len = grant.range.length();
  std::vector<uint8_t> body;
  xdr::Encoder enc(body);
  Encode(enc, version, args);

  bool refused = false;
  std::optional<nlm4_stats> answer;
  for (int attempt = 1; attempt <= options_.callback_attempts && !gate_.closed(); ++attempt) {
    if (ack->accepted || !GrantStillPending(id)) break;
    answer.reset();
    ++stats_.callbacks_sent;
    if (options_.granted_msg) {
      ack->stat.reset();
      ack->awaiting_res = true;
      rpc::CallResult sent =
          co_await caller_.Call(client, version, NLM_GRANTED_MSG, body, options_.callback_deadline);
      // Not after Shutdown() woke the callbacks: a new wait would outlast its drain.
      if (sent.status == rpc::CallStatus::kOk && !ack->stat && GrantStillPending(id) &&
          !gate_.closed()) {
        ack->woken.Reset();
        co_await ack->woken.WaitFor(options_.callback_deadline);
      }
      ack->awaiting_res = false;
      answer = ack->stat;
    } else {
      rpc::CallResult result =
          co_await caller_.Call(client, version, NLM_GRANTED, body, options_.callback_deadline);
      if (result.status == rpc::CallStatus::kOk) {
        nlm4_res res;
        xdr::Decoder dec(result.body);
        if (Decode(dec, version, res)) answer = res.stat;
        if (answer == NLM4_GRANTED) AcceptGrant(id);
      }
    }
    // Accepted (AcceptGrant settled it), or accepted too late to keep: done either way.
    if (ack->accepted || answer == NLM4_GRANTED || !GrantStillPending(id)) break;
    if (answer && answer != NLM4_DENIED_GRACE_PERIOD) {  // The client refused the lock.
      refused = true;
      break;
    }
    // No answer, or the client is in its own grace period: try again later.
    if (attempt < options_.callback_attempts) {
      ack->woken.Reset();
      co_await ack->woken.WaitFor(options_.callback_retry_delay);
    }
  }
  // Not accepted yet an answer of GRANTED: the grant was taken back before the answer came.
  const bool pending = !ack->accepted && answer != NLM4_GRANTED && GrantStillPending(id);
  waiter_by_cookie_.erase(waiters_.at(id)->cookie);
  waiters_.at(id)->ack.reset();
  DropWaiterRecord(id);
  // Accepted, or CANCEL, UNLOCK or FREE_ALL took the grant back already.
  if (!pending) co_return;
  if (gate_.closed()) co_return;
  if (refused) {
    ++stats_.callbacks_refused;
    callback_log_.Log(spdlog::level::info,
                      "nlm GRANTED callback refused by host={}; revoking the grant",
                      LogValue(host));
  } else {
    ++stats_.callbacks_failed;
    callback_log_.Log(spdlog::level::info,
                      "nlm GRANTED callback to host={} not acknowledged; revoking the grant",
                      LogValue(host));
  }
  RevokeUnaccepted(grant);
}

}  // namespace nlockd::nlm
