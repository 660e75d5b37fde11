// SPDX-License-Identifier: Apache-2.0
// nlockd-grant-bench: N blocked waiters released at once. One holder locks a whole
// file; N client hosts (each its own UDP socket on 127.<case>.x.y) queue a blocking LOCK_MSG
// for a range of their own and get LOCK_RES BLOCKED; the holder unlocks, nlockd grants all N at
// once and calls each back with GRANTED_MSG (to the source port of its LOCK_MSG, as BSD and
// macOS clients expect, so no rpcbind is needed), which each answers with GRANTED_RES. Measured:
// time from the UNLOCK until nlockd has answered every GRANTED_RES (every grant acknowledged),
// once with every client answering and once with a share of them silent (never answering the
// GRANTED_MSG): the others must not wait for them.
//
// REQUIRES: an nlockd on --target serving NLM over UDP with its GRANTED_MSG callbacks (the
// default), and loopback addresses 127.0.0.0/8 (Linux routes them all to lo).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <CLI/CLI.hpp>
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <asio/ip/address_v4.hpp>
#include <asio/ip/udp.hpp>
#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <fmt/format.h>

#include "nlm/wire.hpp"
#include "rpc/message.hpp"
#include "rpc/rpcbind.hpp"
#include "rpc/use_tuple.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using asio::ip::udp;
using nlockd::rpc::kUseTuple;
namespace nlm = nlockd::nlm;
namespace rpc = nlockd::rpc;
namespace xdr = nlockd::xdr;

// Wakes every coroutine waiting on it; they re-check their condition.
class Signal {
 public:
  void Notify() {
    for (asio::steady_timer* timer : waiting_) timer->cancel();
  }
  // Waits until `done()` holds or `deadline` passes; returns done().
  template <typename Done>
  asio::awaitable<bool> WaitUntil(Done done, Clock::time_point deadline) {
    asio::steady_timer timer(co_await asio::this_coro::executor);
    while (!done() && Clock::now() < deadline) {
      timer.expires_at(deadline);
      waiting_.insert(&timer);
      co_await timer.async_wait(kUseTuple);
      waiting_.erase(&timer);
    }
    co_return done();
  }

 private:
  std::unordered_set<asio::steady_timer*> waiting_;
};

// One client host: a UDP socket that makes NLM calls (retransmitted until answered) and serves
// the calls nlockd makes to it (LOCK_RES, GRANTED_MSG).
class Peer {
 public:
  Peer(asio::io_context& io, udp::endpoint server, asio::ip::address_v4 address, bool silent,
       Signal& progress)
      : socket_(io, udp::endpoint(address, 0)),
        server_(server),
        silent_(silent),
        progress_(progress) {}

  // An NLM4 call to nlockd; the result body, or nullopt if no answer came in time.
  asio::awaitable<std::optional<std::vector<uint8_t>>> Call(uint32_t procedure,
                                                            std::vector<uint8_t> args);
  asio::awaitable<void> Serve();
  void Close() {
    asio::error_code ignored;
    socket_.close(ignored);
  }

  bool silent() const { return silent_; }
  uint16_t port() const;
  std::optional<nlm::nlm4_stats> lock_res;     // What LOCK_RES said.
  std::optional<Clock::time_point> called_at;  // First GRANTED_MSG (or GRANTED).
  std::optional<Clock::time_point> acked_at;   // nlockd answered our GRANTED_RES.

 private:
  struct Pending {
    explicit Pending(const asio::any_io_executor& executor)
        : timer(executor, Clock::time_point::max()) {}
    std::optional<std::vector<uint8_t>> body;
    asio::steady_timer timer;  // Cancelled when the reply arrives.
  };
  void Reply(const udp::endpoint& to, uint32_t xid, std::span<const uint8_t> body = {});
  asio::awaitable<void> Acknowledge(std::string cookie);

