// SPDX-License-Identifier: Apache-2.0
#include "server/config_table.hpp"

#include <algorithm>
#include <charconv>

#include <fmt/format.h>

#include "base/error.hpp"
#include "base/logging.hpp"
#include "server/config.hpp"

namespace nlockd::server {

namespace {

using std::chrono::seconds;

[[noreturn]] void Fail(const std::string& message) { throw Error(ErrorKind::kFailed, message); }

const std::string& Text(const SettingValue& v) { return std::get<std::string>(v); }
int64_t Int(const SettingValue& v) { return std::get<int64_t>(v); }
bool Bool(const SettingValue& v) { return std::get<bool>(v); }
SettingValue Secs(seconds s) { return static_cast<int64_t>(s.count()); }
SettingValue Size(size_t n) { return static_cast<int64_t>(n); }

constexpr int64_t kU16 = 65535;
constexpr int64_t kMillion = 10'000'000;

// The table, in the order of the shipped config file. Top-level keys come before the tables
// (TOML puts every key after a [table] header into that table).
const Setting kSettings[] = {
    {"listen", "--listen", SettingType::kString, 0, 0,
     "NLM and NSM, TCP and UDP, on one port. \"ADDR:PORT\", \"[V6ADDR]:PORT\"; port 0 picks a "
     "free one.",
     [](const SettingValue& v, Config& c) { c.listen = ParseListenAddress(Text(v)); },
     [](const Config& c) -> SettingValue { return FormatListenAddress(c.listen); }, false, false,
     "ADDR:PORT"},
    {"serve", "--serve", SettingType::kString, 0, 0,
     "Which programs this process serves and registers with rpcbind: \"nlm,nsm\" (both), \"nsm\" "
     "(in place of rpc.statd, beside a kernel lockd) or \"nlm\" (beside the system's status "
     "monitor, which nlockd then uses over loopback, as NFS-Ganesha does).",
     [](const SettingValue& v, Config& c) { ApplyServe(Text(v), c); },
     [](const Config& c) -> SettingValue {
       return std::string(c.serve_nlm && c.serve_nsm ? "nlm,nsm" : c.serve_nlm ? "nlm" : "nsm");
     },
     false, false, "LIST"},
    {"nsm_listen", "--nsm-listen", SettingType::kString, 0, 0,
     "Serve NSM on a port of its own (\"ADDR:PORT\"), as rpc.statd has. Empty: NSM shares "
     "`listen`.",
     [](const SettingValue& v, Config& c) {
       if (Text(v).empty()) {
         c.nsm_listen.reset();
       } else {
         c.nsm_listen = ParseListenAddress(Text(v));
       }
     },
     [](const Config& c) -> SettingValue {
       return c.nsm_listen ? FormatListenAddress(*c.nsm_listen) : std::string();
     },
     false, false, "ADDR:PORT"},
    {"callback_source_port", "--callback-source-port", SettingType::kInteger, 0, kU16,
     "Fixed source port for outgoing SM_NOTIFY and its rpcbind queries (like rpc.statd's "
     "--outgoing-port), for firewalls. 0: any. Status callbacks (procedure 16) always come "
     "from a privileged port when the process may bind one, since Linux lockd accepts no "
     "other, and several may be in flight to one peer at once.",
     [](const SettingValue& v, Config& c) {
       c.callback_source_port = static_cast<uint16_t>(Int(v));
     },
     [](const Config& c) -> SettingValue { return int64_t{c.callback_source_port}; }, false, false,
     "PORT"},
    {"name", "--name", SettingType::kString, 0, 0,
     "The name this server sends as mon_name in SM_NOTIFY. Empty: the host name.",
     [](const SettingValue& v, Config& c) { c.name = Text(v); },
     [](const Config& c) -> SettingValue { return c.name; }, false, false, "NAME"},
    {"nfs_conf", "--nfs-conf", SettingType::kString, 0, 0,
     "nfs-utils' configuration file (/etc/nfs.conf), read beneath this one with nfs-utils' "
     "meaning: serving NSM, its [statd] port, outgoing-port, name, state-directory-path "
     "(/var/lib/nfs when unset, as for rpc.statd) and ha-callout; serving NLM alone, its [lockd] "
     "port. A key set here or by a flag wins. Empty: "
     "not read.",
     [](const SettingValue& v, Config& c) { c.nfs_conf = Text(v); },
     [](const Config& c) -> SettingValue { return c.nfs_conf; }, false, false, "PATH"},
    {"log_level", "--log-level", SettingType::kString, 0, 0,
     "trace, debug, info, warn, error, critical or off.",
     [](const SettingValue& v, Config& c) {
       auto level = ParseLogLevel(Text(v));
       if (!level) Fail("unknown log level '" + Text(v) + "'");
       c.log_level = *level;
     },
     [](const Config& c) -> SettingValue { return LogLevelName(c.log_level); }, false, true,
     "LEVEL"},
    {"log_file", "--log-file", SettingType::kString, 0, 0,
     "Append the log to this file instead of standard error (where systemd's journal takes "
     "it). SIGUSR1 reopens it, so that logrotate can move it away (the Debian package's "
     "/etc/logrotate.d/nlockd rotates /var/log/nlockd/*.log). Empty: standard error.",
     [](const SettingValue& v, Config& c) { c.log_file = Text(v); },
     [](const Config& c) -> SettingValue { return c.log_file; }, false, false, "PATH"},
    {"pid_file", "--pid-file", SettingType::kString, 0, 0,
     "Write the process id to this file at start, hold a lock on it while running (a second "
     "nlockd given the same file refuses to start) and remove it at exit. Empty: none (systemd "
     "needs none).",
     [](const SettingValue& v, Config& c) { c.pid_file = Text(v); },
     [](const Config& c) -> SettingValue { return c.pid_file; }, false, false, "PATH"},
    {"store", "--store", SettingType::kString, 0, 0,
     "Where the NSM state number, monitor registrations and the lock table persist: \"memory:\" "
     "(nothing survives a restart), \"sqlite:PATH\" (one file; relative to the working "
     "directory) or a PostgreSQL URI \"postgresql://user@host/db\". Keep a password out of it: "
     "use store_password_file, libpq's PGPASSFILE or a service file.",
     [](const SettingValue& v, Config& c) { c.store = CheckStoreUri(Text(v)); },
     [](const Config& c) -> SettingValue { return c.store; }, false, false, "URI"},
    {"store_password_file", "--store-password-file", SettingType::kString, 0, 0,
     "A file holding the PostgreSQL password (one line), readable only by nlockd's user; "
     "relative to $CREDENTIALS_DIRECTORY when systemd's LoadCredential= provides it. Empty: "
     "none (libpq's own PGPASSFILE and service files still work).",
     [](const SettingValue& v, Config& c) { c.store_password_file = Text(v); },
     [](const Config& c) -> SettingValue { return c.store_password_file; }, false, false, "PATH"},
    {"ha", "--ha", SettingType::kBoolean, 0, 0,
     "High availability on a PostgreSQL store: the service (`name`) is active on one node at a "
     "time, decided by a lease in the database; a node that finds it held waits as standby and "
     "takes over when the lease is released or expires. Needs a postgresql:// store.",
     [](const SettingValue& v, Config& c) { c.ha = Bool(v); },
     [](const Config& c) -> SettingValue { return c.ha; }},
    {"ha_lease", "--ha-lease", SettingType::kInteger, 1, 3600,
     "Seconds of the HA lease. The active node renews it every third of that and stops "
     "serving when it could not renew in time; a standby takes over a dead node's service "
     "about this long after its last renewal.",
     [](const SettingValue& v, Config& c) { c.ha_lease = seconds(Int(v)); },
     [](const Config& c) { return Secs(c.ha_lease); }, false, false, "SECONDS"},
    {"ha_on_active", "--ha-on-active", SettingType::kString, 0, 0,
     "Shell command (/bin/sh -c) run when this node becomes the active one, e.g. to take a "
     "floating address; not waited for. Empty: none.",
     [](const SettingValue& v, Config& c) { c.ha_on_active = Text(v); },
     [](const Config& c) -> SettingValue { return c.ha_on_active; }, false, false, "COMMAND"},
    {"ha_on_standby", "--ha-on-standby", SettingType::kString, 0, 0,
     "Shell command (/bin/sh -c) run when this node stops being the active one (lease lost or "
     "released). Empty: none.",
     [](const SettingValue& v, Config& c) { c.ha_on_standby = Text(v); },
     [](const Config& c) -> SettingValue { return c.ha_on_standby; }, false, false, "COMMAND"},
    {"grace", "--grace", SettingType::kInteger, 0, 3600,
     "Seconds of grace period after a start, during which only reclaims of locks held before "
     "are granted. 0: none. Without a persistent store nlockd cannot know what was held, so it "
     "runs the whole period.",
     [](const SettingValue& v, Config& c) { c.grace = seconds(Int(v)); },
     [](const Config& c) { return Secs(c.grace); }, false, false, "SECONDS"},
    {"grace_floor", "--grace-floor", SettingType::kInteger, 0, 3600,
     "After a restart whose restored lock table may be incomplete (host reboot, lock "
     "persistence off), grace never ends early before this many seconds past the last "
     "SM_NOTIFY answer: a client retries a refused reclaim after 5 s.",
     [](const SettingValue& v, Config& c) { c.grace_floor = seconds(Int(v)); },
     [](const Config& c) { return Secs(c.grace_floor); }, false, false, "SECONDS"},
    {"grace_end_early", "--grace-end-early", SettingType::kBoolean, 0, 0,
     "End grace as soon as every restored lock and share was reclaimed, or dropped because its "
     "host rebooted again or never answered (with an incomplete table: once notifications are "
     "done and the floor has passed). false: grace always runs its whole length.",
     [](const SettingValue& v, Config& c) { c.grace_end_early = Bool(v); },
     [](const Config& c) -> SettingValue { return c.grace_end_early; }},
    {"persist_locks", "--persist-locks", SettingType::kBoolean, 0, 0,
     "Write the lock and share table to the store (before each answer), so that a restart "
     "restores it and serves unrelated new locks at once (fine-grained grace). false: restarts "
     "run classic grace, refusing every new lock until it ends.",
     [](const SettingValue& v, Config& c) { c.persist_locks = Bool(v); },
     [](const Config& c) -> SettingValue { return c.persist_locks; }},
    {"admin_listen", "--admin-listen", SettingType::kString, 0, 0,
     "The admin HTTP server: /metrics (Prometheus), /healthz, /readyz and the REST API that "
     "nlockctl uses (docs/api.md). \"ADDR:PORT\" (an IP address); port 0 picks a free one; "
     "\"off\" runs no admin server. An address other than loopback needs admin.token or "
     "admin.token_file, or admin.allow_unauthenticated_remote = true.",
     [](const SettingValue& v, Config& c) { ApplyAdminListen(Text(v), c); },
     [](const Config& c) -> SettingValue {
       return c.admin_enabled ? FormatListenAddress(c.admin_listen) : std::string("off");
     },
     false, false, "ADDR:PORT"},

    {"nlm.host_key", "--nlm-host-key", SettingType::kString, 0, 0,
     "What identifies a client host: \"address\" (its source address; caller_name is then a "
     "label) or \"caller_name\" (the name it sends, with its address: monitored and released on "
     "reboot by name, like Linux's nsm_use_hostnames; a client that sends another's name from "
     "its own address is another host, but can then announce that host's reboot). Use "
     "caller_name only for clients trusted to name themselves.",
     [](const SettingValue& v, Config& c) { c.nlm_key_by_caller_name = ParseHostKey(Text(v)); },
     [](const Config& c) -> SettingValue {
       return std::string(c.nlm_key_by_caller_name ? "caller_name" : "address");
     },
     false, false, "KEY"},
    {"nlm.granted_callback", "--granted-callback", SettingType::kString, 0, 0,
     "How a blocked lock that becomes free is announced: \"msg\" (GRANTED_MSG, as Linux servers "
     "do) or \"sync\" (GRANTED).",
     [](const SettingValue& v, Config& c) { c.nlm_granted_msg = ParseGrantedCallback(Text(v)); },
     [](const Config& c) -> SettingValue {
       return std::string(c.nlm_granted_msg ? "msg" : "sync");
     },
     false, false, "HOW"},
    {"nlm.max_hosts", "--max-hosts", SettingType::kInteger, 1, kMillion,
     "Client hosts monitored and holding state at once; past it new hosts get DENIED_NOLOCKS.",
     [](const SettingValue& v, Config& c) { c.max_hosts = static_cast<size_t>(Int(v)); },
     [](const Config& c) { return Size(c.max_hosts); }, false, false, "N"},
    {"nlm.max_locks_per_host", "--max-locks-per-host", SettingType::kInteger, 1, kMillion,
     "Lock entries one client host may hold (about 100 bytes each); past it its LOCKs get "
     "DENIED_NOLOCKS. Bounds what one client can cost by fragmenting ranges.",
     [](const SettingValue& v, Config& c) { c.max_locks_per_host = static_cast<size_t>(Int(v)); },
     [](const Config& c) { return Size(c.max_locks_per_host); }, false, false, "N"},
    {"nlm.max_owner_bytes_per_host", "--max-owner-bytes-per-host", SettingType::kInteger, 4096,
     int64_t{1} << 32,
     "Bytes one client host's lock owners may cost (each: its handle, up to 1 KiB, its host "
     "name and 256 for its record); past it a request that needs a new owner gets "
     "DENIED_NOLOCKS. 16 MiB is 13,000 owners with the largest handles.",
     [](const SettingValue& v, Config& c) {
       c.max_owner_bytes_per_host = static_cast<size_t>(Int(v));
     },
     [](const Config& c) { return Size(c.max_owner_bytes_per_host); }, false, false, "BYTES"},
    {"nlm.max_waiters_per_host", "--max-waiters-per-host", SettingType::kInteger, 1, kMillion,
     "Blocked LOCKs one client host may have queued; past it its blocking LOCKs get "
     "DENIED_NOLOCKS (a retransmission of one already queued is still answered BLOCKED).",
     [](const SettingValue& v, Config& c) { c.max_waiters_per_host = static_cast<size_t>(Int(v)); },
     [](const Config& c) { return Size(c.max_waiters_per_host); }, false, false, "N"},
    {"nlm.max_waiters", "--max-waiters", SettingType::kInteger, 1, kMillion,
     "Blocked LOCKs queued across all client hosts; past it blocking LOCKs get DENIED_NOLOCKS.",
     [](const SettingValue& v, Config& c) { c.max_waiters = static_cast<size_t>(Int(v)); },
     [](const Config& c) { return Size(c.max_waiters); }, false, false, "N"},
    {"nlm.deadlock_detection", "--deadlock-detection", SettingType::kBoolean, 0, 0,
     "Refuse a blocking LOCK that would close a cycle of owners waiting on each other, across "
     "files and hosts (NLM4_DEADLCK; DENIED in versions 1 and 3), as Linux lockd does: the "
     "client's F_SETLKW then fails with EDEADLK. false: such a request waits until someone "
     "gives way.",
     [](const SettingValue& v, Config& c) { c.nlm_deadlock_detection = Bool(v); },
     [](const Config& c) -> SettingValue { return c.nlm_deadlock_detection; }},

    {"nsm.max_registrations", "--nsm-max-registrations", SettingType::kInteger, 1, kMillion,
     "Monitor registrations (SM_MON, and the client hosts nlockd's NLM monitors) held at most; "
     "past it SM_MON answers stat_fail and NLM answers DENIED_NOLOCKS to new hosts.",
     [](const SettingValue& v, Config& c) {
       c.nsm_max_registrations = static_cast<size_t>(Int(v));
     },
     [](const Config& c) { return Size(c.nsm_max_registrations); }, false, false, "N"},
    {"nsm.allowlist", "--nsm-allowlist", SettingType::kStringList, 0, 0,
     "Addresses besides loopback allowed to call SM_MON, SM_UNMON, SM_UNMON_ALL and "
     "SM_SIMU_CRASH (IP literals). Everyone else is refused, as rpc.statd refuses non-local "
     "callers.",
     [](const SettingValue& v, Config& c) {
       c.nsm_allowlist.clear();
       for (const auto& text : std::get<std::vector<std::string>>(v)) {
         c.nsm_allowlist.push_back(ParseAllowedAddress(text));
       }
     },
     [](const Config& c) -> SettingValue { return c.nsm_allowlist; }, false, true, "ADDR"},
    {"nsm.callback_programs", "--nsm-callback-programs", SettingType::kIntegerList, 1, INT32_MAX,
     "Programs an SM_MON may name as its status callback (my_prog); 100021 is NLM, as "
     "rpc.statd allows. Others are refused so that a registration cannot aim nlockd at an "
     "arbitrary service.",
     [](const SettingValue& v, Config& c) {
       c.nsm_callback_programs.clear();
       for (int64_t program : std::get<std::vector<int64_t>>(v)) {
         c.nsm_callback_programs.push_back(ParseCallbackProgram(program));
       }
     },
     [](const Config& c) -> SettingValue {
       return std::vector<int64_t>(c.nsm_callback_programs.begin(), c.nsm_callback_programs.end());
     },
     false, true, "PROGRAM"},
    {"nsm.check_notifier_address", "--nsm-check-notifier-address", SettingType::kBoolean, 0, 0,
     "Act on an SM_NOTIFY only when it comes from an address the monitored host is known by "
     "(its IP-literal name or the address it locked from), so a spoofed notification cannot drop "
     "another host's locks.",
     [](const SettingValue& v, Config& c) { c.nsm_check_notifier_address = Bool(v); },
     [](const Config& c) -> SettingValue { return c.nsm_check_notifier_address; }, false, true},
    {"nsm.callback_timeout", "--nsm-callback-timeout", SettingType::kInteger, 1, 300,
     "Seconds: each status callback attempt's total deadline (portmapper lookup plus the call).",
     [](const SettingValue& v, Config& c) { c.nsm_callback_timeout = seconds(Int(v)); },
     [](const Config& c) { return Secs(c.nsm_callback_timeout); }, false, false, "SECONDS"},

    {"notify.statd_port", "--notify-statd-port", SettingType::kInteger, 0, kU16,
     "The peers' statd port; 0 asks each peer's portmapper (GETPORT 100024 v1, UDP then TCP).",
     [](const SettingValue& v, Config& c) { c.notify_statd_port = static_cast<uint16_t>(Int(v)); },
     [](const Config& c) -> SettingValue { return int64_t{c.notify_statd_port}; }, false, true,
     "PORT"},
    {"notify.rpcbind_port", "--notify-rpcbind-port", SettingType::kInteger, 1, kU16,
     "Where peers' portmappers listen.",
     [](const SettingValue& v, Config& c) {
       c.notify_rpcbind_port = static_cast<uint16_t>(Int(v));
     },
     [](const Config& c) -> SettingValue { return int64_t{c.notify_rpcbind_port}; }, false, true,
     "PORT"},
    {"notify.timeout", "--notify-timeout", SettingType::kInteger, 1, 300,
     "Seconds: each attempt's total deadline (name lookup, GETPORT, SM_NOTIFY and its reply).",
     [](const SettingValue& v, Config& c) { c.notify_timeout = seconds(Int(v)); },
     [](const Config& c) { return Secs(c.notify_timeout); }, false, true, "SECONDS"},
    {"notify.backoff", "--notify-backoff", SettingType::kInteger, 1, 120,
     "Seconds before the first retry of an unanswered host; doubles each time, up to 120.",
     [](const SettingValue& v, Config& c) { c.notify_backoff = seconds(Int(v)); },
     [](const Config& c) { return Secs(c.notify_backoff); }, false, true, "SECONDS"},
    {"notify.budget", "--notify-budget", SettingType::kInteger, 1, 86400,
     "Seconds after the round began when an unanswered host is given up (sm-notify: 15 "
     "minutes).",
     [](const SettingValue& v, Config& c) { c.notify_budget = seconds(Int(v)); },
     [](const Config& c) { return Secs(c.notify_budget); }, false, true, "SECONDS"},
    {"notify.drop_unreachable", "--notify-drop-unreachable", SettingType::kBoolean, 0, 0,
     "A host given up on is treated as crashed: its locks restored from before the restart are "
     "dropped and the waiters they blocked are served. false: they wait for the grace timer.",
     [](const SettingValue& v, Config& c) { c.notify_drop_unreachable = Bool(v); },
     [](const Config& c) -> SettingValue { return c.notify_drop_unreachable; }},

    {"notify.hold", "--notify-hold", SettingType::kInteger, 0, 3600,
     "Seconds: on a new boot, hold the restart notification round until told to send it "
     "(SIGUSR2), at most this long; 0 sends it at start. Beside the kernel's NFS server, "
     "systemd sends the signal once nfsd runs (nlockd-statd's rpc-statd-notify.service), as it "
     "runs sm-notify then: a client told of the reboot earlier reclaims before the server's "
     "lockd listens, and retries only seconds later.",
     [](const SettingValue& v, Config& c) { c.notify_hold = seconds(Int(v)); },
     [](const Config& c) { return Secs(c.notify_hold); }, false, false, "SECONDS"},

    {"statd.state_directory", "--statd-state-directory", SettingType::kString, 0, 0,
     "rpc.statd's state directory (/var/lib/nfs on Debian), when nlockd serves NSM in statd's "
     "place. At start, unless nlockd holds it already, nlockd takes over statd's monitor list "
     "(sm/), the hosts still owed a reboot notification (sm.bak/) and its state number (state); "
     "a statd that ran on this boot makes the start a restart on the same boot (state kept, "
     "nobody notified). While running nlockd keeps the state file current; a clean stop (or "
     "`nlockd --export-statd-files`) writes sm/, sm.bak/ and state back for rpc.statd. The "
     "file nlockd.held in it says that nlockd holds it. Empty: statd's files are left alone.",
     [](const SettingValue& v, Config& c) {
       if (!Text(v).empty() && Text(v).front() != '/') {
         Fail("statd.state_directory must be an absolute path, as rpc.statd requires");
       }
       c.statd_state_directory = Text(v);
     },
     [](const Config& c) -> SettingValue { return c.statd_state_directory; }, false, false, "PATH"},
    {"statd.ha_callout", "--statd-ha-callout", SettingType::kString, 0, 0,
     "rpc.statd's --ha-callout: a program run as PROGRAM add-client MON_NAME MY_NAME (SM_MON), "
     "PROGRAM del-client MON_NAME MY_NAME (SM_UNMON, SM_UNMON_ALL) and PROGRAM sm-notify "
     "MON_NAME ADDRESS STATE (each SM_NOTIFY received), for clustered NFS servers. Unlike "
     "statd, nlockd runs it beside the NSM service, one event at a time in order, and ends a "
     "run after 10 s (SIGTERM, then SIGKILL); at most 10,000 events wait, later ones are "
     "dropped with a warning. Empty: none.",
     [](const SettingValue& v, Config& c) { c.statd_ha_callout = Text(v); },
     [](const Config& c) -> SettingValue { return c.statd_ha_callout; }, false, false, "PATH"},
    {"rpcbind.register", "--rpcbind-register", SettingType::kBoolean, 0, 0,
     "Register NLM (100021 v1, v3, v4) and NSM (100024 v1) on TCP and UDP with the portmapper "
     "at start, and unregister at shutdown. Without a portmapper nlockd runs on and logs it.",
     [](const SettingValue& v, Config& c) { c.rpcbind_register = Bool(v); },
     [](const Config& c) -> SettingValue { return c.rpcbind_register; }},
    {"rpcbind.host", "--rpcbind-host", SettingType::kString, 0, 0,
     "The portmapper's address (an IP literal).",
     [](const SettingValue& v, Config& c) {
       c.rpcbind_host = ParseIpLiteral(Text(v), "rpcbind host");
     },
     [](const Config& c) -> SettingValue { return c.rpcbind_host; }, false, false, "ADDR"},
    {"rpcbind.port", "--rpcbind-port", SettingType::kInteger, 1, kU16, "The portmapper's port.",
     [](const SettingValue& v, Config& c) { c.rpcbind_port = static_cast<uint16_t>(Int(v)); },
     [](const Config& c) -> SettingValue { return int64_t{c.rpcbind_port}; }, false, false, "PORT"},

    {"rpc.max_connections", "--max-connections", SettingType::kInteger, 1, 1 << 20,
     "TCP connections served at once; more are accepted and closed at once.",
     [](const SettingValue& v, Config& c) { c.max_connections = static_cast<size_t>(Int(v)); },
     [](const Config& c) { return Size(c.max_connections); }, false, false, "N"},
    {"rpc.max_record_size", "--max-record-size", SettingType::kInteger, 1024, 64 << 20,
     "The largest RPC record (bytes). A larger one closes its connection before anything is "
     "allocated for it. NLM and NSM calls are a few KiB at most.",
     [](const SettingValue& v, Config& c) { c.max_record_size = static_cast<size_t>(Int(v)); },
     [](const Config& c) { return Size(c.max_record_size); }, false, false, "BYTES"},
    {"rpc.idle_timeout", "--idle-timeout", SettingType::kInteger, 1, 86400,
     "Seconds after which a TCP connection with nothing in flight and no traffic is closed.",
     [](const SettingValue& v, Config& c) { c.idle_timeout = seconds(Int(v)); },
     [](const Config& c) { return Secs(c.idle_timeout); }, false, false, "SECONDS"},

    {"admin.token", "--admin-token", SettingType::kString, 0, 0,
     "When not empty, every admin endpoint but /healthz requires \"Authorization: Bearer "
     "<token>\". Prefer admin.token_file: a flag shows in ps and this file may be readable by "
     "others.",
     [](const SettingValue& v, Config& c) { c.admin_token = Text(v); },
     [](const Config& c) -> SettingValue { return c.admin_token; }, true, true, "TOKEN"},
    {"admin.token_file", "--admin-token-file", SettingType::kString, 0, 0,
     "A file holding the admin token (one line), readable only by nlockd's user (nlockd refuses "
     "one that group or others may read); relative to $CREDENTIALS_DIRECTORY when systemd's "
     "LoadCredential= provides it. Read again on SIGHUP.",
     [](const SettingValue& v, Config& c) { c.admin_token_file = Text(v); },
     [](const Config& c) -> SettingValue { return c.admin_token_file; }, false, true, "PATH"},
    {"admin.open_writes", "--admin-open-writes", SettingType::kBoolean, 0, 0,
     "Serve the admin requests that change state (grace end, host release, notify, "
     "registration delete: every method but GET and HEAD) without a token. false: they need "
     "admin.token or admin.token_file, and without one "
     "they are refused (403), so that anyone who can reach the admin port cannot drop locks. "
     "Reads (GET, HEAD) need a token only when one is set.",
     [](const SettingValue& v, Config& c) { c.admin_open_writes = Bool(v); },
     [](const Config& c) -> SettingValue { return c.admin_open_writes; }, false, true},
    {"admin.allow_unauthenticated_remote", "--admin-allow-unauthenticated-remote",
     SettingType::kBoolean, 0, 0,
     "Serve the admin API on an address other than loopback without a token. false: nlockd "
     "refuses to start with such an admin_listen unless admin.token or admin.token_file is "
     "set, since anyone who reaches the port could read every lock (and, with "
     "admin.open_writes, drop them). Set it only when a firewall or a private network already "
     "guards the port.",
     [](const SettingValue& v, Config& c) { c.admin_allow_unauthenticated_remote = Bool(v); },
     [](const Config& c) -> SettingValue { return c.admin_allow_unauthenticated_remote; }},
};

const SettingSection kSections[] = {
    {"nlm", "The NLM lock manager."},
    {"nsm", "The NSM status monitor: registrations (SM_MON) and their status callbacks."},
    {"notify",
     "The restart notification: after each start (and SM_SIMU_CRASH) nlockd sends SM_NOTIFY to "
     "the status monitor of every monitored host, retrying unanswered hosts as sm-notify does."},
    {"statd",
     "In rpc.statd's place (serve = \"nsm\" beside the kernel's lockd): statd's files and its "
     "callout."},
    {"rpcbind", "Registration with the local portmapper."},
    {"rpc", "The NLM and NSM listener's limits."},
    {"admin", "Who may use the admin server."},
};

void CheckRange(const Setting& setting, int64_t value, const std::string& where) {
  if (value < setting.min || value > setting.max) {
    Fail(fmt::format("{}: {} = {} is out of range {}..{}", where, setting.key, value, setting.min,
                     setting.max));
  }
}

int64_t ParseInteger(const Setting& setting, const std::string& text) {
  int64_t value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end) {
    Fail(fmt::format("{}: '{}' is not an integer", setting.flag, text));
  }
  return value;
}

bool ParseBoolean(const Setting& setting, const std::string& text) {
  if (text == "true" || text == "yes" || text == "on" || text == "1") return true;
  if (text == "false" || text == "no" || text == "off" || text == "0") return false;
  Fail(fmt::format("{}: '{}' is not true or false", setting.flag, text));
}

std::string Quote(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  return out + "\"";
}

}  // namespace

