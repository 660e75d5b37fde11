// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <asio/awaitable.hpp>
#include <asio/ip/address.hpp>

#include "rpc/client.hpp"
#include "rpc/event.hpp"

// The portmapper (PMAP version 2) and rpcbind (versions 3 and 4), RFC 1833: how peers find our
// ports and we find theirs.
namespace nlockd::rpc {

inline constexpr uint32_t kPmapProgram = 100000;
inline constexpr uint32_t kPmapVersion = 2;
inline constexpr uint32_t kRpcbVersion4 = 4;
inline constexpr uint16_t kPmapPort = 111;
inline constexpr uint32_t kIpProtoTcp = 6;
inline constexpr uint32_t kIpProtoUdp = 17;

enum PmapProc : uint32_t {
  kPmapProcNull = 0,
  kPmapProcSet = 1,
  kPmapProcUnset = 2,
  kPmapProcGetPort = 3,
};

// RPCBPROC_* of versions 3 and 4 (RFC 1833 §2.2.1): the same numbers as PMAP's for SET/UNSET.
enum RpcbProc : uint32_t {
  kRpcbProcSet = 1,
  kRpcbProcUnset = 2,
  kRpcbProcGetAddr = 3,
  kRpcbProcDump = 4,
};

struct PmapMapping {
  uint32_t program = 0;
  uint32_t version = 0;
  uint32_t protocol = 0;  // kIpProtoTcp or kIpProtoUdp.
  uint32_t port = 0;
};

// struct rpcb (RFC 1833 §2.1): `address` is a universal address, `netid` "tcp", "udp", "tcp6"
// or "udp6". rpcbind records its own idea of the caller as the owner, not the one sent.
struct RpcbMapping {
  uint32_t program = 0;
  uint32_t version = 0;
  std::string netid;
  std::string address;
  std::string owner;
};

// Universal addresses (RFC 5665 §5.2.3): "h1.h2.h3.h4.p1.p2", IPv6 "x:y::z.p1.p2".
std::string ToUniversalAddress(const asio::ip::address& address, uint16_t port);
struct UniversalAddress {
  asio::ip::address address;
  uint16_t port = 0;
};
std::optional<UniversalAddress> ParseUniversalAddress(std::string_view text);

// What rpcbind's own clients send as r_owner: the effective uid in decimal. rpcbind ignores it
// and records "superuser" or the uid for callers on its unix socket, "unknown" over IP.
std::string RpcbindOwner();

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

// Ports found through portmappers, so that a callback does not pay a GETPORT round trip each
// time. An entry is kept until a call to its port fails (the caller says so with Forget) or it
// is `max_age` old, so a registrant that restarted on another port is found again. At most
// `limit` entries (the oldest goes first): a flood of client hosts cannot grow it without end.
// Not thread-safe: one executor uses it.
class PortCache {
 public:
  struct Key {
    std::string host;  // the portmapper's host (the registrant's)
    uint16_t rpcbind_port = kPmapPort;
    uint32_t program = 0;
    uint32_t version = 0;
    uint32_t protocol = kIpProtoUdp;
    auto operator<=>(const Key&) const = default;
  };
  using TimePoint = std::chrono::steady_clock::time_point;

  explicit PortCache(size_t limit = 4096,
                     std::chrono::milliseconds max_age = std::chrono::minutes(5))
      : limit_(limit), max_age_(max_age) {}

  std::optional<uint16_t> Find(const Key& key, TimePoint now) const;
  // REQUIRES: port != 0 (an unregistered program is asked again next time).
  void Put(const Key& key, uint16_t port, TimePoint now);
  void Forget(const Key& key) { entries_.erase(key); }
  // Drops every entry learnt from the portmapper on `host` (a host that rebooted).
  void ForgetHost(const std::string& host);
  size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    uint16_t port = 0;
    TimePoint stored;
  };
  size_t limit_;
  std::chrono::milliseconds max_age_;
  std::map<Key, Entry> entries_;
};

// PMAP GETPORT through `cache`: the cached port when there is one (`cached` set to true), else
// the portmapper's answer (stored when nonzero). nullopt when the portmapper did not answer.
asio::awaitable<std::optional<uint16_t>> CachedGetPort(PortCache& cache, Client& client,
                                                       PortCache::Key key,
                                                       std::chrono::milliseconds deadline,
                                                       bool& cached);

// How an rpcbind v4 call ended.
enum class RpcbOutcome {
  kAnswered,
  kNoAnswer,   // Nothing answered (down, or not there yet).
  kNotSpoken,  // An answer, but not v4: PROG_MISMATCH or PROG_UNAVAIL (a v2 portmapper).
  kFailed,     // Refused (AUTH_ERROR, other accept errors) or a reply that did not decode.
};

template <typename T>
struct RpcbAnswer {
  RpcbOutcome outcome = RpcbOutcome::kNoAnswer;
  T value{};
};

// rpcbind version 4 calls to `host` over UDP.
class RpcbClient {
 public:
  RpcbClient(Client& client, std::string host, uint16_t port = kPmapPort,
             std::chrono::milliseconds deadline = std::chrono::milliseconds(2000))
      : client_(client), host_(std::move(host)), port_(port), deadline_(deadline) {}

