// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace nlockd::admin {

// What an API caller did wrong, or why the server cannot answer now; the router maps each kind
// to an HTTP status (docs/api.md). Infrastructure faults stay nlockd::Error (kOverloaded and
// kDisconnected become 503, the rest 500).
enum class ApiErrorKind {
  kNotFound,         // 404: no such registration, host, ...
  kConflict,         // 409: the request does not fit the current state (end a grace not running).
  kInvalidArgument,  // 400: a malformed parameter or body.
  kUnavailable,      // 503: not ready yet (store loading) or shutting down.
};

class ApiError : public std::runtime_error {
 public:
  ApiError(ApiErrorKind kind, const std::string& message)
      : std::runtime_error(message), kind_(kind) {}
  ApiErrorKind kind() const { return kind_; }

 private:
  ApiErrorKind kind_;
};

// --- Views: plain copies of server state, no lock/ or nsm/ types. ---------------------------
// Names and keys are raw bytes as the clients sent them; the JSON layer renders file handles
// and owner handles as hex and replaces invalid UTF-8 in names.

// Mode and reason use lock::ToString()'s spellings.
struct GraceView {
  bool active = false;
  std::string mode;                // "classic" or "fine-grained" while active; empty otherwise.
  double seconds_left = 0;         // 0 when not active.
  uint64_t reclaims_counted = 0;   // Restored locks and shares reclaimed so far.
  uint64_t reclaims_expected = 0;  // Restored locks and shares the window started with.
  std::string last_end_reason;     // "timer", "all-reclaimed", "admin"; empty if none ended.
};

// The HA role of this node (docs/decisions/0017), when the service runs with ha.
struct HaView {
  bool active = false;  // role "active", else "standby"
  std::string holder;   // who holds the lease as last seen ("" when free)
  int64_t epoch = 0;    // the lease's epoch as last seen (this node's own while active)
  int64_t lease_seconds = 0;
};

struct StatusView {
  int32_t state_number = 0;  // NSM state: odd while up.
  std::string server_name;   // The mon_name sent in SM_NOTIFY.
  double uptime_seconds = 0;
  GraceView grace;
  uint64_t registrations = 0;    // NSM monitor registrations.
  uint64_t monitored_hosts = 0;  // Distinct mon_names among them.
  uint64_t hosts = 0;            // Client hosts known to the lock manager.
  uint64_t locks = 0;
  uint64_t shares = 0;
  uint64_t waiters = 0;         // Queued blocked requests (pending grants not included).
  uint64_t pending_grants = 0;  // Granted blocked requests whose client has not acknowledged.
  std::optional<HaView> ha;     // Set with ha.
};

struct ReadinessView {
  bool store_loaded = false;
  bool listening = false;
  GraceView grace;
  std::optional<HaView> ha;  // Set with ha: only the active node is ready.

  bool ready() const { return store_loaded && listening && (!ha || ha->active); }
};

// An NSM registration (SM_MON). `id` is MakeRegistrationId() of its key.
struct RegistrationView {
  std::string id;
  std::string mon_name;
  std::string my_name;
  int32_t my_prog = 0;
  int32_t my_vers = 0;
  int32_t my_proc = 0;
  std::string priv;  // 16 raw bytes.
  std::string source_address;
  int64_t created_unix = 0;  // Seconds since the epoch.
  int64_t updated_unix = 0;
};

struct HostView {
  std::string name;   // The lock manager's host id (address or caller_name).
  std::string label;  // E.g. the caller_name of a host keyed by address; may be empty.
  std::optional<int32_t> nsm_state;
  bool monitored = false;  // An NSM registration watches it.
  double first_seen_seconds_ago = 0;
  double last_seen_seconds_ago = 0;
  uint64_t locks = 0;
  uint64_t shares = 0;
  uint64_t waiters = 0;
  uint64_t pending_grants = 0;
};

struct LockView {
  std::string file;  // Opaque file handle bytes.
  std::string host;
  int32_t svid = 0;
  std::string owner;  // Opaque owner handle bytes (NLM oh).
  uint64_t offset = 0;
  uint64_t length = 0;  // 0: to the end of the file.
  bool exclusive = false;
  bool awaiting_reclaim = false;
};

struct ShareView {
  std::string file;
  std::string host;
  std::string owner;
  std::string access;  // "none", "read", "write", "read_write"
  std::string deny;    // "none", "read", "write", "read_write"
  bool awaiting_reclaim = false;
};

// A held lock that a queued waiter waits for (the wait-for view, docs/api.md).
struct BlockerView {
  std::string host;
  int32_t svid = 0;
  std::string owner;
  uint64_t offset = 0;
  uint64_t length = 0;
  bool exclusive = false;
  // The holder's own queued waiters (ids), on any file: empty when the holder is not blocked,
  // so a chain of waits ends with it.
  std::vector<uint64_t> waiting;
};

