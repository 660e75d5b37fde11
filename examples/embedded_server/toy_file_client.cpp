// toy_file_client: calls the toy file service of embedded_server over UDP.
//   toy_file_client SERVER PORT lookup|remove NAME
// Prints "fh=<handle>" for lookup, "released=<lock owners>" for remove; exit 0 on a reply.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "toy_file_service.hpp"
#include "xdr_lite.hpp"

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: toy_file_client SERVER PORT lookup|remove NAME\n");
    return 1;
  }
  const std::string verb = argv[3];
  const uint32_t procedure = verb == "lookup" ? example::kLookup : example::kRemove;
  std::vector<uint8_t> call;
  example::XdrWriter w(call);
  const uint32_t xid = static_cast<uint32_t>(getpid());
  for (uint32_t word :
       {xid, 0U, 2U, example::kFileProgram, example::kFileVersion, procedure, 0U, 0U, 0U, 0U}) {
    w.U32(word);
  }
  w.String(argv[4]);

  sockaddr_in server{};
  server.sin_family = AF_INET;
  server.sin_port = htons(static_cast<uint16_t>(std::stoul(argv[2])));
  if (inet_pton(AF_INET, argv[1], &server.sin_addr) != 1) return 1;
  int fd = socket(AF_INET, SOCK_DGRAM, 0);
  timeval timeout{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  for (int attempt = 0; attempt < 3; ++attempt) {
    sendto(fd, call.data(), call.size(), 0, reinterpret_cast<sockaddr*>(&server), sizeof server);
    uint8_t buffer[2048];
    ssize_t n = recv(fd, buffer, sizeof buffer, 0);
    if (n <= 0) continue;
    example::XdrReader in({buffer, static_cast<size_t>(n)});
    // xid, REPLY, MSG_ACCEPTED, verifier (flavor, empty body), accept_stat
    auto reply_xid = in.U32();
    in.U32();
    in.U32();
    in.U32();
    in.Opaque(400);
    auto stat = in.U32();
    if (!reply_xid || *reply_xid != xid || !stat || *stat != 0) continue;
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
