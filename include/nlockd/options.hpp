// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "nlockd/export.hpp"

namespace nlockd {

// Everything a LockService is built from. The daemon reads the same fields from its config file
// and flags (config/nlockd.toml documents each key); a host program fills them in itself. The
// defaults are the daemon's.
//
// Plain data: copy it, change it, pass it by value. New fields are added at the end of a minor
// release with a default that keeps the old behaviour.
struct NLOCKD_EXPORT Options {
  // The mon_name this server sends in SM_NOTIFY after a restart; empty = the host name.
  std::string name;

  // Where the state number, the NSM registrations and (with persist_locks) the lock table
  // persist: "memory:" (nothing survives a restart), "sqlite:PATH" or "postgresql://...".
  // Several services in one process need stores of their own.
  std::string store = "sqlite:./var/nlockd.db";
  // Write the lock and share table to the store, so that a restart restores it and the grace
  // period can end as soon as every restored lock was reclaimed. Off: every restart runs a full
  // ("classic") grace period.
  bool persist_locks = true;

  // High availability (PostgreSQL store only): `name` is a service that several nodes may run,
  // one active at a time, decided by a lease in the database that the active node renews every
  // ha_lease / 3. A node that finds the lease held waits as standby until it is free, then takes
  // it, loads the service's state and serves; a node that cannot renew in time stops serving.
  bool ha = false;
  std::chrono::seconds ha_lease{5};
  // Shell commands (/bin/sh -c) run when this node becomes active or stops being active (e.g.
  // to move a floating address); not awaited, their exit status only logged. Empty: none.
  std::string ha_on_active;
  std::string ha_on_standby;

  // Grace period after a start, for clients to reclaim their locks; 0 for none.
  std::chrono::seconds grace{90};
  // A classic grace period never ends early before this long after the last SM_NOTIFY answer.
  std::chrono::seconds grace_floor{10};
  // End grace once every restored lock and share was reclaimed or dropped.
  bool grace_end_early = true;

  // Register the NLM and NSM programs with the portmapper at Start() and unregister them at
  // shutdown: at the port of Listen(), or at `advertised_port` when the host serves them on its
  // own port. Nothing is registered when neither is set.
  bool rpcbind_register = true;
  std::string rpcbind_host = "127.0.0.1";
  uint16_t rpcbind_port = 111;
  // The host's own RPC port, to register with rpcbind when it routes NLM and NSM calls to
  // HandleCall(); 0 when it registers them itself (LockService::Programs()).
  uint16_t advertised_port = 0;

  // What identifies an NLM client host: its source address (false, the default) or the
  // caller_name it sends (true; trusts what the client says about itself).
  bool nlm_key_by_caller_name = false;
  // How a blocked lock is granted: GRANTED_MSG (true, what Linux servers send) or GRANTED.
  bool nlm_granted_msg = true;
  // Client hosts monitored and holding state at once.
  size_t max_hosts = 10'000;
  // What one client host, and all together, can make the lock table keep: lock entries per
  // host, the bytes of one host's lock owners (handle, host name and record), blocked requests
  // per host and in all. Past each a request gets DENIED_NOLOCKS.
  size_t max_locks_per_host = 1'000'000;
  size_t max_owner_bytes_per_host = 16 << 20;
  size_t max_waiters_per_host = 10'000;
  size_t max_waiters = 100'000;
  // Refuse a blocking lock that would close a wait-for cycle (NLM4_DEADLCK; DENIED before
  // version 4), as Linux lockd does through the VFS. false: such a request waits, for ever.
  bool nlm_deadlock_detection = true;

  // Limits of the listener made by Listen() (hosts with their own transport set their own).
  size_t max_connections = 1024;
  size_t max_record_size = 1 << 20;
  std::chrono::seconds idle_timeout{300};

  // NSM: registrations held at most; addresses besides loopback allowed SM_MON, SM_UNMON,
  // SM_UNMON_ALL and SM_SIMU_CRASH; programs a registration may name as its status callback;
  // whether an SM_NOTIFY is acted on only from a known address of the host; each status
  // callback's deadline.
  size_t nsm_max_registrations = 10'000;
  std::vector<std::string> nsm_allowlist;
  std::vector<int32_t> nsm_callback_programs{100021};
  bool nsm_check_notifier_address = true;
  std::chrono::seconds nsm_callback_timeout{5};

  // The restart notification round: peers' statd UDP port (0 asks their rpcbind), their
  // portmapper port, each attempt's deadline, the first retry delay (doubling to 120 s), and
  // when a host is given up; a host given up on loses its restored locks when
  // notify_drop_unreachable.
  uint16_t notify_statd_port = 0;
  uint16_t notify_rpcbind_port = 111;
  std::chrono::seconds notify_timeout{5};
  std::chrono::seconds notify_backoff{2};
  std::chrono::seconds notify_budget{900};
  bool notify_drop_unreachable = true;
  // On a new boot, hold the restart notification round until LockService::
  // ReleaseNotificationHold() (nlockd: SIGUSR2), at most this long; 0 sends it at start. For a
  // status monitor beside the kernel's NFS server: its clients reclaim as soon as they are
  // told, so the round should wait until the server's lockd listens, as sm-notify runs after
  // nfs-server.service.
  std::chrono::seconds notify_hold{0};

  // When not empty, HandleAdminRequest() requires "Authorization: Bearer <token>" on every
  // path but /healthz.
  std::string admin_token;

  // Which programs this service serves and registers with rpcbind: NLM (100021) and NSM
  // (100024). NSM alone replaces rpc.statd beside a kernel lockd. NLM alone monitors client
  // hosts through the system's status monitor (SM_MON over loopback, as NFS-Ganesha does) and
  // accepts its status callbacks (procedure 16) only from loopback and a privileged port.
  bool serve_nlm = true;
  bool serve_nsm = true;
  // Fixed source port for outgoing SM_NOTIFY and its rpcbind queries (like rpc.statd's
  // --outgoing-port), for firewalls; 0 = any. Status callbacks always use a privileged port
  // when the process may bind one (Linux lockd accepts procedure 16 only from one).
  uint16_t callback_source_port = 0;
  // rpc.statd's state directory (/var/lib/nfs on Debian), when NSM is served in statd's place:
  // at start nlockd takes over its monitor list (sm/), the hosts owed a notification (sm.bak/)
  // and its state number, unless it holds the directory already; while running it keeps the
  // state file current; at a clean stop it writes them back for rpc.statd. Empty: statd's
  // files are left alone (a new store only continues statd's state number, from
  // /var/lib/nfs/state).
  std::string statd_state_directory;
  // rpc.statd's --ha-callout: a program run with add-client, del-client and sm-notify events
  // (NSM served here). Empty: none.
  std::string statd_ha_callout;
};

}  // namespace nlockd
