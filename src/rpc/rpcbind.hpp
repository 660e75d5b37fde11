#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <asio/awaitable.hpp>

#include "rpc/client.hpp"

// The portmapper, PMAP version 2 (RFC 1833 §3): how peers find our ports and we find theirs.
namespace nlockd::rpc {

inline constexpr uint32_t kPmapProgram = 100000;
inline constexpr uint32_t kPmapVersion = 2;
inline constexpr uint16_t kPmapPort = 111;
inline constexpr uint32_t kIpProtoTcp = 6;
inline constexpr uint32_t kIpProtoUdp = 17;

enum PmapProc : uint32_t {
  kPmapProcNull = 0,
  kPmapProcSet = 1,
  kPmapProcUnset = 2,
  kPmapProcGetPort = 3,
};

struct PmapMapping {
  uint32_t program = 0;
  uint32_t version = 0;
  uint32_t protocol = 0;  // kIpProtoTcp or kIpProtoUdp.
  uint32_t port = 0;
};

// PMAP calls to the portmapper of `host` (UDP, as libtirpc's pmap_getport does).
class PmapClient {
 public:
  PmapClient(Client& client, std::string host, uint16_t port = kPmapPort,
             std::chrono::milliseconds deadline = std::chrono::milliseconds(2000))
      : client_(client), host_(std::move(host)), port_(port), deadline_(deadline) {}

  // The port, 0 when the program is not registered, nullopt when the portmapper did not answer.
  asio::awaitable<std::optional<uint16_t>> GetPort(uint32_t program, uint32_t version,
                                                   uint32_t protocol);
  // nullopt when the portmapper did not answer, else its boolean answer.
  asio::awaitable<std::optional<bool>> Set(PmapMapping mapping);
  asio::awaitable<std::optional<bool>> Unset(uint32_t program, uint32_t version);

 private:
  asio::awaitable<std::optional<std::vector<uint8_t>>> Call(uint32_t procedure,
                                                            PmapMapping mapping);

  Client& client_;
  std::string host_;
  uint16_t port_;
  std::chrono::milliseconds deadline_;
};

// Registers our (program, version) pairs on TCP and UDP with the local portmapper, and takes
// them away again. Without a portmapper nlockd runs on; it just logs that nobody can find it.
class RpcbindRegistration {
 public:
  RpcbindRegistration(Client& client, std::string host = "127.0.0.1", uint16_t port = kPmapPort)
      : pmap_(client, std::move(host), port) {}

  // Returns whether every pair was registered.
  asio::awaitable<bool> Register(std::vector<std::pair<uint32_t, uint32_t>> program_versions,
                                 uint16_t port);
  asio::awaitable<void> Unregister();

 private:
  PmapClient pmap_;
  std::vector<std::pair<uint32_t, uint32_t>> registered_;
};

}  // namespace nlockd::rpc
