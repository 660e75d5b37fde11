// SPDX-License-Identifier: Apache-2.0
#include "rpc/rpcbind.hpp"

#include <algorithm>
#include <charconv>

#include <asio/this_coro.hpp>
#include <spdlog/spdlog.h>
#include <strings.h>
#include <unistd.h>

#include "xdr/decoder.hpp"
#include "xdr/encoder.hpp"

namespace nlockd::rpc {

namespace {

// Bounds on what a DUMP reply may make us hold: rpcbind's own table is a few dozen entries.
constexpr uint32_t kMaxDumpEntries = 4096;
constexpr uint32_t kMaxRpcbString = 255;

bool SameNetid(std::string_view a, std::string_view b) {
  return a.size() == b.size() && strncasecmp(a.data(), b.data(), a.size()) == 0;
}

bool IsTcp(std::string_view netid) { return netid.starts_with("tcp"); }

bool Cancelled(const asio::cancellation_state& state) {
  return state.cancelled() != asio::cancellation_type::none;
}

uint16_t PortOf(const std::string& universal_address) {
  auto parsed = ParseUniversalAddress(universal_address);
  return parsed ? parsed->port : 0;
}

void EncodeRpcb(xdr::Encoder& enc, const RpcbMapping& mapping) {
  enc.U32(mapping.program);
  enc.U32(mapping.version);
  enc.String(mapping.netid);
  enc.String(mapping.address);
  enc.String(mapping.owner);
}

bool DecodeRpcb(xdr::Decoder& dec, RpcbMapping& mapping) {
  return dec.U32(mapping.program, "r_prog") && dec.U32(mapping.version, "r_vers") &&
         dec.String(mapping.netid, kMaxRpcbString, "r_netid") &&
         dec.String(mapping.address, kMaxRpcbString, "r_addr") &&
         dec.String(mapping.owner, kMaxRpcbString, "r_owner");
}

const RpcbMapping* Find(const std::vector<RpcbMapping>& table, uint32_t program, uint32_t version,
                        std::string_view netid) {
  for (const auto& mapping : table) {
    if (mapping.program == program && mapping.version == version &&
        SameNetid(mapping.netid, netid)) {
      return &mapping;
    }
  }
  return nullptr;
}

}  // namespace

std::string ToUniversalAddress(const asio::ip::address& address, uint16_t port) {
  return address.to_string() + "." + std::to_string(port >> 8) + "." + std::to_string(port & 0xff);
}

std::optional<UniversalAddress> ParseUniversalAddress(std::string_view text) {
  size_t low_dot = text.rfind('.');
  if (low_dot == std::string_view::npos || low_dot == 0) return std::nullopt;
  size_t high_dot = text.rfind('.', low_dot - 1);
  if (high_dot == std::string_view::npos) return std::nullopt;
  auto octet = [](std::string_view digits) -> std::optional<uint32_t> {
    uint32_t value = 0;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    if (ec != std::errc() || end != digits.data() + digits.size() || digits.empty() ||
        value > 255) {
      return std::nullopt;
    }
    return value;
  };
  auto high = octet(text.substr(high_dot + 1, low_dot - high_dot - 1));
  auto low = octet(text.substr(low_dot + 1));
  if (!high || !low) return std::nullopt;
  asio::error_code ec;
  auto address = asio::ip::make_address(std::string(text.substr(0, high_dot)), ec);
  if (ec) return std::nullopt;
  return UniversalAddress{address, static_cast<uint16_t>(*high << 8 | *low)};
}

std::string RpcbindOwner() { return std::to_string(geteuid()); }

asio::awaitable<std::optional<std::vector<uint8_t>>> PmapClient::Call(uint32_t procedure,
                                                                      PmapMapping mapping) {
  std::vector<uint8_t> args;
  xdr::Encoder enc(args);
  enc.U32(mapping.program);
  enc.U32(mapping.version);
  enc.U32(mapping.protocol);
  enc.U32(mapping.port);
  CallOptions options;
  options.deadline = deadline_;
  // A named target: g++ 12 copies a prvalue coroutine argument bitwise, which breaks a
  // std::string in its small-string buffer. Pass class-type arguments as lvalues or xvalues.
  CallTarget target{host_, port_, Transport::kUdp};
  CallResult result = co_await client_.Call(target, kPmapProgram, kPmapVersion, procedure,
                                            std::move(args), options);
  if (result.status != CallStatus::kOk) {
    spdlog::debug("pmap call {} to {}:{} failed: {} {}", procedure, host_, port_,
                  ToString(result.status), result.detail);
    co_return std::nullopt;
  }
  co_return std::move(result.body);
}

asio::awaitable<std::optional<uint16_t>> PmapClient::GetPort(uint32_t program, uint32_t version,
                                                             uint32_t protocol) {
  auto body = co_await Call(kPmapProcGetPort, PmapMapping{program, version, protocol, 0});
  if (!body) co_return std::nullopt;
  xdr::Decoder dec(*body);
  uint32_t port = 0;
  if (!dec.U32(port, "port") || port > UINT16_MAX) co_return std::nullopt;
  co_return static_cast<uint16_t>(port);
}

std::optional<uint16_t> PortCache::Find(const Key& key, TimePoint now) const {
  auto found = entries_.find(key);
  if (found == entries_.end() || now - found->second.stored >= max_age_) return std::nullopt;
  return found->second.port;
}

void PortCache::ForgetHost(const std::string& host) {
  auto first = entries_.lower_bound(Key{host, 0, 0, 0, 0});
  auto last = first;
  while (last != entries_.end() && last->first.host == host) ++last;
  entries_.erase(first, last);
}

void PortCache::Put(const Key& key, uint16_t port, TimePoint now) {
  if (entries_.size() >= limit_ && !entries_.contains(key)) {
    auto oldest = std::min_element(
        entries_.begin(), entries_.end(),
        [](const auto& a, const auto& b) { return a.second.stored < b.second.stored; });
    if (oldest != entries_.end()) entries_.erase(oldest);
  }
  entries_[key] = Entry{port, now};
}

asio::awaitable<std::optional<uint16_t>> CachedGetPort(PortCache& cache, Client& client,
                                                       PortCache::Key key,
                                                       std::chrono::milliseconds deadline,
                                                       bool& cached) {
  cached = false;
  if (auto port = cache.Find(key, std::chrono::steady_clock::now())) {
    cached = true;
    co_return *port;
  }
  PmapClient pmap(client, key.host, key.rpcbind_port, deadline);
  std::optional<uint16_t> port = co_await pmap.GetPort(key.program, key.version, key.protocol);
  if (port && *port != 0) cache.Put(key, *port, std::chrono::steady_clock::now());
  co_return port;
}

asio::awaitable<std::optional<bool>> PmapClient::Set(PmapMapping mapping) {
  auto body = co_await Call(kPmapProcSet, mapping);
  if (!body) co_return std::nullopt;
  xdr::Decoder dec(*body);
  bool ok = false;
  if (!dec.Bool(ok, "result")) co_return std::nullopt;
  co_return ok;
}

asio::awaitable<std::optional<bool>> PmapClient::Unset(uint32_t program, uint32_t version) {
  auto body = co_await Call(kPmapProcUnset, PmapMapping{program, version, 0, 0});
  if (!body) co_return std::nullopt;
  xdr::Decoder dec(*body);
  bool ok = false;
  if (!dec.Bool(ok, "result")) co_return std::nullopt;
  co_return ok;
}

asio::awaitable<RpcbAnswer<std::vector<uint8_t>>> RpcbClient::Call(uint32_t procedure,
                                                                   std::vector<uint8_t> args) {
  CallOptions options;
  options.deadline = deadline_;
  CallTarget target{host_, port_, Transport::kUdp};
  CallResult result = co_await client_.Call(target, kPmapProgram, kRpcbVersion4, procedure,
                                            std::move(args), options);
  RpcbAnswer<std::vector<uint8_t>> answer;
  switch (result.status) {
    case CallStatus::kOk:
      answer.outcome = RpcbOutcome::kAnswered;
      answer.value = std::move(result.body);
      co_return answer;
    case CallStatus::kTimedOut:
    case CallStatus::kUnreachable:
      answer.outcome = RpcbOutcome::kNoAnswer;
      break;
    case CallStatus::kNotSuccess:
      answer.outcome = result.accept_stat == AcceptStat::kProgMismatch ||
                               result.accept_stat == AcceptStat::kProgUnavail
                           ? RpcbOutcome::kNotSpoken
                           : RpcbOutcome::kFailed;
      break;
    case CallStatus::kRejected:
    case CallStatus::kBadReply:
      answer.outcome = RpcbOutcome::kFailed;
      break;
  }
  spdlog::debug("rpcbind v4 call {} to {}:{} failed: {} {}", procedure, host_, port_,
                ToString(result.status), result.detail);
  co_return answer;
}

asio::awaitable<RpcbAnswer<bool>> RpcbClient::Set(const RpcbMapping& mapping) {
  co_return co_await CallWithMapping(kRpcbProcSet, mapping);
}

asio::awaitable<RpcbAnswer<bool>> RpcbClient::Unset(const RpcbMapping& mapping) {
  co_return co_await CallWithMapping(kRpcbProcUnset, mapping);
}

asio::awaitable<RpcbAnswer<bool>> RpcbClient::CallWithMapping(uint32_t procedure,
                                                              const RpcbMapping& mapping) {
  std::vector<uint8_t> args;
  xdr::Encoder enc(args);
  EncodeRpcb(enc, mapping);
  auto reply = co_await Call(procedure, std::move(args));
  RpcbAnswer<bool> answer{reply.outcome, false};
  xdr::Decoder dec(reply.value);
  if (reply.outcome == RpcbOutcome::kAnswered && !dec.Bool(answer.value, "result")) {
    answer.outcome = RpcbOutcome::kFailed;
  }
  co_return answer;
}

asio::awaitable<RpcbAnswer<std::vector<RpcbMapping>>> RpcbClient::Dump() {
  auto reply = co_await Call(kRpcbProcDump, {});
  RpcbAnswer<std::vector<RpcbMapping>> answer{reply.outcome, {}};
  if (reply.outcome != RpcbOutcome::kAnswered) co_return answer;
  // rpcblist_ptr: a linked list as "more follows" booleans, each followed by an rpcb.
  xdr::Decoder dec(reply.value);
  for (;;) {
    bool more = false;
    if (!dec.Bool(more, "rpcblist_ptr")) break;
    if (!more) co_return answer;
    if (answer.value.size() >= kMaxDumpEntries) break;
    RpcbMapping mapping;
    if (!DecodeRpcb(dec, mapping)) break;
    answer.value.push_back(std::move(mapping));
  }
  spdlog::debug("rpcbind at {}:{} sent a DUMP reply that did not decode", host_, port_);
  answer.outcome = RpcbOutcome::kFailed;
  answer.value.clear();
  co_return answer;
}

asio::awaitable<bool> RpcbindRegistration::Register(
    std::vector<std::pair<uint32_t, uint32_t>> program_versions, uint16_t port) {
  RpcbindListener listener{asio::ip::address_v4::any(), port};
  co_return co_await Register(std::move(program_versions), listener);
}

asio::awaitable<bool> RpcbindRegistration::Register(
    std::vector<std::pair<uint32_t, uint32_t>> program_versions, RpcbindListener listener) {
  // The netids the listener serves, each with its universal address. A socket bound to "::"
  // takes IPv4 too (Linux's default, bindv6only=0).
  std::vector<std::pair<std::string, std::string>> netids;
  asio::ip::address address = listener.address;
  if (address.is_v6() && address.to_v6().is_v4_mapped()) {
    address = asio::ip::make_address_v4(asio::ip::v4_mapped, address.to_v6());
  }
  if (address.is_v4() || address.is_unspecified()) {
    asio::ip::address v4 = address.is_v4() ? address : asio::ip::address_v4::any();
    netids.emplace_back("tcp", ToUniversalAddress(v4, listener.port));
    netids.emplace_back("udp", ToUniversalAddress(v4, listener.port));
  }
  if (address.is_v6()) {
    netids.emplace_back("tcp6", ToUniversalAddress(address, listener.port));
    netids.emplace_back("udp6", ToUniversalAddress(address, listener.port));
  }
  std::vector<Entry> wanted;
  for (const auto& [program, version] : program_versions) {
    for (const auto& [netid, universal] : netids) {
      wanted.push_back(Entry{program, version, netid, universal, false});
    }
  }

  const asio::cancellation_state cancellation = co_await asio::this_coro::cancellation_state;
  ++active_;
  auto started = std::chrono::steady_clock::now();
  std::chrono::milliseconds delay = options_.first_retry;
  bool all = false;
  for (int attempt_number = 1; !stopping_.IsSet(); ++attempt_number) {
    Attempt attempt = co_await TryOnce(wanted);
    if (stopping_.IsSet()) break;
    if (attempt.complete) {
      size_t pairs = program_versions.size();
      std::string netid_list;
      for (const auto& [netid, universal] : netids) {
        if (attempt.protocol == "portmapper v2" && netid.ends_with('6')) continue;
        netid_list += netid_list.empty() ? netid : "," + netid;
      }
      if (attempt.held == 0) {
        spdlog::info(
            "registered {} programs with rpcbind at {} ({}, netids {}, port {}){}", pairs, Where(),
            attempt.protocol, netid_list, listener.port,
            attempt_number > 1 ? " after " + std::to_string(attempt_number) + " attempts" : "");
      } else {
        spdlog::warn(
            "registered with rpcbind at {} ({}, netids {}, port {}) except {} mappings that "
            "other processes hold",
            Where(), attempt.protocol, netid_list, listener.port, attempt.held);
      }
      all = attempt.held == 0;
      break;
    }
    auto elapsed = std::chrono::steady_clock::now() - started;
    if (elapsed + delay > options_.retry_budget) {
      spdlog::warn("not registered with rpcbind at {}: {}; gave up after {} attempts", Where(),
                   attempt.failure, attempt_number);
      break;
    }
    if (attempt_number == 1) {
      spdlog::warn("not registered with rpcbind at {}: {}; retrying for up to {:g} s", Where(),
                   attempt.failure, static_cast<double>(options_.retry_budget.count()) / 1000);
    } else {
      spdlog::debug("not registered with rpcbind at {}: {} (attempt {})", Where(), attempt.failure,
                    attempt_number);
    }
    // The retry delay, cut short by Unregister(). A cancelled calling task gives up, before
    // the delay or during it (its calls would end at once, and the retries would spin).
    if (Cancelled(cancellation)) break;
    co_await stopping_.WaitFor(delay);
    if (Cancelled(cancellation)) break;
    delay = std::min(delay * 2, options_.max_retry);
  }
  if (--active_ == 0) drained_.Set();
  co_return all;
}

asio::awaitable<RpcbindRegistration::Attempt> RpcbindRegistration::TryOnce(
    const std::vector<Entry>& wanted) {
  Attempt attempt;
  auto dump = co_await rpcb_.Dump();
  if (dump.outcome == RpcbOutcome::kAnswered) {
    attempt.protocol = "rpcbind v4";
    attempt.reached = true;
    co_await TryV4(wanted, dump.value, attempt);
    co_return attempt;
  }
  // v2 when rpcbind says it does not speak v4, or answers v2 though not v4 (a portmapper that
  // drops what it does not know).
  attempt.protocol = "portmapper v2";
  co_await TryV2(wanted, attempt);
  if (!attempt.reached) {
    attempt.failure = dump.outcome == RpcbOutcome::kNoAnswer
                          ? "nothing answers there (rpcbind v4 nor portmapper v2)"
                          : "it refused rpcbind v4 and portmapper v2 did not answer";
  }
  co_return attempt;
}

asio::awaitable<void> RpcbindRegistration::TryV4(const std::vector<Entry>& wanted,
                                                 const std::vector<RpcbMapping>& current,
                                                 Attempt& attempt) {
  size_t done = 0;
  for (const Entry& entry : wanted) {
    RpcbMapping ours{entry.program, entry.version, entry.netid, entry.address, RpcbindOwner()};
    const RpcbMapping* holder = Find(current, entry.program, entry.version, entry.netid);
    if (holder && holder->address == entry.address) {
      Remember(entry);  // Ours already (SET would answer TRUE and change nothing).
      ++done;
      continue;
    }
    if (holder) {
      // Another port is another process, or ours from before a restart on a new port.
      bool same_port = PortOf(holder->address) == PortOf(entry.address);
      if (!same_port &&
          co_await Answers(entry.program, entry.version, holder->netid, holder->address)) {
        spdlog::warn(
            "rpcbind at {}: program {} version {} {} is held by another process (owner {}, "
            "address {}) that answers there; leaving it",
            Where(), entry.program, entry.version, entry.netid, holder->owner, holder->address);
        ++attempt.held;
        ++done;
        continue;
      }
      spdlog::info("rpcbind at {}: replacing program {} version {} {} at {} (owner {}): {}",
                   Where(), entry.program, entry.version, entry.netid, holder->address,
                   holder->owner, same_port ? "our port" : "nothing answers there");
      RpcbMapping stale = *holder;
      stale.owner = RpcbindOwner();
      auto unset = co_await rpcb_.Unset(stale);
      if (unset.outcome != RpcbOutcome::kAnswered || !unset.value) {
        // rpcbind takes a mapping away only for its owner or root on its unix socket.
        attempt.failure = unset.outcome == RpcbOutcome::kAnswered
                              ? "rpcbind refused to take away the mapping of owner " + holder->owner
                              : "UNSET did not complete";
        continue;
      }
    }
    auto set = co_await rpcb_.Set(ours);
    if (set.outcome == RpcbOutcome::kAnswered && set.value) {
      Remember(entry);
      ++done;
    } else {
      attempt.failure = "SET of program " + std::to_string(entry.program) + " version " +
                        std::to_string(entry.version) + " " + entry.netid + " " +
                        (set.outcome == RpcbOutcome::kNoAnswer ? "not answered" : "refused");
    }
  }
  attempt.complete = done == wanted.size();
}

asio::awaitable<void> RpcbindRegistration::TryV2(const std::vector<Entry>& wanted,
                                                 Attempt& attempt) {
  // PMAP v2 has no tcp6/udp6; UNSET takes both protocols of a (program, version) at once.
  size_t done = 0, total = 0;
  for (size_t i = 0; i < wanted.size();) {
    uint32_t program = wanted[i].program, version = wanted[i].version;
    std::vector<const Entry*> group;
    for (; i < wanted.size() && wanted[i].program == program && wanted[i].version == version; ++i) {
      if (!wanted[i].netid.ends_with('6')) group.push_back(&wanted[i]);
    }
    total += group.size();
    uint16_t our_port = group.empty() ? 0 : PortOf(group.front()->address);
    bool stale_found = false, live_found = false;
    std::vector<uint16_t> ports;
    for (const Entry* entry : group) {
      uint32_t protocol = IsTcp(entry->netid) ? kIpProtoTcp : kIpProtoUdp;
      auto port = co_await pmap_.GetPort(program, version, protocol);
      if (!port) {
        if (attempt.reached) attempt.failure = "GETPORT did not complete";
        co_return;
      }
      attempt.reached = true;
      ports.push_back(*port);
      if (*port == 0 || *port == our_port) continue;
      std::string holder = ToUniversalAddress(asio::ip::address_v4::loopback(), *port);
      if (co_await Answers(program, version, entry->netid, holder)) {
        live_found = true;
        spdlog::warn(
            "portmapper at {}: program {} version {} {} is held by another process at port {} "
            "that answers there; leaving it",
            Where(), program, version, entry->netid, *port);
      } else {
        stale_found = true;
      }
    }
    if (stale_found && !live_found) {
      spdlog::info(
          "portmapper at {}: replacing program {} version {}: nothing answers at the "
          "port registered",
          Where(), program, version);
      if (!co_await pmap_.Unset(program, version)) {
        attempt.failure = "UNSET did not complete";
        continue;
      }
      std::fill(ports.begin(), ports.end(), 0);
    }
    for (size_t k = 0; k < group.size(); ++k) {
      const Entry& entry = *group[k];
      if (ports[k] == our_port) {
        Remember(Entry{entry.program, entry.version, entry.netid, entry.address, true});
        ++done;
        continue;
      }
      if (ports[k] != 0) {
        ++attempt.held;
        ++done;
        continue;
      }
      uint32_t protocol = IsTcp(entry.netid) ? kIpProtoTcp : kIpProtoUdp;
      auto set = co_await pmap_.Set(PmapMapping{program, version, protocol, our_port});
      if (set.value_or(false)) {
        Remember(Entry{entry.program, entry.version, entry.netid, entry.address, true});
        ++done;
      } else {
        attempt.failure = "SET of program " + std::to_string(program) + " version " +
                          std::to_string(version) + " " + entry.netid + " " +
                          (set ? "refused" : "not answered");
      }
    }
  }
  if (total < wanted.size() && attempt.reached) {
    spdlog::info("portmapper v2 at {} has no tcp6/udp6: IPv6 mappings not registered", Where());
  }
  attempt.complete = attempt.reached && done == total;
}

asio::awaitable<bool> RpcbindRegistration::Answers(uint32_t program, uint32_t version,
                                                   const std::string& netid,
                                                   const std::string& address) {
  auto parsed = ParseUniversalAddress(address);
  if (!parsed || parsed->port == 0) co_return false;
  asio::ip::address host = parsed->address;
  if (host.is_unspecified()) {
    host = host.is_v6() ? asio::ip::address(asio::ip::address_v6::loopback())
                        : asio::ip::address(asio::ip::address_v4::loopback());
  }
  CallTarget target{host.to_string(), parsed->port,
                    IsTcp(netid) ? Transport::kTcp : Transport::kUdp};
  CallOptions options;
  options.deadline = options_.probe_deadline;
  CallResult result = co_await client_.Call(target, program, version, 0, {}, options);
  // Any RPC reply means a server is there; silence or a refused connection means none.
  co_return result.status != CallStatus::kTimedOut&& result.status != CallStatus::kUnreachable;
}

void RpcbindRegistration::Remember(const Entry& entry) {
  if (std::find(registered_.begin(), registered_.end(), entry) == registered_.end()) {
    registered_.push_back(entry);
  }
}

asio::awaitable<void> RpcbindRegistration::Unregister() {
  stopping_.Set();
  // A Register() call in the middle of a SET finishes it first, so that it is taken away too
  // (each call has its deadline).
  while (active_ > 0) {
    drained_.Reset();
    co_await drained_.Wait();
  }
  std::vector<Entry> v4, v2;
  for (auto& entry : registered_) (entry.pmap ? v2 : v4).push_back(entry);
  registered_.clear();
  if (!v4.empty()) co_await UnregisterV4(v4);
  if (!v2.empty()) co_await UnregisterV2(v2);
}

asio::awaitable<void> RpcbindRegistration::UnregisterV4(const std::vector<Entry>& entries) {
  auto dump = co_await rpcb_.Dump();
  if (dump.outcome != RpcbOutcome::kAnswered) {
    spdlog::info("rpcbind at {} did not answer; our mappings stay until it restarts", Where());
    co_return;
  }
  for (const Entry& entry : entries) {
    const RpcbMapping* holder = Find(dump.value, entry.program, entry.version, entry.netid);
    if (!holder) continue;
    if (PortOf(holder->address) != PortOf(entry.address)) {
      spdlog::info(
          "rpcbind at {}: program {} version {} {} now belongs to {} (owner {}); "
          "leaving it",
          Where(), entry.program, entry.version, entry.netid, holder->address, holder->owner);
      continue;
    }
    RpcbMapping mapping{entry.program, entry.version, entry.netid, "", RpcbindOwner()};
    co_await rpcb_.Unset(mapping);
  }
}

asio::awaitable<void> RpcbindRegistration::UnregisterV2(const std::vector<Entry>& entries) {
  // UNSET takes every protocol of a (program, version): only when none names another port.
  for (size_t i = 0; i < entries.size();) {
    uint32_t program = entries[i].program, version = entries[i].version;
    uint16_t our_port = PortOf(entries[i].address);
    bool others = false;
    for (uint32_t protocol : {kIpProtoTcp, kIpProtoUdp}) {
      auto port = co_await pmap_.GetPort(program, version, protocol);
      if (!port) co_return;
      if (*port != 0 && *port != our_port) others = true;
    }
    for (; i < entries.size() && entries[i].program == program && entries[i].version == version;
         ++i) {
    }
    if (others) {
      spdlog::info("portmapper at {}: program {} version {} now names another port; leaving it",
                   Where(), program, version);
      continue;
    }
    co_await pmap_.Unset(program, version);
  }
}

}  // namespace nlockd::rpc