struct WaiterView {
  uint64_t id = 0;
  std::string file;
  std::string host;
  int32_t svid = 0;
  std::string owner;
  uint64_t offset = 0;
  uint64_t length = 0;
  bool exclusive = false;
  bool granted = false;  // Granted, the GRANTED callback not yet acknowledged.
  double seconds = 0;    // Since queued, or since granted.
  // A queued waiter's conflicting holders (the first few of `blockers`); empty once granted.
  std::vector<BlockerView> blocked_by;
  uint64_t blockers = 0;
};

struct HostDetail {
  HostView host;
  std::vector<LockView> locks;
  std::vector<ShareView> shares;
  std::vector<WaiterView> waiters;
};

struct ReleaseResult {
  uint64_t locks = 0;
  uint64_t shares = 0;
  uint64_t waiters = 0;
  uint64_t waiters_granted = 0;  // Other hosts' waiters served by the release.
};

struct NotifyResult {
  uint64_t hosts = 0;  // Hosts whose SM_NOTIFY was queued; delivery continues in the background.
};

// A planned release of an HA service's lease, accepted: the node stops serving and releases
// the lease in the background, then waits as standby.
struct ServiceReleaseResult {
  std::string service;  // Options::name, the lease's key
  int64_t epoch = 0;    // the epoch this node held
};

// --- Queries and paging ---------------------------------------------------------------------

// Paging stops one request from serializing millions of locks into one response.
struct Page {
  static constexpr size_t kDefaultLimit = 100;
  static constexpr size_t kMaxLimit = 1000;
  size_t offset = 0;
  size_t limit = kDefaultLimit;
};

template <typename T>
struct ListResult {
  std::vector<T> items;
  size_t total = 0;  // Matching items before paging.
};

// Cuts one page out of everything that matched.
template <typename T>
ListResult<T> TakePage(std::vector<T> all, const Page& page) {
  ListResult<T> result;
  result.total = all.size();
  const size_t begin = std::min(page.offset, all.size());
  const size_t end = begin + std::min(page.limit, all.size() - begin);
  result.items.assign(std::make_move_iterator(all.begin() + static_cast<ptrdiff_t>(begin)),
                      std::make_move_iterator(all.begin() + static_cast<ptrdiff_t>(end)));
  return result;
}

struct RegistrationQuery {
  std::optional<std::string> mon_name;
  std::optional<std::string> my_name;
  Page page;
};

// Selects the state of one host, one file (raw handle bytes), both, or everything.
struct StateQuery {
  std::optional<std::string> host;
  std::optional<std::string> file;
  Page page;
};

// The stable id of a registration's key (mon_name, my_name, my_prog, my_vers, my_proc): 16 hex
// digits. Ids are not secret; they only have to survive restarts and fit in a URL.
std::string MakeRegistrationId(const std::string& mon_name, const std::string& my_name,
                               int32_t my_prog, int32_t my_vers, int32_t my_proc);

// What the admin server reads and steers. Every method is synchronous from the HTTP thread's
// view and may be called from several HTTP threads at once.
//
// REQUIRES of an implementation: lock and NSM state is owned by one executor, so each call must
// be posted to that executor and its result awaited (e.g. asio::post + std::promise); never
// touch that state from the HTTP thread, and never call a Backend method from the executor
// itself (it would wait for itself). The admin server never calls it from an io thread.
//
// Errors: throw ApiError for what the caller can fix (kNotFound for an unknown id or host,
// kConflict for ending a grace period that is not running); nlockd::Error for faults.
class Backend {
 public:
  virtual ~Backend() = default;

  virtual StatusView Status() = 0;
  virtual ReadinessView Readiness() = 0;

  virtual ListResult<RegistrationView> ListRegistrations(const RegistrationQuery& query) = 0;
  virtual RegistrationView GetRegistration(const std::string& id) = 0;
  // Removes the registration durably (as SM_UNMON would); returns once it is stored.
  virtual void DeleteRegistration(const std::string& id) = 0;

  virtual ListResult<HostView> ListHosts(const Page& page) = 0;
  virtual HostDetail GetHost(const std::string& name) = 0;
  // Drops every lock, share and waiter of the host (as FREE_ALL does) and serves the waiters
  // this frees.
  virtual ReleaseResult ReleaseHost(const std::string& name) = 0;

  virtual ListResult<LockView> ListLocks(const StateQuery& query) = 0;
  virtual ListResult<ShareView> ListShares(const StateQuery& query) = 0;
  virtual ListResult<WaiterView> ListWaiters(const StateQuery& query) = 0;

  virtual GraceView Grace() = 0;
  // Ends the grace period now (reason "admin"); kConflict if none is active.
  virtual GraceView EndGrace() = 0;

  // Sends SM_NOTIFY(our name, state) again to every monitored host, or to `host` only
  // (kNotFound if no registration monitors it).
  virtual NotifyResult Notify(const std::optional<std::string>& host) = 0;
  // Hands an HA service over (a planned move): asks the host program to stop serving, release
  // the lease and wait as standby, so that a standby takes over at once. kConflict without
  // ha; kUnavailable when the host program has no way to release (it set no handler).
  virtual ServiceReleaseResult ReleaseService() = 0;
};

}  // namespace nlockd::admin