std::span<const Setting> Settings() { return kSettings; }
std::span<const SettingSection> SettingSections() { return kSections; }

const Setting* FindSetting(std::string_view key) {
  for (const auto& setting : kSettings) {
    if (setting.key == key) return &setting;
  }
  return nullptr;
}

void ApplySetting(const Setting& setting, const SettingValue& value, const std::string& where,
                  Config& config) {
  if (setting.type == SettingType::kInteger) CheckRange(setting, Int(value), where);
  if (setting.type == SettingType::kIntegerList) {
    for (int64_t element : std::get<std::vector<int64_t>>(value)) {
      CheckRange(setting, element, where);
    }
  }
  try {
    setting.apply(value, config);
  } catch (const Error& e) {
    Fail(fmt::format("{}: {}: {}", where, setting.key, e.what()));
  }
}

SettingValue ParseFlagValue(const Setting& setting, const std::vector<std::string>& texts) {
  switch (setting.type) {
    case SettingType::kString:
      return texts.empty() ? std::string() : texts.back();
    case SettingType::kInteger:
      return ParseInteger(setting, texts.empty() ? std::string() : texts.back());
    case SettingType::kBoolean:
      return ParseBoolean(setting, texts.empty() ? std::string() : texts.back());
    case SettingType::kStringList:
      return texts;
    case SettingType::kIntegerList: {
      std::vector<int64_t> out;
      for (const auto& text : texts) out.push_back(ParseInteger(setting, text));
      return out;
    }
  }
  Fail("unknown setting type");
}

