// SPDX-License-Identifier: Apache-2.0
// toy_file_client: calls the toy file service of embedded_server.
//   toy_file_client SERVER PORT lookup|remove NAME
//   toy_file_client SERVER PORT pipeline COUNT
// lookup and remove go over UDP and print "fh=<handle>" or "released=<lock owners>". pipeline
// sends COUNT LOOKUPs (of "file-<i>") on one TCP connection without waiting for replies, reads
// nothing until the server stops taking them (or all are sent), then reads every reply while
// sending the rest; it prints "replies=<n> sent_before_reading=<m> of <bytes>" once each call got
// its one
// correct reply ("of <bytes>": all calls' bytes; a server that stops reading at a limit of calls
// in flight takes far fewer before the client reads). Exit 0 on success.
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "toy_file_service.hpp"
#include "xdr_lite.hpp"

namespace {

// A call of `procedure` with `xid` and AUTH_NONE, its argument the string `name`.
std::vector<uint8_t> Call(uint32_t xid, uint32_t procedure, const std::string& name) {
  std::vector<uint8_t> call;
  example::XdrWriter w(call);
  for (uint32_t word :
       {xid, 0U, 2U, example::kFileProgram, example::kFileVersion, procedure, 0U, 0U, 0U, 0U}) {
    w.U32(word);
  }
  w.String(name);
  return call;
}

// Reads an accepted reply's header; returns its xid if it is a SUCCESS, leaving `in` at the
// results.
std::optional<uint32_t> SuccessXid(example::XdrReader& in) {
  // xid, REPLY, MSG_ACCEPTED, verifier (flavor, empty body), accept_stat
  auto xid = in.U32();
  in.U32();
  in.U32();
  in.U32();
  in.Opaque(400);
  auto stat = in.U32();
  if (!xid || !stat || *stat != 0) return std::nullopt;
  return xid;
}

sockaddr_in ServerAddress(const char* address, const char* port) {
  sockaddr_in server{};
  server.sin_family = AF_INET;
  server.sin_port = htons(static_cast<uint16_t>(std::stoul(port)));
  if (inet_pton(AF_INET, address, &server.sin_addr) != 1) server.sin_family = AF_UNSPEC;
  return server;
}

int Single(const sockaddr_in& server, uint32_t procedure, const std::string& name) {
  const uint32_t xid = static_cast<uint32_t>(getpid());
  const std::vector<uint8_t> call = Call(xid, procedure, name);
  int fd = socket(AF_INET, SOCK_DGRAM, 0);
  timeval timeout{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  for (int attempt = 0; attempt < 3; ++attempt) {
    sendto(fd, call.data(), call.size(), 0, reinterpret_cast<const sockaddr*>(&server),
           sizeof server);
    uint8_t buffer[2048];
    ssize_t n = recv(fd, buffer, sizeof buffer, 0);
    if (n <= 0) continue;
    example::XdrReader in({buffer, static_cast<size_t>(n)});
    auto reply_xid = SuccessXid(in);
    if (!reply_xid || *reply_xid != xid) continue;
    if (procedure == example::kLookup) {
      auto fh = in.Opaque(64);
      if (!fh) return 2;
      std::printf("fh=%s\n", std::string(fh->begin(), fh->end()).c_str());
    } else {
      auto released = in.U32();
      if (!released) return 2;
      std::printf("released=%u\n", *released);
    }
    close(fd);
    return 0;
  }
  close(fd);
  std::printf("no reply\n");
  return 2;
}

// Checks the replies in `in` (record-marked), taking whole records out; false on a wrong one.
bool TakeReplies(std::vector<uint8_t>& in, std::vector<bool>& answered, size_t& replies) {
  size_t used = 0;
  while (in.size() - used >= 4) {
    const uint8_t* m = in.data() + used;
    const uint32_t mark =
        (uint32_t{m[0]} << 24) | (uint32_t{m[1]} << 16) | (uint32_t{m[2]} << 8) | m[3];
    const size_t length = mark & 0x7fffffffU;
    if ((mark & 0x80000000U) == 0 || length > 4096) return false;  // The server sends one each.
    if (in.size() - used - 4 < length) break;
    example::XdrReader reply({in.data() + used + 4, length});
    used += 4 + length;
    auto xid = SuccessXid(reply);
    if (!xid || *xid >= answered.size() || answered[*xid]) return false;
    auto fh = reply.Opaque(64);
    if (!fh || std::string(fh->begin(), fh->end()) !=
                   example::FileHandleOf("file-" + std::to_string(*xid))) {
      return false;
    }
    answered[*xid] = true;
    ++replies;
  }
  in.erase(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(used));
  return true;
}

int Pipeline(const sockaddr_in& server, size_t count) {
  std::vector<uint8_t> out;
  for (size_t i = 0; i < count; ++i) {
    const std::vector<uint8_t> call =
        Call(static_cast<uint32_t>(i), example::kLookup, "file-" + std::to_string(i));
    example::XdrWriter(out).U32(0x80000000U | static_cast<uint32_t>(call.size()));
    out.insert(out.end(), call.begin(), call.end());
  }
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  // Small fixed buffers on our side, so that what the kernel holds for us stays small next to
  // what the server would hold if it read without limit.
  const int buffer_size = 64 * 1024;
  setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buffer_size, sizeof buffer_size);
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buffer_size, sizeof buffer_size);
  if (connect(fd, reinterpret_cast<const sockaddr*>(&server), sizeof server) != 0) {
    std::printf("connect: %s\n", std::strerror(errno));
    return 2;
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  std::vector<bool> answered(count);
  std::vector<uint8_t> in;
  size_t sent = 0;
  size_t replies = 0;
  size_t sent_before_reading = 0;
  bool reading = false;
  while (replies < count) {
    pollfd p{fd, static_cast<short>((sent < out.size() ? POLLOUT : 0) | (reading ? POLLIN : 0)), 0};
    // Not reading yet: 200 ms without room to send means the server stopped taking calls.
    const int ready = poll(&p, 1, reading ? 5000 : 200);
    if (ready < 0) return 2;
    if (ready == 0) {
      if (reading) {
        std::printf("stalled: replies=%zu sent=%zu of %zu bytes\n", replies, sent, out.size());
        return 2;
      }
      reading = true;  // The server stopped taking calls: read from now on.
      sent_before_reading = sent;
      continue;
    }
    if ((p.revents & POLLOUT) != 0) {
      const ssize_t n = send(fd, out.data() + sent, out.size() - sent, MSG_DONTWAIT);
      if (n > 0) sent += static_cast<size_t>(n);
      if (sent == out.size() && !reading) {
        reading = true;
        sent_before_reading = sent;
      }
    }
    if ((p.revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
      uint8_t buffer[65536];
      const ssize_t n = recv(fd, buffer, sizeof buffer, MSG_DONTWAIT);
      if (n == 0 || (n < 0 && errno != EAGAIN)) {
        std::printf("closed: replies=%zu\n", replies);
        return 2;
      }
      if (n > 0) in.insert(in.end(), buffer, buffer + n);
      if (!TakeReplies(in, answered, replies)) {
        std::printf("bad reply after %zu\n", replies);
        return 2;
      }
    }
  }
  close(fd);
  std::printf("replies=%zu sent_before_reading=%zu of %zu bytes\n", replies, sent_before_reading,
              out.size());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr,
                 "usage: toy_file_client SERVER PORT lookup|remove NAME\n"
                 "       toy_file_client SERVER PORT pipeline COUNT\n");
    return 1;
  }
  const sockaddr_in server = ServerAddress(argv[1], argv[2]);
  if (server.sin_family != AF_INET) return 1;
  const std::string verb = argv[3];
  if (verb == "pipeline") return Pipeline(server, std::stoul(argv[4]));
  return Single(server, verb == "lookup" ? example::kLookup : example::kRemove, argv[4]);
}