  udp::socket socket_;
  udp::endpoint server_;
  bool silent_;
  Signal& progress_;
  uint32_t next_xid_ = 1;
  std::unordered_map<uint32_t, std::shared_ptr<Pending>> pending_;
  bool acknowledging_ = false;
};

asio::awaitable<std::optional<std::vector<uint8_t>>> Peer::Call(uint32_t procedure,
                                                                std::vector<uint8_t> args) {
  const uint32_t xid = next_xid_++;
  std::vector<uint8_t> message;
  xdr::Encoder enc(message);
  rpc::EncodeCallHeader(enc, xid, nlm::NLM_PROG, nlm::NLM4_VERS, procedure);
  message.insert(message.end(), args.begin(), args.end());
  auto pending = std::make_shared<Pending>(socket_.get_executor());
  pending_[xid] = pending;
  // Retransmit every 500 ms for 10 s, as a client's RPC layer would over UDP.
  for (int attempt = 0; attempt < 20 && !pending->body && socket_.is_open(); ++attempt) {
    co_await socket_.async_send_to(asio::buffer(message), server_, kUseTuple);
    if (pending->body) break;  // Answered while the send was completing.
    pending->timer.expires_after(std::chrono::milliseconds(500));
    co_await pending->timer.async_wait(kUseTuple);
  }
  pending_.erase(xid);
  co_return pending->body;
}

void Peer::Reply(const udp::endpoint& to, uint32_t xid, std::span<const uint8_t> body) {
  std::vector<uint8_t> reply;
  xdr::Encoder enc(reply);
  rpc::EncodeAcceptedHeader(enc, xid, rpc::AcceptStat::kSuccess);
  reply.insert(reply.end(), body.begin(), body.end());
  asio::error_code ignored;
  socket_.send_to(asio::buffer(reply), to, 0, ignored);
}

asio::awaitable<void> Peer::Serve() {
  std::vector<uint8_t> buffer(65536);
  for (;;) {
    udp::endpoint from;
    auto [ec, n] = co_await socket_.async_receive_from(asio::buffer(buffer), from, kUseTuple);
    if (ec) co_return;
    std::span<const uint8_t> message(buffer.data(), n);
    rpc::DecodedCall call = rpc::DecodeCall(message);
    if (call.status == rpc::CallDecodeStatus::kNotACall) {
      rpc::DecodedReply reply = rpc::DecodeReply(message);
      auto it = pending_.find(reply.xid);
      if (reply.ok && it != pending_.end()) {
        it->second->body.emplace(reply.body.begin(), reply.body.end());
        it->second->timer.cancel();
      }
      continue;
    }
    if (call.status != rpc::CallDecodeStatus::kOk) continue;
    xdr::Decoder dec(call.args);
    if (call.header.procedure == nlm::NLM_LOCK_RES) {
      nlm::nlm4_res res;
      if (nlm::Decode(dec, nlm::NLM4_VERS, res)) lock_res = res.stat;
      Reply(from, call.header.xid);
      progress_.Notify();
    } else if (call.header.procedure == nlm::NLM_GRANTED_MSG) {
      if (silent_) continue;  // Gone quiet: no reply, no GRANTED_RES.
      nlm::nlm4_testargs args;
      if (!nlm::Decode(dec, nlm::NLM4_VERS, args)) continue;
      Reply(from, call.header.xid);
      if (!called_at) called_at = Clock::now();
      if (!acked_at && !acknowledging_) {
        acknowledging_ = true;
        asio::co_spawn(socket_.get_executor(), Acknowledge(std::move(args.cookie)), asio::detached);
      }
    } else if (call.header.procedure == nlm::NLM_GRANTED) {
      // The synchronous callback, sent to the port our portmapper named.
      nlm::nlm4_testargs args;
      if (!nlm::Decode(dec, nlm::NLM4_VERS, args)) continue;
      std::vector<uint8_t> body;
      xdr::Encoder res(body);
      nlm::Encode(res, nlm::NLM4_VERS, nlm::nlm4_res{std::move(args.cookie), nlm::NLM4_GRANTED});
      Reply(from, call.header.xid, body);
      if (!called_at) called_at = Clock::now();
      progress_.Notify();
    } else {
      Reply(from, call.header.xid);
    }
  }
}