  asio::awaitable<RpcbAnswer<bool>> Set(const RpcbMapping& mapping);
  // Takes (program, version, netid) away; an empty netid means every netid.
  asio::awaitable<RpcbAnswer<bool>> Unset(const RpcbMapping& mapping);
  // Every mapping, with the owner rpcbind recorded.
  asio::awaitable<RpcbAnswer<std::vector<RpcbMapping>>> Dump();

 private:
  asio::awaitable<RpcbAnswer<std::vector<uint8_t>>> Call(uint32_t procedure,
                                                         std::vector<uint8_t> args);
  // SET and UNSET: an rpcb argument, a boolean result.
  asio::awaitable<RpcbAnswer<bool>> CallWithMapping(uint32_t procedure, const RpcbMapping& mapping);

  Client& client_;
  std::string host_;
  uint16_t port_;
  std::chrono::milliseconds deadline_;
};

struct RpcbindOptions {
  std::chrono::milliseconds call_deadline{2000};
  // A NULL call to the port another process registered: does it still serve there?
  std::chrono::milliseconds probe_deadline{1000};
  // While rpcbind does not answer (or refuses): retry after `first_retry`, doubling up to
  // `max_retry`, and give up once `retry_budget` has passed since the first attempt.
  std::chrono::milliseconds first_retry{1000};
  std::chrono::milliseconds max_retry{15000};
  std::chrono::milliseconds retry_budget{60000};
};

// Where the programs are served: `address` is the listen address. An IPv4 address is
// registered as tcp and udp; "::" (dual stack) as tcp, udp, tcp6 and udp6; another IPv6
// address as tcp6 and udp6.
struct RpcbindListener {
  asio::ip::address address;
  uint16_t port = 0;
};

// Registers our (program, version) pairs with the local rpcbind (v4, or the v2 portmapper when
// rpcbind does not speak v4), and takes them away again. A mapping that another live process
// holds is left alone (a NULL call to its port decides whether it still lives; a holder that
// does not answer is stale and replaced), and at shutdown only mappings that still point at our
// port are taken away. Without an rpcbind nlockd runs on, retrying for a while.
// Runs on the executor of the coroutines that call it; `client` must outlive this object.
class RpcbindRegistration {
 public:
  RpcbindRegistration(Client& client, std::string host = "127.0.0.1", uint16_t port = kPmapPort,
                      RpcbindOptions options = {})
      : client_(client),
        host_(std::move(host)),
        port_(port),
        options_(options),
        rpcb_(client, host_, port, options.call_deadline),
        pmap_(client, host_, port, options.call_deadline),
        stopping_(client.executor()),
        drained_(client.executor()) {}

  // Returns once every pair is registered (true), or once the retries are given up, another
  // process holds a mapping, or Unregister() began (false). May be called once per listener.
  asio::awaitable<bool> Register(std::vector<std::pair<uint32_t, uint32_t>> program_versions,
                                 RpcbindListener listener);
  // The same for an IPv4 wildcard listener ("0.0.0.0": tcp and udp only).
  asio::awaitable<bool> Register(std::vector<std::pair<uint32_t, uint32_t>> program_versions,
                                 uint16_t port);
  // Stops registering (a later Register() does nothing), then takes away the mappings
  // registered that still name our port.
  asio::awaitable<void> Unregister();

 private:
  struct Entry {
    uint32_t program = 0;
    uint32_t version = 0;
    std::string netid;    // "tcp", "udp", "tcp6", "udp6".
    std::string address;  // Our universal address.
    bool pmap = false;    // Registered through PMAP v2.
    bool operator==(const Entry&) const = default;
  };
  // One pass over every entry; how far it got.
  struct Attempt {
    bool reached = false;   // rpcbind answered.
    bool complete = false;  // Every entry registered or held by a live process.
    size_t held = 0;        // Entries another live process holds.
    std::string protocol;   // "rpcbind v4" or "portmapper v2".
    std::string failure;    // Why not complete.
  };

  asio::awaitable<Attempt> TryOnce(const std::vector<Entry>& wanted);
  asio::awaitable<void> TryV4(const std::vector<Entry>& wanted,
                              const std::vector<RpcbMapping>& current, Attempt& attempt);
  asio::awaitable<void> TryV2(const std::vector<Entry>& wanted, Attempt& attempt);
  // Whether something answers NULL for (program, version) at a universal address.
  asio::awaitable<bool> Answers(uint32_t program, uint32_t version, const std::string& netid,
                                const std::string& address);
  asio::awaitable<void> UnregisterV4(const std::vector<Entry>& entries);
  asio::awaitable<void> UnregisterV2(const std::vector<Entry>& entries);
  void Remember(const Entry& entry);
  std::string Where() const { return host_ + ":" + std::to_string(port_); }

  Client& client_;
  std::string host_;
  uint16_t port_;
  RpcbindOptions options_;
  RpcbClient rpcb_;
  PmapClient pmap_;
  std::vector<Entry> registered_;
  // Set by Unregister(): a Register() call waiting to retry stops at once.
  Event stopping_;
  int active_ = 0;  // Register() calls running.
  Event drained_;   // set when active_ drops to 0
};

}  // namespace nlockd::rpc
