// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "nlockd/export.hpp"

namespace nlockd {

// The programs a LockService serves.
inline constexpr uint32_t kNlmProgram = 100021;  // NLM, versions 1, 3 and 4
inline constexpr uint32_t kNsmProgram = 100024;  // NSM, version 1

enum class Transport { kTcp, kUdp };

// One ONC RPC call (RFC 5531) whose header the host's transport has read. Everything is
// borrowed: HandleCall() copies what it needs before it returns.
struct RpcCall {
  uint32_t xid = 0;
  uint32_t program = 0;
  uint32_t version = 0;
  uint32_t procedure = 0;
  // The credential as sent (opaque_auth): flavor 0 = AUTH_NONE, 1 = AUTH_SYS with its body.
  // Other flavours are answered AUTH_ERROR/AUTH_BADCRED.
  uint32_t cred_flavor = 0;
  std::span<const uint8_t> cred_body;
  Transport transport = Transport::kTcp;
  // The caller's IP address as text ("192.0.2.1", "2001:db8::1"; "::ffff:a.b.c.d" is taken as
  // the IPv4 address) and source port. NLM binds a client host to its address, NSM allows
  // SM_MON only from loopback and its allowlist, and _MSG results go back to this address.
  std::string_view peer_address;
  uint16_t peer_port = 0;
  // The address and port the call arrived on; empty/0 if unknown.
  std::string_view local_address;
  uint16_t local_port = 0;
  // The XDR-encoded arguments: the bytes after the call header.
  std::span<const uint8_t> args;
};

// The answer to an RpcCall.
struct RpcReply {
  // False: send nothing (a retransmission of a call still being served, or a call refused
  // while the service is not running; the client retransmits).
  bool send = false;
  // The whole RPC reply message (xid, reply header, verifier, results), without TCP record
  // marking. Hosts that write their own reply header use the part from `results_offset` on.
  std::vector<uint8_t> message;
  // accept_stat of an accepted reply (0 SUCCESS, 1 PROG_UNAVAIL, 2 PROG_MISMATCH,
  // 3 PROC_UNAVAIL, 4 GARBAGE_ARGS, 5 SYSTEM_ERR); nullopt when the call was denied
  // (RPC_MISMATCH, AUTH_ERROR) or nothing is sent.
  std::optional<uint32_t> accept_stat;
  // Where the XDR results start in `message` (for accept_stat 0).
  size_t results_offset = 0;
};

// A program and version the service answers, for the host's rpcbind registration.
struct ProgramVersion {
  uint32_t program = 0;
  uint32_t version = 0;
};

// --- Events ---------------------------------------------------------------------------------

// A monitored client host told us it rebooted (SM_NOTIFY, or an external NSM's status
// callback); its locks, shares and waiters were released before the event is reported.
struct HostRebooted {
  std::string host;   // The lock manager's host id (address or caller_name, see Options).
  int32_t state = 0;  // Its new NSM state.
  size_t locks_released = 0;
};

enum class GraceMode {
  kClassic,      // Every new lock is refused until the window ends.
  kFineGrained,  // Only new locks that conflict with a restored, unreclaimed lock are refused.
};

struct GraceStarted {
  GraceMode mode = GraceMode::kClassic;
  std::chrono::seconds duration{0};
  std::string reason;           // Why this kind of grace (for logs).
  size_t restored_locks = 0;    // Locks restored from the store.
  size_t restored_shares = 0;   // Shares restored from the store.
  size_t awaiting_reclaim = 0;  // Of those, how many wait for their owner's reclaim.
};

struct GraceEnded {
  std::string reason;      // "timer", "all-reclaimed" or "admin".
  uint64_t reclaimed = 0;  // Restored locks and shares their owners reclaimed.
  uint64_t dropped = 0;    // Restored ones dropped unreclaimed (host rebooted or never answered).
};

// Callbacks a host receives from a LockService. Each runs on the service's executor (see
// "Threading" in lock_service.hpp): keep it short, do not block in it, and do not call the
// blocking methods of the service from it. Any of them may be empty.
struct EventHandlers {
  std::function<void(const HostRebooted&)> host_rebooted;
  std::function<void(const GraceStarted&)> grace_started;
  std::function<void(const GraceEnded&)> grace_ended;
};

// --- Status ---------------------------------------------------------------------------------

struct Status {
  int32_t state_number = 0;  // NSM state: odd while up.
  std::string server_name;   // The mon_name sent in SM_NOTIFY.
  bool grace_active = false;
  std::string grace_mode;  // "classic" or "fine-grained" while active.
  double grace_seconds_left = 0;
  uint64_t registrations = 0;    // NSM monitor registrations.
  uint64_t monitored_hosts = 0;  // Distinct mon_names among them.
  uint64_t hosts = 0;            // Client hosts known to the lock manager.
  uint64_t locks = 0;
  uint64_t shares = 0;
  uint64_t waiters = 0;
  uint64_t pending_grants = 0;  // Granted blocked requests the client has not acknowledged.
};

// The admin HTTP API (docs/api.md; what nlockctl talks to) as plain requests and responses:
// the host serves them over its own HTTP server, or calls them directly.
struct AdminRequest {
  std::string method;         // "GET", "POST", "DELETE", ...
  std::string target;         // Percent-encoded path and "?query", e.g. "/api/v1/locks?limit=5".
  std::string authorization;  // The Authorization header, empty if none.
  std::string body;
};

struct AdminResponse {
  int status = 200;
  std::string content_type;
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
};

// --- Locks on a file --------------------------------------------------------------------------

// A lock owner: the client host (the lock manager's host id), the process id on it (NLM svid)
// and the opaque owner handle (NLM oh; for an NFSv4 bridge, e.g. its lock-owner bytes).
struct LockOwner {
  std::string host;
  int32_t svid = 0;
  std::string handle;
};

// A byte range in NLM's (offset, length) form; length 0 = to the end of the file.
struct ByteRange {
  uint64_t offset = 0;
  uint64_t length = 0;
};

// A held lock.
struct HeldLock {
  std::string file;  // The file handle bytes.
  LockOwner owner;
  ByteRange range;
  bool exclusive = true;
  // Restored after a restart and not yet reclaimed by its owner (it still blocks).
  bool awaiting_reclaim = false;
};

// Which locks a read (exclusive = false) or write (exclusive = true) of `range` on `file`
// would conflict with. `except_host`, when set, leaves that host's locks out (its own I/O).
struct ConflictQuery {
  std::string file;
  ByteRange range;
  bool exclusive = true;
  std::optional<std::string> except_host;
};

// What ReleaseFile() took away.
struct FileRelease {
  size_t locks = 0;    // Owners whose locks on the file were released.
  size_t shares = 0;   // Share reservations removed.
  size_t waiters = 0;  // Blocked requests cancelled.
};

// A lock request of a protocol layer in the host (an NFSv4 server's LOCK), served by the same
// lock manager as NLM so that both see each other's locks. Never blocks: NFSv4 clients poll.
struct LocalLockRequest {
  std::string file;
  LockOwner owner;
  ByteRange range;
  bool exclusive = true;
  // Re-takes a lock held before a restart; accepted only during grace.
  bool reclaim = false;
};

enum class LockResult {
  kGranted,
  kDenied,        // A conflicting lock is held (see LockAnswer::holder).
  kDeniedGrace,   // In grace: new locks wait (or a reclaim outside grace).
  kNoResources,   // A limit was hit, or the change could not be persisted.
  kInvalidRange,  // offset + length past 2^64 - 1.
  kUnavailable,   // The service is not running.
};

struct LockAnswer {
  LockResult result = LockResult::kUnavailable;
  std::optional<HeldLock> holder;  // For kDenied: the first conflicting lock.
};

NLOCKD_EXPORT std::string_view ToString(LockResult result);

}  // namespace nlockd