uint16_t Peer::port() const { return socket_.local_endpoint().port(); }

asio::awaitable<void> Peer::Acknowledge(std::string cookie) {
  std::vector<uint8_t> args;
  xdr::Encoder enc(args);
  nlm::Encode(enc, nlm::NLM4_VERS, nlm::nlm4_res{std::move(cookie), nlm::NLM4_GRANTED});
  auto answered = co_await Call(nlm::NLM_GRANTED_RES, std::move(args));
  acknowledging_ = false;
  if (answered) acked_at = Clock::now();
  progress_.Notify();
}

nlm::nlm4_lock LockOf(const std::string& file, const std::string& host, int32_t svid,
                      uint64_t offset, uint64_t length) {
  return nlm::nlm4_lock{host, file, std::to_string(svid) + "@" + host, svid, offset, length};
}

std::vector<uint8_t> LockArgs(const nlm::nlm4_lock& lock, bool block) {
  std::vector<uint8_t> args;
  xdr::Encoder enc(args);
  nlm::Encode(enc, nlm::NLM4_VERS, nlm::nlm4_lockargs{"lock", block, true, lock, false, 1});
  return args;
}

std::vector<uint8_t> UnlockArgs(const nlm::nlm4_lock& lock) {
  std::vector<uint8_t> args;
  xdr::Encoder enc(args);
  nlm::Encode(enc, nlm::NLM4_VERS, nlm::nlm4_unlockargs{"unlock", lock});
  return args;
}

bool Granted(const std::optional<std::vector<uint8_t>>& body) {
  if (!body) return false;
  nlm::nlm4_res res;
  xdr::Decoder dec(*body);
  return nlm::Decode(dec, nlm::NLM4_VERS, res) && res.stat == nlm::NLM4_GRANTED;
}

struct CaseResult {
  bool ok = false;
  std::string error;
  size_t answering = 0;
  size_t acknowledged = 0;
  double all_acked_ms = 0;  // UNLOCK sent -> last GRANTED_RES answered.
  double p50_ms = 0, p99_ms = 0, first_call_ms = 0;
};

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