std::string FlagValueName(const Setting& setting) {
  if (!setting.value_name.empty()) return std::string(setting.value_name);
  switch (setting.type) {
    case SettingType::kBoolean:
      return "BOOL";
    case SettingType::kString:
    case SettingType::kStringList:
      return "TEXT";
    case SettingType::kInteger:
    case SettingType::kIntegerList:
      return "INT";
  }
  return "?";
}

std::string FormatValue(const SettingValue& value) {
  struct Visitor {
    std::string operator()(const std::string& v) const { return Quote(v); }
    std::string operator()(int64_t v) const { return std::to_string(v); }
    std::string operator()(bool v) const { return v ? "true" : "false"; }
    std::string operator()(const std::vector<std::string>& v) const {
      std::vector<std::string> quoted;
      for (const auto& s : v) quoted.push_back(Quote(s));
      return fmt::format("[{}]", fmt::join(quoted, ", "));
    }
    std::string operator()(const std::vector<int64_t>& v) const {
      return fmt::format("[{}]", fmt::join(v, ", "));
    }
  };
  return std::visit(Visitor{}, value);
}

std::string_view TypeName(SettingType type) {
  switch (type) {
    case SettingType::kString:
      return "a string";
    case SettingType::kInteger:
      return "an integer";
    case SettingType::kBoolean:
      return "true or false";
    case SettingType::kStringList:
      return "an array of strings";
    case SettingType::kIntegerList:
      return "an array of integers";
  }
  return "?";
}

}  // namespace nlockd::server
