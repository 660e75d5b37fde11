// SPDX-License-Identifier: Apache-2.0
#include "server/server.hpp"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <random>
#include <unordered_set>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/post.hpp>
#include <asio/redirect_error.hpp>
#include <asio/use_awaitable.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include "base/describe.hpp"
#include "base/error.hpp"
#include "base/host_name.hpp"
#include "base/redact.hpp"
#include "rpc/address.hpp"
#include "rpc/use_tuple.hpp"
#include "rpc/wait_bounds.hpp"
#include "server/recovery.hpp"
#include "store/open_store.hpp"
#include "store/run_record.hpp"
#include "store/write_op.hpp"

namespace nlockd::server {

namespace {

// How long an SM_NOTIFY from a host registered by name waits for that name's addresses; the
// lookups of unmatched notifications' names are kept apart from these (nsm/name_resolver.hpp).
nsm::NameResolverOptions NameLookupOptions() {
  nsm::NameResolverOptions out;
  out.deadline = std::chrono::milliseconds(5000);
  return out;
}

rpc::ServerOptions RpcOptions(const nlockd::Options& options) {
  rpc::ServerOptions out;
  out.max_connections = options.max_connections;
  out.max_record_size = options.max_record_size;
  out.idle_timeout = options.idle_timeout;
  return out;
}

lock::LockManagerOptions LockOptions(const nlockd::Options& options) {
  lock::LockManagerOptions out;
  out.max_hosts = options.max_hosts;
  out.max_locks_per_host = options.max_locks_per_host;
  out.max_owner_bytes_per_host = options.max_owner_bytes_per_host;
  out.max_waiters_per_host = options.max_waiters_per_host;
  out.max_waiters = options.max_waiters;
  out.detect_deadlocks = options.nlm_deadlock_detection;
  if (options.grace.count() > 0) out.grace_duration = options.grace;
  out.seed = std::random_device{}();
  return out;
}

nlm::NlmOptions NlmOptionsFrom(const nlockd::Options& options) {
  nlm::NlmOptions out;
  out.host_key = options.nlm_key_by_caller_name ? nlm::NlmOptions::HostKey::kCallerName
                                                : nlm::NlmOptions::HostKey::kAddress;
  out.granted_msg = options.nlm_granted_msg;
  return out;
}

// With Options::ha, waits as standby until this node holds the service's lease.
std::unique_ptr<HaLeaseKeeper> TakeLeaseIfHa(const nlockd::Options& options,
                                             std::chrono::milliseconds hold_off,
                                             std::function<void(const HaReport&)> on_report) {
  if (!options.ha) return nullptr;
  if (!store::IsSharedStoreUri(options.store)) {
    throw Error(ErrorKind::kFailed,
                fmt::format("ha needs a PostgreSQL store (postgresql://...), not '{}': a SQLite "
                            "file or the memory store serves one node",
                            RedactStoreUri(options.store)));
  }
  HaOptions ha;
  ha.conninfo = options.store;
  ha.service = options.name;
  ha.lease = options.ha_lease;
  ha.on_active = options.ha_on_active;
  ha.on_standby = options.ha_on_standby;
  ha.on_report = std::move(on_report);
  ha.hold_off = hold_off;
  return std::make_unique<HaLeaseKeeper>(std::move(ha));
}

// The kernel's boot id, read once: the early round and the store must agree on it. Tests fake
// a reboot of the host by changing it (NLOCKD_BOOT_ID): the store records the boot id of each
// run to tell a process restart (lock table complete) from a host reboot.
std::string ThisBoot() {
  store::StoreOptions options;
  if (const char* boot_id = std::getenv("NLOCKD_BOOT_ID"); boot_id != nullptr) {
    options.boot_id = boot_id;
  }
  return store::CurrentBootId(options);
}

// A status monitor alone on a SQLite store keeps the early-notify file, unless its round must
// wait (notify.hold: for nfsd; ha: for the lease), rpc.statd's files give its state, or its calls
// leave from one fixed port (the early round's socket would hold it).
bool KeepsEarlyNotifyFile(const nlockd::Options& options, bool statd_directory) {
  return options.serve_nsm && !options.serve_nlm && !options.ha && !statd_directory &&
         options.notify_hold.count() == 0 && options.callback_source_port == 0;
}

// A SQLite store's lock, taken before anything reads or acts on the files beside it (the
// store adopts it).
std::shared_ptr<store::SqliteStoreLock> LockSqliteStore(const nlockd::Options& options) {
  const std::optional<std::string> sqlite = store::SqliteStorePath(options.store);
  if (!sqlite) return nullptr;
  return std::make_shared<store::SqliteStoreLock>(*sqlite);
}

std::unique_ptr<store::Store> OpenConfiguredStore(
    const nlockd::Options& options, HaLeaseKeeper* ha, std::string boot_id,
    std::shared_ptr<store::SqliteStoreLock> sqlite_lock) {
  store::StoreOptions store_options;
  // Every write checks, in its transaction, that this node still holds the lease.
  if (ha != nullptr) {
    store_options.fence_epoch = ha->epoch();
    // A fenced write means another node took the service: stop now, not at the next renewal.
    store_options.on_lease_lost = [ha](const std::string& what) { ha->StoreLostLease(what); };
  }
  store_options.keeps_lock_table = options.persist_locks;
  // In a shared PostgreSQL database the service owns its rows: any node started with the same
  // --name loads its state number, registrations and lock table. A SQLite file serves one node
  // and keeps its rows under the default key, as files written by earlier versions have them.
  if (store::IsSharedStoreUri(options.store)) store_options.node_id = options.name;
  store_options.boot_id = std::move(boot_id);
  store_options.sqlite_lock = std::move(sqlite_lock);
  auto store = store::OpenStore(options.store, store_options);
  spdlog::info("store {} opened (previous run {})", RedactStoreUri(options.store),
               store->startup().first_run            ? "none"
               : store->startup().previous_run_clean ? "clean"
                                                     : "unclean");
  return store;
}

nsm::RpcStatusCallerOptions StatusCallerOptions(const nlockd::Options& options) {
  nsm::RpcStatusCallerOptions out;
  out.rpcbind_host = options.rpcbind_host;
  out.rpcbind_port = options.rpcbind_port;
  out.deadline = options.nsm_callback_timeout;
  return out;
}

nsm::NsmOptions NsmOptionsFrom(const nlockd::Options& options) {
  nsm::NsmOptions out;
  out.max_registrations = options.nsm_max_registrations;
  out.allowlist.insert(options.nsm_allowlist.begin(), options.nsm_allowlist.end());
  out.callback_programs = {options.nsm_callback_programs.begin(),
                           options.nsm_callback_programs.end()};
  out.check_notifier_address = options.nsm_check_notifier_address;
  // Shutdown waits for a status callback this long, plus a margin (NsmService::shutdown_bound).
  out.callback_deadline = options.nsm_callback_timeout;
  return out;
}

nsm::NotifierOptions NotifierOptionsFrom(const nlockd::Options& options) {
  nsm::NotifierOptions out;
  out.statd_port = options.notify_statd_port;
  out.rpcbind_port = options.notify_rpcbind_port;
  out.attempt_deadline = options.notify_timeout;
  out.initial_backoff = options.notify_backoff;
  out.max_backoff = std::max<std::chrono::milliseconds>(out.max_backoff, options.notify_backoff);
  out.total_budget = options.notify_budget;
  out.source_port = options.callback_source_port;
  return out;
}

GraceControllerOptions GraceOptionsFrom(const nlockd::Options& options) {
  GraceControllerOptions out;
  out.duration = options.grace;
  out.floor = options.grace_floor;
  out.end_early = options.grace_end_early;
  out.persist_locks = options.persist_locks;
  out.drop_unreachable = options.notify_drop_unreachable;
  return out;
}

// Where rpc.statd keeps the host's NSM state number (nfs-utils' default; a host int32), read
// on a new store's first start when statd_directory is not set.
constexpr const char* kStatdStateFile = "/var/lib/nfs/state";
// At most this many odd numbers past the store's to catch up with rpc.statd's: beyond, the file is
// not trusted.
constexpr int kMaxStateCatchUp = 100'000;
// The early-notify file's hosts are written this long after the SM_MON or SM_UNMON that changed
// them, once for a burst.
constexpr auto kEarlyHostsSettle = std::chrono::milliseconds(100);
// The store's round waits for the early round's attempts at most their deadline and this.
constexpr auto kEarlyRoundMargin = std::chrono::seconds(1);

// rpc.statd's last state number on this host, if it left one.
std::optional<int32_t> StatdState() {
  // Tests point it elsewhere, as they fake a reboot with NLOCKD_BOOT_ID.
  const char* path = std::getenv("NLOCKD_STATD_STATE_FILE");
  std::ifstream file(path != nullptr ? path : kStatdStateFile, std::ios::binary);
  int32_t state = 0;
  if (!file.read(reinterpret_cast<char*>(&state), sizeof state)) return std::nullopt;
  return state;
}

std::optional<StatdDirectory> StatdDirectoryOf(const nlockd::Options& options) {
  if (options.statd_state_directory.empty() || !options.serve_nsm) return std::nullopt;
  // Where statd and sm-notify leave their pid files; tests point it elsewhere.
  const char* run = std::getenv("NLOCKD_STATD_RUN_DIR");
  return StatdDirectory(options.statd_state_directory, run != nullptr ? run : "/run");
}

nlockd::Options Completed(nlockd::Options options) {
  if (options.name.empty()) {
    char host[256] = {};
    const bool named = gethostname(host, sizeof host - 1) == 0 && host[0] != '\0';
    options.name = named ? host : "localhost";
  }
  return options;
}

nlockd::LockResult ToResult(nlm::nlm4_stats stat) {
  switch (stat) {
    case nlm::NLM4_GRANTED:
      return nlockd::LockResult::kGranted;
    case nlm::NLM4_DENIED:
    case nlm::NLM4_BLOCKED:
      return nlockd::LockResult::kDenied;
    case nlm::NLM4_DENIED_GRACE_PERIOD:
      return nlockd::LockResult::kDeniedGrace;
    case nlm::NLM4_FBIG:
      return nlockd::LockResult::kInvalidRange;
    default:
      return nlockd::LockResult::kNoResources;
  }
}

nlockd::LockResult ToResult(lock::LockStatus status) {
  switch (status) {
    case lock::LockStatus::kGranted:
      return nlockd::LockResult::kGranted;
    case lock::LockStatus::kDenied:
    case lock::LockStatus::kBlocked:
      return nlockd::LockResult::kDenied;
    case lock::LockStatus::kDeniedGrace:
      return nlockd::LockResult::kDeniedGrace;
    case lock::LockStatus::kInvalidRange:
      return nlockd::LockResult::kInvalidRange;
    case lock::LockStatus::kNoResources:
      return nlockd::LockResult::kNoResources;
  }
  return nlockd::LockResult::kNoResources;
}

// NLM's (offset, length) of a range; length 0 reaches the end of the file.
nlockd::ByteRange ToPublic(const lock::ByteRange& range) {
  return {range.first(),
          range.last() == lock::ByteRange::kMaxOffset ? 0 : range.last() - range.first() + 1};
}

nlockd::HeldLock ToPublic(const lock::FileKey& file, const lock::LockOwner& owner,
                          const lock::ByteRange& range, lock::LockType type, bool awaiting) {
  return nlockd::HeldLock{file.value(),
                          nlockd::LockOwner{owner.host.value(), owner.svid, owner.oh.value()},
                          ToPublic(range), type == lock::LockType::kExclusive, awaiting};
}

nlm::nlm4_lock ToWireLock(const std::string& file, const nlockd::LockOwner& owner,
                          nlockd::ByteRange range) {
  return nlm::nlm4_lock{owner.host, file, owner.handle, owner.svid, range.offset, range.length};
}

std::vector<nsm::NotifyTarget> OwedTargets(const std::vector<store::NotifyOwed>& rows) {
  std::vector<nsm::NotifyTarget> targets;
  targets.reserve(rows.size());
  for (const store::NotifyOwed& row : rows) targets.push_back({row.mon_name, row.address});
  return targets;
}

}  // namespace

Core::Core(asio::any_io_executor executor, nlockd::Options options, HaLink ha_link)
    : options_(Completed(std::move(options))),
      statd_directory_(StatdDirectoryOf(options_)),
      executor_(std::move(executor)),
      client_(executor_),
      rpcbind_(client_, options_.rpcbind_host, options_.rpcbind_port),
      ha_link_(std::move(ha_link)),
      ha_(TakeLeaseIfHa(options_, ha_link_.hold_off,
                        [this](const HaReport& report) {
                          {
                            std::lock_guard lock(ha_mutex_);
                            ha_view_.active = report.active;
                            ha_view_.holder = report.holder;
                            ha_view_.epoch = report.epoch;
                            ha_view_.lease_seconds = options_.ha_lease.count();
                          }
                          if (ha_link_.on_report) ha_link_.on_report(report);
                        })),
      boot_id_(ThisBoot()),
      sqlite_lock_(LockSqliteStore(options_)),
      early_file_(sqlite_lock_
                      ? std::make_unique<EarlyNotifyFile>(
                            EarlyNotifyFile::PathFor(sqlite_lock_->path()),
                            // Without a boot id a restart cannot be told from a reboot.
                            !boot_id_.empty() &&
                                KeepsEarlyNotifyFile(options_, statd_directory_.has_value()))
                      : nullptr),
      early_round_(early_file_ && early_file_->keeps()
                       ? BeginEarlyRound(*early_file_, boot_id_, options_.name,
                                         NotifierOptionsFrom(options_))
                       : nullptr),
      store_(OpenConfiguredStore(options_, ha_.get(), boot_id_, sqlite_lock_)),
      locks_(clock_, LockOptions(options_)),
      status_caller_(client_, StatusCallerOptions(options_)),
      name_resolver_(executor_, NameLookupOptions()),
      nsm_(executor_, *store_, status_caller_, *this, NsmOptionsFrom(options_), &name_resolver_,
           &clock_),
      notifier_(executor_, client_, *store_, clock_, NotifierOptionsFrom(options_)),
      nlm_caller_(client_),
      statd_monitor_(
          client_, bridge_,
          nlm::StatdMonitorOptions{options_.name, options_.rpcbind_host, options_.rpcbind_port,
                                   options_.nsm_callback_timeout}),
      nlm_(executor_, locks_,
           options_.serve_nsm ? static_cast<nlm::HostMonitor&>(bridge_) : statd_monitor_,
           nlm_caller_, NlmOptionsFrom(options_)),
      grace_(executor_, clock_, locks_, *store_,
             GraceHooks{[this](lock::Grants grants) { nlm_.SendGrants(std::move(grants)); },
                        [this] { return notifier_.RoundActive(); }},
             GraceOptionsFrom(options_)),
      call_metrics_(metrics_),
      admin_backend_(AdminBackendParts{executor_, clock_, locks_, nsm_, notifier_, nlm_, bridge_,
                                       metrics_, options_.name, options_.nlm_granted_msg, &grace_,
                                       HaViewSource(), ha_link_.request_release}),
      calls_(executor_, "calls handed in"),
      tasks_(executor_, "core"),
      registrations_done_(executor_),
      notify_hold_(executor_),
      early_round_done_(std::make_shared<rpc::Event>(executor_)) {
  if (!options_.serve_nlm && !options_.serve_nsm) {
    throw Error(ErrorKind::kFailed, "serve names neither nlm nor nsm");
  }
  bridge_.Attach(nsm_, nlm_);
  nsm_.SetRestartHook(this);
  if (!options_.statd_ha_callout.empty() && options_.serve_nsm) {
    ha_callout_ = std::make_unique<HaCallout>(HaCalloutOptions{options_.statd_ha_callout});
  }
  if (ha_callout_ || KeepsEarlyFile()) nsm_.SetMonitorEvents(this);
  if (early_round_) {
    // The event outlives the Core if the executor runs the post after it.
    early_round_->WhenFinished(executor_, [done = early_round_done_] { done->Set(); });
  }
  if (options_.persist_locks && store_->startup().persistent) {
    journal_.emplace(locks_, *store_);
    nlm_.set_journal(&*journal_);
    grace_.set_journal(&*journal_);
  }
  // One line per host at debug: a round reaches thousands (the notifier warns of failures and
  // of hosts given up, and sums the round up at its end).
  notifier_.set_on_answered([this](const std::string& mon_name) {
    spdlog::debug("nsm {} acknowledged our SM_NOTIFY", mon_name);
    grace_.NotificationAnswered(mon_name);
  });
  // A host never reached is treated as crashed: only its locks known from before the restart
  // go.
  notifier_.set_on_given_up(
      [this](const std::string& mon_name) { grace_.HostUnreachable(mon_name); });
  dispatcher_.SetReplyCache(&reply_cache_);
  dispatcher_.SetObserver([this](const rpc::CallRecord& record) { call_metrics_.Observe(record); });
  // Only the programs served are registered: a call to another gets PROG_UNAVAIL, and its
  // rpcbind mapping (a kernel lockd's, or rpc.statd's) is neither set nor taken away.
  if (options_.serve_nlm) nlm_.Register(dispatcher_);
  if (options_.serve_nsm) nsm_.Register(dispatcher_);
}

Core::~Core() {
  // The early-notify file's last write (and the early round) end while the store still holds
  // its lock: after it, another process may own the file.
  early_round_.reset();
  early_file_.reset();
}

std::function<admin::HaView()> Core::HaViewSource() {
  if (!options_.ha) return {};
  return [this] {
    std::lock_guard lock(ha_mutex_);
    return ha_view_;
  };
}

void Core::set_events(nlockd::EventHandlers events) { events_ = std::move(events); }

uint16_t Core::Listen(const std::string& address_text, uint16_t port,
                      std::vector<uint32_t> programs) {
  NLOCKD_REQUIRE(!start_posted_, "Listen before Start");
  asio::error_code ec;
  auto address = asio::ip::make_address(address_text, ec);
  if (ec) {
    throw Error(ErrorKind::kFailed, "listen address '" + address_text + "' is not an IP address");
  }
  rpc::ServerOptions server_options = RpcOptions(options_);
  if (!programs.empty()) {
    std::erase_if(programs, [this](uint32_t program) { return !Serves(program); });
    if (programs.empty()) {
      throw Error(ErrorKind::kFailed, "the listener on " + address_text + ":" +
                                          std::to_string(port) +
                                          " would serve none of the programs this process serves");
    }
    server_options.programs = std::move(programs);
  }
  auto server = std::make_unique<rpc::Server>(executor_, dispatcher_, std::move(server_options));
  server->Listen(address, port);
  const uint16_t bound = server->port();
  AddListener(std::move(server));
  return bound;
}

uint16_t Core::ListenOnSockets(int tcp_listen_fd, int udp_fd) {
  NLOCKD_REQUIRE(!start_posted_, "Listen before Start");
  auto server = std::make_unique<rpc::Server>(executor_, dispatcher_, RpcOptions(options_));
  server->Adopt(tcp_listen_fd, udp_fd);
  const uint16_t bound = server->port();
  AddListener(std::move(server));
  return bound;
}

void Core::AddListener(std::unique_ptr<rpc::Server> server) {
  std::string names;
  for (const auto& [program, version] : ServedBy(server->programs())) {
    names += (names.empty() ? "" : ",") + std::to_string(program) + "/" + std::to_string(version);
  }
  spdlog::info("rpc listener {}:{} serves {}", server->address().to_string(), server->port(),
               names);
  rpc_servers_.push_back(std::move(server));
}

bool Core::Serves(uint32_t program) const {
  return (program == nlockd::kNlmProgram && options_.serve_nlm) ||
         (program == nlockd::kNsmProgram && options_.serve_nsm);
}

std::vector<std::pair<uint32_t, uint32_t>> Core::ServedBy(
    const std::vector<uint32_t>& programs) const {
  std::vector<std::pair<uint32_t, uint32_t>> out = dispatcher_.ProgramVersions();
  if (programs.empty()) return out;
  std::erase_if(out, [&programs](const std::pair<uint32_t, uint32_t>& pair) {
    return std::find(programs.begin(), programs.end(), pair.first) == programs.end();
  });
  return out;
}

void Core::Start() {
  NLOCKD_REQUIRE(!started_ && !start_posted_, "Start once");
  start_posted_ = true;
  // The new state is durable before anything is served or sent. Read here, on the caller's
  // thread, so that a store that cannot be read fails Start(); nothing on the executor touches
  // NSM or lock state until the rest runs there.
  const auto [statd_this_boot, statd_state] = TakeOverStatdFiles();
  auto loaded = std::make_shared<store::LoadedState>(store_->LoadAll());
  restart_on_same_boot_ =
      statd_this_boot || IsMonitorRestartOnSameBoot(options_, store_->startup(), loaded->state);
  if (early_round_ && restart_on_same_boot_) {
    // The file said another boot, the store this one (a version without the file ran on this
    // boot): the peers were told of a reboot all the same, so the store takes that state and
    // every host hears it.
    spdlog::error(
        "nsm the early round announced state {} as a new boot, but the store moved its state on "
        "this boot already: announcing {} to every host",
        early_round_->state(), early_round_->state());
    restart_on_same_boot_ = false;
  }
  nsm_.Load(loaded->state, loaded->registrations);
  // Only a status monitor alone ever restarts without announcing a new state. Recorded before
  // the bump: a restart after it finds the hosts owed, one before it still announces the boot.
  if (!restart_on_same_boot_ && !options_.serve_nlm && store_->startup().persistent) {
    RecordRoundAsOwed(loaded->notify_owed);
  }
  const bool keep_state = restart_on_same_boot_ && loaded->state != 0;
  int32_t state = keep_state ? LastServedState(loaded->state) : BumpStoreState(loaded->state);
  if (KeepsEarlyFile()) {
    // A store kept from before the file existed gets one now: this boot's, with the kept state.
    if (keep_state) early_file_->Reserve(state, boot_id_);
    early_file_->SetHosts(nsm::MonitoredTargets(nsm_.registry()));
  } else if (early_file_ && early_file_->record()) {
    // This configuration keeps no file; the store is past what it held now.
    early_file_->Remove();
  }
  if (early_round_ && state != early_round_->state()) {
    spdlog::warn(
        "nsm the early round announced state {}, the store is at {}: every host is told {} "
        "(was {} written by another program?)",
        early_round_->state(), state, state, early_file_->path());
  }
  if (statd_directory_) {
    state = ContinueStatdState(state, statd_state, restart_on_same_boot_);
    statd_directory_->WriteState(state);
  } else if (options_.serve_nsm && store_->startup().persistent && store_->startup().first_run) {
    state = ContinueStatdState(state, StatdState(), false);
  }
  nsm_.set_state(state);
  spdlog::info("nsm state={} registrations={} hosts={}", state, nsm_.registry().size(),
               nsm_.registry().peer_count());
  admin_backend_.MarkStoreLoaded();
  asio::post(executor_, [this, state, loaded] { Serve(state, std::move(*loaded)); });
  if (ha_) ha_->BecameActive();
}

bool Core::IsMonitorRestartOnSameBoot(const nlockd::Options& options,
                                      const store::StartupInfo& startup, int32_t stored_state) {
  // A status monitor alone (serve = nsm) restarted while the host kept running: the kernel's
  // lockd still holds its locks, so, like rpc.statd (whose sm-notify runs once per boot), it
  // keeps its state number and notifies only the hosts still owed. Notifying anew would make
  // servers drop those locks. With NLM served here the restart lost this process's grants, so
  // the peers must reclaim. The state's own boot decides, not the last run's: a run that
  // stopped before its bump (a port already taken) has not announced this boot yet.
  return !options.serve_nlm && startup.persistent && !startup.first_run &&
         !startup.state_boot_id.empty() && startup.state_boot_id == startup.boot_id &&
         stored_state != 0;
}

int32_t Core::BumpStoreState(int32_t from, std::optional<int32_t> at_least) {
  const int32_t next = store::NextOddState(from);
  int32_t wanted = next;
  const auto raise_to = [&wanted, from](int32_t state) {
    // A hand-edited file may hold an even number; a host that is up announces odd ones.
    if (state % 2 == 0) state = store::NextOddState(state);
    // Newer than `from` too: "newer" is not transitive near 2^31 apart, and the store may only
    // move forward.
    if (nsm::StateIsNewer(state, wanted) && nsm::StateIsNewer(state, from)) wanted = state;
  };
  if (at_least) raise_to(*at_least);
  if (early_file_) {
    if (const std::optional<EarlyNotifyRecord> floor = early_file_->floor()) {
      // Reserved on this boot (by its early round, or a start cut short), it is this boot's to
      // announce; reserved on another, that boot may have announced it.
      raise_to(floor->boot_id == boot_id_ ? floor->state : store::NextOddState(floor->state));
    }
    early_file_->Reserve(wanted, boot_id_);
  }
  return wanted == next ? store_->BumpState() : store_->MoveStateTo(wanted);
}

int32_t Core::LastServedState(int32_t stored_state) {
  // Odd while up; a clean stop moved it on to the next even number (which wraps, as states do).
  if (stored_state % 2 != 0) return stored_state;
  return stored_state == std::numeric_limits<int32_t>::min() ? std::numeric_limits<int32_t>::max()
                                                             : stored_state - 1;
}

int32_t Core::ContinueStatdState(int32_t state, std::optional<int32_t> statd, bool same_boot) {
  // Peers know the host by rpc.statd's state number and ignore a notification that is not
  // newer, so a new boot's must pass it; on the same boot the kernel and the peers already
  // have it and nothing is announced, so it is kept.
  if (!statd) return state;
  const int32_t target = StatdStateAsUp(*statd);
  auto behind = [&](int32_t candidate) {
    return same_boot ? nsm::StateIsNewer(target, candidate) : !nsm::StateIsNewer(candidate, target);
  };
  if (!behind(state)) return state;
  // The state bumps would have reached, counted here and then written in one step.
  int32_t needed = state;
  for (int bumps = 0; behind(needed); ++bumps) {
    if (bumps == kMaxStateCatchUp) {
      spdlog::warn("nsm state {} of rpc.statd not reached after {} steps; staying at {}", *statd,
                   kMaxStateCatchUp, state);
      return state;
    }
    needed = store::NextOddState(needed);
  }
  const int32_t first = state;
  state = BumpStoreState(state, needed);
  spdlog::info("nsm state continues from rpc.statd's {}: {} -> {}", *statd, first, state);
  return state;
}

std::pair<bool, std::optional<int32_t>> Core::TakeOverStatdFiles() {
  if (!statd_directory_) return {false, std::nullopt};
  StatdDirectory::Contents files = statd_directory_->Read();
  for (const std::string& warning : files.warnings) spdlog::warn("nsm statd files: {}", warning);
  if (statd_directory_->HeldByNlockd()) return {false, files.state};
  // Kept by a restart on the same boot; a new boot's notification round announces it anew.
  const bool same_boot = !options_.serve_nlm && statd_directory_->StatdRanThisBoot();
  const int32_t announced = files.state ? StatdStateAsUp(*files.state) : 0;
  statd_directory_->Import(files, *store_, store_->LoadAll().registrations, announced);
  spdlog::info(
      "nsm took over rpc.statd's files in {}: {} registrations, {} hosts owed a notification{}, "
      "state {}{}",
      statd_directory_->path().string(), files.monitored.size(), files.owed.size(),
      files.owed_left_to_sm_notify ? " (sm.bak left to the running sm-notify)" : "",
      files.state ? std::to_string(*files.state) : "none",
      same_boot ? "; statd ran on this boot: a restart on the same boot" : "");
  return {same_boot, files.state};
}

void Core::GiveBackStatdFiles() {
  if (!statd_directory_) return;
  try {
    store::LoadedState loaded = store_->LoadAll();
    statd_directory_->Export(loaded.registrations, loaded.notify_owed, options_.name, nsm_.state());
    spdlog::info(
        "nsm gave rpc.statd's files back in {}: {} registrations, {} hosts owed a "
        "notification, state {}",
        statd_directory_->path().string(), loaded.registrations.size(), loaded.notify_owed.size(),
        nsm_.state());
  } catch (const std::exception& e) {
    // The marker stays: the next start keeps the store's state rather than stale files.
    spdlog::error("nsm cannot give rpc.statd's files back in {}: {}",
                  statd_directory_->path().string(), e.what());
  }
}

void Core::RecordRoundAsOwed(const std::vector<store::NotifyOwed>& owed) {
  std::vector<store::NotifyOwed> rows = nsm::UnannouncedOwedRows(
      nsm::MergeTargets(OwedTargets(owed), nsm::MonitoredTargets(nsm_.registry())));
  if (!rows.empty()) store_->PutNotifyOwedAndWait(std::move(rows));
}

void Core::Serve(int32_t state, store::LoadedState loaded) {
  std::vector<nsm::NotifyTarget> owed = OwedTargets(loaded.notify_owed);
  // Rows recorded before a bump (RecordRoundAsOwed) carry state 0 until a round announces one:
  // the previous run stopped before its round began, so this one still waits for notify.hold.
  const bool round_never_began =
      restart_on_same_boot_ &&
      std::any_of(loaded.notify_owed.begin(), loaded.notify_owed.end(),
                  [](const store::NotifyOwed& row) { return row.state == 0; });
  // Restored locks are in place and the window open before the first request is read.
  // Grace is NLM's: a status monitor alone (serve = nsm) has no locks for clients to reclaim.
  const GracePlan plan = options_.serve_nlm
                             ? DecideGrace(store_->startup(), loaded, options_.grace)
                             : GracePlan{GracePlan::Kind::kNone, "NLM is not served here"};
  grace_.set_events(
      GraceEvents{[this](const GraceStartedEvent& started) {
                    if (!events_.grace_started) return;
                    events_.grace_started(nlockd::GraceStarted{
                        started.mode == lock::GraceMode::kClassic ? nlockd::GraceMode::kClassic
                                                                  : nlockd::GraceMode::kFineGrained,
                        started.duration, started.reason, started.restored_locks,
                        started.restored_shares, started.awaiting_reclaim});
                  },
                  [this](const GraceEndedEvent& ended) {
                    if (!events_.grace_ended) return;
                    events_.grace_ended(nlockd::GraceEnded{
                        std::string(lock::ToString(ended.reason)), ended.reclaimed, ended.dropped});
                  }});
  grace_.Begin(plan, loaded);
  loaded = {};
  for (const auto& server : rpc_servers_) server->Start();
  if (!rpc_servers_.empty()) {
    admin_backend_.MarkListening(rpc_servers_);
  } else {
    admin_backend_.MarkServing();
  }
  if (options_.rpcbind_register) {
    for (const auto& server : rpc_servers_) {
      registered_ = true;
      // The listener's family decides the netids ("::" adds tcp6 and udp6); an IPv4 listener
      // is registered at the wildcard address, as rpc.statd and lockd register theirs.
      const asio::ip::address address = server->address().is_v4()
                                            ? asio::ip::address(asio::ip::address_v4::any())
                                            : server->address();
      ++registrations_pending_;
      asio::co_spawn(executor_,
                     RegisterWithRpcbind(ServedBy(server->programs()),
                                         rpc::RpcbindListener{address, server->port()}),
                     asio::detached);
    }
    if (rpc_servers_.empty() && options_.advertised_port != 0) {
      registered_ = true;
      ++registrations_pending_;
      asio::co_spawn(executor_,
                     RegisterWithRpcbind(dispatcher_.ProgramVersions(),
                                         rpc::RpcbindListener{asio::ip::address_v4::any(),
                                                              options_.advertised_port}),
                     asio::detached);
    }
  }
  if (restart_on_same_boot_ && round_never_began) {
    spdlog::info(
        "nsm restarted on the same boot before its restart notification went out: state {} "
        "kept, {} hosts still owed it",
        state, owed.size());
  } else if (restart_on_same_boot_) {
    // Peers still hold this boot's locks: tell them nothing new, finish only what the previous
    // run owed.
    spdlog::info("nsm restarted on the same boot: state {} kept, no restart notification", state);
  }
  if (registrations_pending_ == 0) registrations_done_.Set();
  if (!restart_on_same_boot_ || !owed.empty()) {
    tasks_.Spawn("restart round", [&] {
      return NotifyWhenReady(state, std::move(owed), !restart_on_same_boot_ || round_never_began);
    });
  }
  started_.store(true);
}

void Core::BeforeStateBump(int32_t next_state) {
  if (early_file_) early_file_->Reserve(next_state, boot_id_);
}

void Core::ClientAdded(const std::string& mon_name, const std::string& my_name) {
  if (ha_callout_) ha_callout_->ClientAdded(mon_name, my_name);
  WriteEarlyHostsSoon();
}

void Core::ClientRemoved(const std::string& mon_name, const std::string& my_name) {
  if (ha_callout_) ha_callout_->ClientRemoved(mon_name, my_name);
  WriteEarlyHostsSoon();
}

void Core::NotifyReceived(const std::string& mon_name, const std::string& address, int32_t state) {
  if (ha_callout_) ha_callout_->NotifyReceived(mon_name, address, state);
}

void Core::WriteEarlyHostsSoon() {
  if (!KeepsEarlyFile() || early_hosts_pending_ || stopping_) return;
  early_hosts_pending_ = true;
  tasks_.Spawn("early-notify hosts", [this] { return WriteEarlyHostsAfterBurst(); });
}

// A task of tasks_. One list per burst of SM_MON: each write takes the whole registry.
asio::awaitable<void> Core::WriteEarlyHostsAfterBurst() {
  asio::steady_timer settle(executor_, kEarlyHostsSettle);
  co_await settle.async_wait(rpc::kUseTuple);
  early_hosts_pending_ = false;
  // Shutdown writes the last list itself.
  if (!stopping_) early_file_->SetHosts(nsm::MonitoredTargets(nsm_.registry()));
}

void Core::Restarted(int32_t state) {
  if (statd_directory_) {
    // Four bytes, as statd writes them; on the io thread, like the round it precedes.
    try {
      statd_directory_->WriteState(state);
    } catch (const std::exception& e) {
      spdlog::error("nsm cannot write state {} to rpc.statd's file: {}", state, e.what());
    }
  }
  StartNotificationRound(state, {});
}

void Core::HostRebooted(const std::string& mon_name, int32_t state) {
  const size_t released = bridge_.ReleaseRebootedHost(mon_name, state);
  if (events_.host_rebooted) events_.host_rebooted(nlockd::HostRebooted{mon_name, state, released});
}

void Core::StartNotificationRound(int32_t state, std::vector<nsm::NotifyTarget> owed,
                                  const std::vector<std::string>& told) {
  std::vector<nsm::NotifyTarget> targets =
      nsm::MergeTargets(std::move(owed), nsm::MonitoredTargets(nsm_.registry()));
  if (KeepsEarlyFile()) early_file_->SetHosts(nsm::MonitoredTargets(nsm_.registry()));
  if (!told.empty()) {
    std::unordered_set<std::string> answered;
    for (const std::string& mon_name : told) answered.insert(FoldHostName(mon_name));
    // They have this state: only the row recorded before the bump (RecordRoundAsOwed) is left.
    std::erase_if(targets, [&](const nsm::NotifyTarget& target) {
      if (!answered.contains(FoldHostName(target.mon_name))) return false;
      store_->RemoveNotifyOwed(target.mon_name,
                               [mon_name = target.mon_name](const std::exception_ptr& error) {
                                 if (error) {
                                   spdlog::warn("nsm cannot remove the owed notification of {}: {}",
                                                mon_name, Describe(error));
                                 }
                               });
      return true;
    });
    spdlog::info("nsm notifying {} hosts of state {} as {} ({} answered the early round)",
                 targets.size(), state, options_.name, told.size());
  } else {
    spdlog::info("nsm notifying {} hosts of state {} as {}", targets.size(), state, options_.name);
  }
  if (targets.empty()) return;
  notifier_.StartRound(options_.name, state, std::move(targets));
}

// A task of tasks_: shutdown cancels its waits.
asio::awaitable<void> Core::NotifyWhenReady(int32_t state, std::vector<nsm::NotifyTarget> owed,
                                            bool held) {
  const bool registered = co_await WaitForRegistrations();
  if (stopping_) co_return;
  if (!registered) {
    spdlog::warn("nsm notifying before rpcbind has our registrations: still trying after {} s",
                 rpc::kRegistrationWait.count());
  }
  if (held && options_.notify_hold.count() > 0 && !notify_hold_.IsSet()) {
    spdlog::info(
        "nsm holding the restart notification (state {}) until told to send it (SIGUSR2), at "
        "most {} s",
        state, options_.notify_hold.count());
    const bool released = co_await notify_hold_.WaitFor(options_.notify_hold);
    if (stopping_) co_return;
    if (!released) {
      spdlog::warn("nsm nobody said to send the restart notification in {} s: sending it now",
                   options_.notify_hold.count());
    }
  }
  if (restart_on_same_boot_) {
    // Only the hosts owed: any host monitored since learnt this state from its own calls.
    notifier_.StartRound(options_.name, state, std::move(owed));
    co_return;
  }
  std::vector<std::string> told;
  if (early_round_ && early_round_->state() == state) {
    // Its attempts end within the notification timeout; a host still unanswered then is told
    // again by this round, with the same state.
    co_await early_round_done_->WaitFor(options_.notify_timeout + kEarlyRoundMargin);
    if (stopping_) co_return;
    told = early_round_->Answered();
  }
  StartNotificationRound(state, std::move(owed), told);
}

void Core::ReleaseNotificationHold() {
  asio::post(executor_, [this] { notify_hold_.Set(); });
}

asio::awaitable<bool> Core::WaitForRegistrations() {
  co_return co_await registrations_done_.WaitFor(rpc::kRegistrationWait);
}

asio::awaitable<void> Core::RegisterWithRpcbind(std::vector<std::pair<uint32_t, uint32_t>> programs,
                                                rpc::RpcbindListener listener) {
  co_await rpcbind_.Register(std::move(programs), listener);
  // Registered, refused or given up: the restart round waits no longer for this one.
  if (--registrations_pending_ == 0) registrations_done_.Set();
}

asio::awaitable<void> Core::ShutDown() {
  if (stopping_) co_return;
  stopping_ = true;
  // Admin calls in flight are answered (or refused) before the services stop.
  admin_backend_.Close();
  grace_.Stop();
  // Cancel, then wait, owner by owner (docs/architecture.md, "Cancellation and shutdown"). A
  // round still waiting (for rpcbind, or held) is not begun: the hosts owed stay owed in the
  // store, and the next start notifies them (a status monitor alone, on the same boot) or every
  // monitored host (a new boot).
  co_await tasks_.CancelAndWait(rpc::kCoreTasksBound);
  for (const auto& server : rpc_servers_) co_await server->Shutdown();
  co_await calls_.CancelAndWait(rpc::kHostCallsBound);
  co_await nlm_.Shutdown();
  co_await grace_.Shutdown();
  co_await nsm_.Shutdown();
  // The last list, written by the file's thread, which its destructor waits for.
  if (KeepsEarlyFile() && start_posted_) {
    early_file_->SetHosts(nsm::MonitoredTargets(nsm_.registry()));
  }
  // The events of the calls served run; a callout that hangs is killed at its timeout.
  if (ha_callout_) ha_callout_->Stop(HaCalloutOptions{}.timeout);
  co_await notifier_.Shutdown();
  if (registered_) co_await rpcbind_.Unregister();
  // After the unregistration: rpc.statd, started on the files, refuses to start while 100024
  // is registered.
  if (start_posted_) GiveBackStatdFiles();
  if (start_posted_) {
    // Even state: down. A crash leaves it odd; the next start moves on anyway.
    try {
      store_->MarkCleanShutdown();
    } catch (const std::exception& e) {
      // A store that fails now (a disk that stopped answering) leaves this run marked as cut
      // short: the next start recovers as after a crash (it replays the lock log). The
      // shutdown goes on: the lease is still released.
      spdlog::error(
          "store: cannot mark the shutdown clean: {}; the next start recovers as after "
          "a crash",
          e.what());
    }
  }
  // A standby takes the service over at once rather than when the lease expires.
  if (ha_) ha_->Release();
  stopped_ = true;
}

std::vector<nlockd::HeldLock> Core::FindConflicts(const nlockd::ConflictQuery& query) const {
  std::vector<nlockd::HeldLock> out;
  auto range = lock::ByteRange::FromOffsetLength(query.range.offset, query.range.length);
  if (!range) return out;
  lock::StateFilter filter;
  filter.file = lock::FileKey(query.file);
  locks_.ForEachLock(
      [&](const lock::LockView& held) {
        if (!held.range.Overlaps(*range)) return;
        if (!query.exclusive && held.type != lock::LockType::kExclusive) return;
        if (query.except_host && held.owner.host.value() == *query.except_host) return;
        out.push_back(
            ToPublic(held.file, held.owner, held.range, held.type, held.awaiting_reclaim));
      },
      filter);
  return out;
}

rpc::CallContext Core::LocalContext(const std::string& host) const {
  rpc::CallContext context;
  // NLM keys the owner by context.peer, or by caller_name when configured so; both carry
  // the host id, so the owner is the same either way.
  context.peer = host;
  context.peer_address = asio::ip::address_v4::loopback();
  context.version = nlm::NLM4_VERS;
  context.program = nlockd::kNlmProgram;
  return context;
}

asio::awaitable<nlockd::FileRelease> Core::ReleaseFile(std::string file) {
  nlockd::FileRelease release;
  if (!serving()) co_return release;
  lock::StateFilter filter;
  filter.file = lock::FileKey(file);
  // Waiters first, so that releasing the locks grants nothing on a file that is going away.
  for (const lock::WaiterInfo& waiter : locks_.ListWaiters(filter)) {
    nlm::nlm4_cancargs args;
    args.block = true;
    args.exclusive = waiter.type == lock::LockType::kExclusive;
    args.alock = ToWireLock(
        file,
        nlockd::LockOwner{waiter.owner.host.value(), waiter.owner.svid, waiter.owner.oh.value()},
        ToPublic(waiter.range));
    co_await nlm_.Cancel(LocalContext(waiter.owner.host.value()), std::move(args));
    ++release.waiters;
  }
  std::vector<lock::LockOwner> owners;
  for (const lock::LockInfo& held : locks_.ListLocks(filter)) {
    if (std::find(owners.begin(), owners.end(), held.owner) == owners.end()) {
      owners.push_back(held.owner);
    }
  }
  for (const lock::LockOwner& owner : owners) {
    nlm::nlm4_unlockargs args;
    args.alock = ToWireLock(file, {owner.host.value(), owner.svid, owner.oh.value()}, {0, 0});
    co_await nlm_.Unlock(LocalContext(owner.host.value()), std::move(args));
    ++release.locks;
  }
  for (const lock::ShareInfo& share : locks_.ListShares(filter)) {
    nlm::nlm4_shareargs args;
    args.share.caller_name = share.owner.host.value();
    args.share.fh = file;
    args.share.oh = share.owner.oh.value();
    co_await nlm_.Unshare(LocalContext(share.owner.host.value()), std::move(args));
    ++release.shares;
  }
  spdlog::info("released file ({} bytes of handle): {} lock owners, {} shares, {} waiters",
               file.size(), release.locks, release.shares, release.waiters);
  co_return release;
}

nlockd::LockAnswer Core::LocalTest(const nlockd::LocalLockRequest& request) {
  if (!serving()) return {};
  lock::LockRequest test;
  test.file = lock::FileKey(request.file);
  test.owner = lock::LockOwner{lock::HostId(request.owner.host), request.owner.svid,
                               lock::OwnerHandle(request.owner.handle)};
  test.offset = request.range.offset;
  test.length = request.range.length;
  test.type = request.exclusive ? lock::LockType::kExclusive : lock::LockType::kShared;
  lock::TestOutcome outcome = locks_.Test(test);
  nlm_.SendGrants(std::move(outcome.grants));
  nlockd::LockAnswer answer{ToResult(outcome.status), std::nullopt};
  if (outcome.holder) {
    answer.holder = ToPublic(test.file, outcome.holder->owner, outcome.holder->range,
                             outcome.holder->type, false);
  }
  return answer;
}

asio::awaitable<nlockd::LockAnswer> Core::LocalLock(nlockd::LocalLockRequest request) {
  if (!serving()) co_return nlockd::LockAnswer{};
  nlm::nlm4_lockargs args;
  args.exclusive = request.exclusive;
  args.reclaim = request.reclaim;
  args.alock = ToWireLock(request.file, request.owner, request.range);
  // No SM_MON: the host program watches its own clients (NM_LOCK does the same).
  nlm::nlm4_res res = co_await nlm_.Lock(LocalContext(request.owner.host), std::move(args), false);
  nlockd::LockAnswer answer{ToResult(res.stat), std::nullopt};
  if (answer.result == nlockd::LockResult::kDenied) answer.holder = LocalTest(request).holder;
  co_return answer;
}

asio::awaitable<nlockd::LockResult> Core::LocalUnlock(std::string file, nlockd::LockOwner owner,
                                                      nlockd::ByteRange range) {
  if (!serving()) co_return nlockd::LockResult::kUnavailable;
  nlm::nlm4_unlockargs args;
  args.alock = ToWireLock(file, owner, range);
  nlm::nlm4_res res = co_await nlm_.Unlock(LocalContext(owner.host), std::move(args));
  co_return ToResult(res.stat);
}

size_t Core::ReleaseHost(const std::string& host) {
  if (!serving()) return 0;
  return nlm_.HostRebooted(host);
}

void Core::Reload(const nlockd::Options& next) {
  asio::post(executor_, [this, nsm = NsmOptionsFrom(next), notify = NotifierOptionsFrom(next)] {
    nsm_.SetCallerRules(nsm);
    notifier_.SetTiming(notify);
  });
}

}  // namespace nlockd::server