// One round: `waiters` hosts on 127.<octet>.x.y, every `silent_every`-th one silent (0: none).
asio::awaitable<void> RunCase(asio::io_context& io, udp::endpoint server, size_t waiters,
                              size_t silent_every, uint8_t octet, std::string file,
                              CaseResult& out) {
  Signal progress;
  auto address = [octet](size_t i) {
    return asio::ip::address_v4((127u << 24) | (uint32_t{octet} << 16) |
                                static_cast<uint32_t>(((i / 250) << 8) + i % 250 + 1));
  };
  Peer holder(io, server, address(waiters + 1), false, progress);
  asio::co_spawn(io, holder.Serve(), asio::detached);
  std::vector<std::unique_ptr<Peer>> peers;
  for (size_t i = 0; i < waiters; ++i) {
    const bool silent = silent_every != 0 && i % silent_every == silent_every - 1;
    peers.push_back(std::make_unique<Peer>(io, server, address(i), silent, progress));
    asio::co_spawn(io, peers.back()->Serve(), asio::detached);
  }
  auto close_all = [&] {
    holder.Close();
    for (auto& peer : peers) peer->Close();
  };
  const nlm::nlm4_lock held = LockOf(file, "holder", 1, 0, 0);
  if (!Granted(co_await holder.Call(nlm::NLM_LOCK, LockArgs(held, false)))) {
    out.error = "the holder's LOCK was not granted";
    close_all();
    co_return;
  }
  std::vector<nlm::nlm4_lock> wanted;
  for (size_t i = 0; i < waiters; ++i) {
    wanted.push_back(LockOf(file, fmt::format("waiter-{}-{}", octet, i), 1, i * 16, 16));
    // LOCK_MSG: the empty reply comes at once, the result as a LOCK_RES call.
    asio::co_spawn(io, peers[i]->Call(nlm::NLM_LOCK_MSG, LockArgs(wanted[i], true)),
                   asio::detached);
  }
  auto all_blocked = [&] {
    return std::all_of(peers.begin(), peers.end(),
                       [](const auto& p) { return p->lock_res == nlm::NLM4_BLOCKED; });
  };
  if (!co_await progress.WaitUntil(all_blocked, Clock::now() + std::chrono::seconds(30))) {
    out.error = "not every waiter got LOCK_RES BLOCKED";
    close_all();
    co_return;
  }

  const Clock::time_point released = Clock::now();
  if (!Granted(co_await holder.Call(nlm::NLM_UNLOCK, UnlockArgs(held)))) {
    out.error = "the holder's UNLOCK failed";
    close_all();
    co_return;
  }
  for (const auto& peer : peers) out.answering += peer->silent() ? 0u : 1u;
  auto answering_acked = [&] {
    return std::all_of(peers.begin(), peers.end(),
                       [](const auto& p) { return p->silent() || p->acked_at.has_value(); });
  };
  co_await progress.WaitUntil(answering_acked, released + std::chrono::seconds(60));

  std::vector<double> acked_ms;
  double first_call = 1e300;
  for (const auto& peer : peers) {
    if (peer->called_at) first_call = std::min(first_call, Ms(*peer->called_at - released));
    if (peer->acked_at) acked_ms.push_back(Ms(*peer->acked_at - released));
  }
  std::sort(acked_ms.begin(), acked_ms.end());
  out.acknowledged = acked_ms.size();
  if (!acked_ms.empty()) {
    out.all_acked_ms = acked_ms.back();
    out.p50_ms = acked_ms[acked_ms.size() / 2];
    out.p99_ms = acked_ms[std::min(acked_ms.size() - 1, acked_ms.size() * 99 / 100)];
    out.first_call_ms = first_call;
  }
  out.ok = out.acknowledged == out.answering;
  if (!out.ok) out.error = "not every answering client was acknowledged within 60 s";
  // Clean up: each waiter unlocks (which also takes back a silent client's pending grant).
  for (size_t i = 0; i < waiters; ++i) {
    co_await peers[i]->Call(nlm::NLM_UNLOCK, UnlockArgs(wanted[i]));
  }
  close_all();
}

// A client host's portmapper on ADDRESS:111 (UDP): answers PMAP GETPORT for NLM with `nlm_port`
// and counts the questions, so the bench sees how often nlockd asks.
class Portmapper {
 public:
  Portmapper(asio::io_context& io, asio::ip::address_v4 address, uint16_t nlm_port)
      : socket_(io, udp::endpoint(address, 111)), nlm_port_(nlm_port) {}
  asio::awaitable<void> Serve() {
    std::vector<uint8_t> buffer(65536);
    for (;;) {
      udp::endpoint from;
      auto [ec, n] = co_await socket_.async_receive_from(asio::buffer(buffer), from, kUseTuple);
      if (ec) co_return;
      rpc::DecodedCall call = rpc::DecodeCall(std::span<const uint8_t>(buffer.data(), n));
      if (call.status != rpc::CallDecodeStatus::kOk || call.header.program != rpc::kPmapProgram ||
          call.header.procedure != rpc::kPmapProcGetPort) {
        continue;
      }
      xdr::Decoder dec(call.args);
      uint32_t program = 0, version = 0, protocol = 0, port = 0;
      if (!dec.U32(program, "prog") || !dec.U32(version, "vers") || !dec.U32(protocol, "prot") ||
          !dec.U32(port, "port")) {
        continue;
      }
      ++getports;
      std::vector<uint8_t> reply;
      xdr::Encoder enc(reply);
      rpc::EncodeAcceptedHeader(enc, call.header.xid, rpc::AcceptStat::kSuccess);
      enc.U32(program == nlm::NLM_PROG ? nlm_port_ : 0);
      asio::error_code ignored;
      socket_.send_to(asio::buffer(reply), from, 0, ignored);
    }
  }
  void Close() {
    asio::error_code ignored;
    socket_.close(ignored);
  }
  int getports = 0;

