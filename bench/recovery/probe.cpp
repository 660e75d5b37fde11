// SPDX-License-Identifier: Apache-2.0
// nlockd-recovery-probe: a client host that wants its first lock as soon as the server can
// give it. From the moment it starts it asks the server's rpcbind for NLM 4 over UDP (PMAP
// GETPORT) and, once a port is known, sends NLM4 LOCK (non-blocking) until GRANTED, every
// --poll-us; a lost or refused call sends it back to rpcbind. Prints one line when granted:
//   granted at_us=<CLOCK_REALTIME µs> port_at_us=<first nonzero GETPORT> getports=N locks=N
//           last_denial=<stat or none>
// and exits 0; exits 1 if not granted within --timeout-ms.
// The timestamps are wall-clock so that the calling script can subtract the exec time of the
// nlockd it started.
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "xdr/decoder.hpp"
#include "xdr/encoder.hpp"

namespace {

constexpr uint32_t kPmapProg = 100000, kNlmProg = 100021;

int64_t RealtimeMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// One UDP call on a connected socket: the result words after an accepted SUCCESS reply header
// (AUTH_NONE verifier), or nullopt on silence within `wait`, a refused port or another reply.
std::optional<std::vector<uint8_t>> Call(const std::string& host, uint16_t port, uint32_t prog,
                                         uint32_t vers, uint32_t proc,
                                         const std::vector<uint8_t>& args,
                                         std::chrono::milliseconds wait) {
  static uint32_t xid = static_cast<uint32_t>(::getpid()) << 16;
  int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(port);
  ::inet_pton(AF_INET, host.c_str(), &to.sin_addr);
  std::optional<std::vector<uint8_t>> result;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) == 0) {
    std::vector<uint8_t> call;
    nlockd::xdr::Encoder out(call);
    const uint32_t id = ++xid;
    // xid, CALL, RPC version 2, program, version, procedure, AUTH_NONE credential and verifier.
    for (uint32_t word : {id, 0u, 2u, prog, vers, proc, 0u, 0u, 0u, 0u}) out.U32(word);
    call.insert(call.end(), args.begin(), args.end());
    if (::send(fd, call.data(), call.size(), 0) > 0) {
      auto deadline = std::chrono::steady_clock::now() + wait;
      for (;;) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            deadline - std::chrono::steady_clock::now());
        pollfd pfd{fd, POLLIN, 0};
        if (left.count() <= 0 || ::poll(&pfd, 1, static_cast<int>(left.count())) <= 0) break;
        uint8_t buffer[2048];
        ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
        if (n < 0) break;  // ECONNREFUSED: nothing listens there (yet).
        // xid, REPLY, MSG_ACCEPTED, verifier (flavor, length 0), SUCCESS
        nlockd::xdr::Decoder in(std::span<const uint8_t>(buffer, static_cast<size_t>(n)));
        uint32_t header[6];
        bool ok = true;
        for (uint32_t& word : header) ok = ok && in.U32(word, "reply header");
        if (!ok || header[0] != id || header[1] != 1 || header[2] != 0 || header[4] != 0 ||
            header[5] != 0) {
          continue;
        }
        result.emplace(buffer + 24, buffer + n);
        break;
      }
    }
  }
  ::close(fd);
  return result;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"nlockd-recovery-probe: first NLM4 LOCK granted, as soon as possible"};
  std::string server, caller = "probe", fh = "probe-file";
  int poll_us = 500, timeout_ms = 20'000;
  uint64_t offset = 0, length = 1;
  int32_t svid = 4242, state = 1;
  app.add_option("--server", server, "the server's IPv4 address")->required();
  app.add_option("--caller", caller, "caller_name");
  app.add_option("--fh", fh, "file handle");
  app.add_option("--offset", offset);
  app.add_option("--length", length);
  app.add_option("--svid", svid);
  app.add_option("--state", state, "the client's NSM state (lockargs.state)");
  app.add_option("--poll-us", poll_us, "pause between tries (500 µs)");
  app.add_option("--timeout-ms", timeout_ms, "give up after (20,000 ms)");
  CLI11_PARSE(app, argc, argv);

  const auto pause = std::chrono::microseconds(poll_us);
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  const std::chrono::milliseconds wait(20);
  uint16_t port = 0;
  int64_t port_at = 0;
  int getports = 0, locks = 0;
  std::string last_denial = "none";
  const std::string oh = std::to_string(svid) + "@" + caller;
  while (std::chrono::steady_clock::now() < give_up) {
    if (port == 0) {
      ++getports;
      std::vector<uint8_t> args;
      nlockd::xdr::Encoder out(args);
      for (uint32_t word : {kNlmProg, 4u, 17u, 0u}) out.U32(word);  // mapping: NLM 4, UDP
      auto reply = Call(server, 111, kPmapProg, 2, 3, args, wait);
      uint32_t found = 0;
      if (reply && nlockd::xdr::Decoder(*reply).U32(found, "port") && found != 0) {
        port = static_cast<uint16_t>(found);
        if (port_at == 0) port_at = RealtimeMicros();
      } else {
        std::this_thread::sleep_for(pause);
        continue;
      }
    }
    ++locks;
    std::vector<uint8_t> args;
    nlockd::xdr::Encoder out(args);
    out.Opaque(std::string_view("probe"));  // cookie
    out.Bool(false);                        // block
    out.Bool(true);                         // exclusive
    for (const std::string& text : {caller, fh, oh}) out.Opaque(std::string_view(text));
    out.I32(svid);
    out.U64(offset);
    out.U64(length);
    out.Bool(false);  // reclaim
    out.I32(state);
    auto reply = Call(server, port, kNlmProg, 4, 2, args, wait);
    if (!reply) {
      port = 0;  // Not (yet) served there: ask rpcbind again.
      std::this_thread::sleep_for(pause);
      continue;
    }
    // nlm4_res: cookie (opaque<>), stat.
    nlockd::xdr::Decoder in(*reply);
    std::string cookie;
    uint32_t stat = 0;
    if (in.Opaque(cookie, 1024, "cookie") && in.U32(stat, "stat")) {
      if (stat == 0) {
        std::cout << "granted at_us=" << RealtimeMicros() << " port_at_us=" << port_at
                  << " getports=" << getports << " locks=" << locks
                  << " last_denial=" << last_denial << std::endl;
        return EXIT_SUCCESS;
      }
      last_denial = std::to_string(stat);
    }
    std::this_thread::sleep_for(pause);
  }
  std::cout << "not granted getports=" << getports << " locks=" << locks
            << " last_denial=" << last_denial << std::endl;
  return EXIT_FAILURE;
}