 private:
  udp::socket socket_;
  uint16_t nlm_port_;
};

struct SerialResult {
  bool ok = false;
  std::string error;
  std::vector<double> granted_ms;  // UNLOCK sent -> GRANTED arrived at the waiter, per release.
  int getports = 0;
};

// One waiter host released `releases` times, one after another: the holder locks the file, the
// waiter asks with a blocking NLM4_LOCK (BLOCKED), the holder unlocks, nlockd calls the waiter
// back with NLM4_GRANTED at the port the waiter's portmapper (127.<octet>.0.1:111) names; then
// the waiter unlocks. Measured: UNLOCK sent -> GRANTED received, and the GETPORTs asked.
asio::awaitable<void> RunSerial(asio::io_context& io, udp::endpoint server, size_t releases,
                                uint8_t octet, std::string file, SerialResult& out) {
  Signal progress;
  const asio::ip::address_v4 waiter_address((127u << 24) | (uint32_t{octet} << 16) | 1u);
  const asio::ip::address_v4 holder_address((127u << 24) | (uint32_t{octet} << 16) | 2u);
  Peer holder(io, server, holder_address, false, progress);
  Peer waiter(io, server, waiter_address, false, progress);
  Portmapper portmapper(io, waiter_address, waiter.port());
  asio::co_spawn(io, holder.Serve(), asio::detached);
  asio::co_spawn(io, waiter.Serve(), asio::detached);
  asio::co_spawn(io, portmapper.Serve(), asio::detached);
  const nlm::nlm4_lock held = LockOf(file, "holder", 1, 0, 0);
  const nlm::nlm4_lock wanted = LockOf(file, fmt::format("waiter-{}", octet), 1, 0, 16);
  for (size_t i = 0; i < releases && out.error.empty(); ++i) {
    if (!Granted(co_await holder.Call(nlm::NLM_LOCK, LockArgs(held, false)))) {
      out.error = "the holder's LOCK was not granted";
      break;
    }
    auto blocked = co_await waiter.Call(nlm::NLM_LOCK, LockArgs(wanted, true));
    nlm::nlm4_res res;
    bool decoded = false;
    if (blocked) {
      xdr::Decoder dec(*blocked);
      decoded = nlm::Decode(dec, nlm::NLM4_VERS, res);
    }
    if (!decoded || res.stat != nlm::NLM4_BLOCKED) {
      out.error = blocked ? fmt::format("the waiter's blocking LOCK was answered {}, not BLOCKED",
                                        static_cast<int>(res.stat))
                          : std::string("the waiter's blocking LOCK was not answered");
      break;
    }
    waiter.called_at.reset();
    const Clock::time_point released = Clock::now();
    if (!Granted(co_await holder.Call(nlm::NLM_UNLOCK, UnlockArgs(held)))) {
      out.error = "the holder's UNLOCK failed";
      break;
    }
    if (!co_await progress.WaitUntil([&] { return waiter.called_at.has_value(); },
                                     released + std::chrono::seconds(10))) {
      out.error = "no GRANTED callback within 10 s";
      break;
    }
    out.granted_ms.push_back(Ms(*waiter.called_at - released));
    if (!Granted(co_await waiter.Call(nlm::NLM_UNLOCK, UnlockArgs(wanted)))) {
      out.error = "the waiter's UNLOCK failed";
    }
  }
  out.getports = portmapper.getports;
  out.ok = out.error.empty();
  holder.Close();
  waiter.Close();
  portmapper.Close();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"nlockd-grant-bench: N blocked waiters released at once"};
  std::string target = "127.0.0.1:4045";
  size_t waiters = 200;
  size_t silent_percent = 10;
  size_t rounds = 3;
  app.add_option("--target", target, "ADDR:PORT of nlockd's UDP service (default 127.0.0.1:4045)");
  app.add_option("--waiters", waiters, "blocked clients released at once (default 200)")
      ->check(CLI::Range(1, 60000));
  app.add_option("--silent-percent", silent_percent,
                 "share of clients that never answer GRANTED_MSG in the second case (default 10)")
      ->check(CLI::Range(1, 100));
  app.add_option("--rounds", rounds, "rounds of each case (default 3)");
  size_t serial = 0;
  app.add_option("--serial", serial,
                 "instead: one waiter released N times in a row, called back with NLM4_GRANTED at "
                 "the port its portmapper on 127.2.0.1:111 names (needs port 111: a private "
                 "network namespace)");
  CLI11_PARSE(app, argc, argv);
  auto colon = target.rfind(':');
  if (colon == std::string::npos) {
    std::cerr << "--target must be ADDR:PORT\n";
    return EXIT_FAILURE;
  }
  udp::endpoint server(asio::ip::make_address(target.substr(0, colon)),
                       static_cast<uint16_t>(std::stoi(target.substr(colon + 1))));
  if (serial > 0) {
    asio::io_context io(1);
    SerialResult result;
    const auto stamp = std::chrono::system_clock::now().time_since_epoch().count();
    asio::co_spawn(
        io, RunSerial(io, server, serial, 2, fmt::format("nlockd-grant-serial-{}", stamp), result),
        asio::detached);
    io.run();
    std::vector<double> sorted = result.granted_ms;
    std::sort(sorted.begin(), sorted.end());
    auto at = [&](size_t pct) {
      return sorted.empty() ? 0.0 : sorted[std::min(sorted.size() - 1, sorted.size() * pct / 100)];
    };
    double first = result.granted_ms.empty() ? 0.0 : result.granted_ms.front();
    std::cout << fmt::format(
                     "serial releases {}: UNLOCK -> GRANTED p50 {:.3f} ms, p99 {:.3f} ms, first "
                     "{:.3f} ms; GETPORTs asked {}{}",
                     result.granted_ms.size(), at(50), at(99), first, result.getports,
                     result.ok ? "" : "  FAILED: " + result.error)
              << std::endl;
    return result.ok ? EXIT_SUCCESS : EXIT_FAILURE;
  }
  const size_t silent_every = 100 / silent_percent;
  int status = EXIT_SUCCESS;
  uint8_t octet = 2;
  const auto run = std::chrono::system_clock::now().time_since_epoch().count();
  for (size_t round = 0; round < rounds; ++round) {
    for (size_t every : {size_t{0}, silent_every}) {
      asio::io_context io(1);
      CaseResult result;
      std::string file = fmt::format("nlockd-grant-bench-{}-{}", run, octet);
      asio::co_spawn(io, RunCase(io, server, waiters, every, octet, file, result), asio::detached);
      io.run();
      ++octet;  // Fresh client hosts for every case.
      std::cout << fmt::format(
                       "waiters {} silent {:>3}: all {} answering acknowledged in {:>8.1f} ms  "
                       "(p50 {:.1f} ms, p99 {:.1f} ms, first GRANTED_MSG after {:.1f} ms){}",
                       waiters, waiters - result.answering, result.answering, result.all_acked_ms,
                       result.p50_ms, result.p99_ms, result.first_call_ms,
                       result.ok ? "" : "  FAILED: " + result.error)
                << std::endl;
      if (!result.ok) status = EXIT_FAILURE;
    }
  }
  return status;
}
