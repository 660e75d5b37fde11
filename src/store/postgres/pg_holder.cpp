// SPDX-License-Identifier: Apache-2.0
#include "store/postgres/pg_holder.hpp"

#include <optional>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <unistd.h>

#include "base/error.hpp"

namespace nlockd::store {
namespace {

// First key of nlockd's holder locks ("nlkd"); the second is hashtext() of the node id. The
// two-key form shows in pg_locks as classid / objid with objsubid 2.
constexpr int32_t kHolderLockClass = 0x6e6c6b64;

// How long a taken lock is retried before the holder counts as alive, and how often.
constexpr std::chrono::milliseconds kDeadHolderGrace{1000};
constexpr std::chrono::milliseconds kRetryEvery{50};

std::string HostName() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "?";
  return name;
}

}  // namespace

PgHolder::PgHolder(const std::string& conninfo, std::chrono::seconds connect_timeout,
                   const std::string& node_id)
    : conn_(std::make_unique<PgConn>(conninfo, connect_timeout)) {
  // Names this process for whoever finds the lock taken.
  const std::vector<SqlValue> name{
      SqlValue::Text(fmt::format("nlockd pid {} on {}", getpid(), HostName()))};
  conn_->ForEachRow(PgStep{nullptr, "SELECT set_config('application_name', $1, false)", name, {}},
                    [](const SqlRow&) {});

  // The server notices a holder whose host died (rather than its process, whose socket the
  // kernel closes) by TCP keepalive: within about 5 + 3 * 2 s rather than the system's hours.
  conn_->Exec(
      "SET tcp_keepalives_idle = 5; SET tcp_keepalives_interval = 2; "
      "SET tcp_keepalives_count = 3");

  const std::vector<SqlValue> key{SqlValue::Int32(kHolderLockClass),
                                  SqlValue::Text("nlockd node " + node_id)};
  // A holder killed just now leaves its session until the server reads the closed socket: a
  // restart right after kill -9 waits that long rather than failing.
  const auto give_up = std::chrono::steady_clock::now() + kDeadHolderGrace;
  for (;;) {
    bool taken = false;
    conn_->ForEachRow(
        PgStep{nullptr, "SELECT pg_try_advisory_lock($1, hashtext($2))::int4", key, {}},
        [&](const SqlRow& row) { taken = row.Int(0) != 0; });
    if (taken) return;
    if (std::chrono::steady_clock::now() >= give_up) break;
    std::this_thread::sleep_for(kRetryEvery);
  }

  std::optional<std::string> holder;
  conn_->ForEachRow(PgStep{nullptr,
                           "SELECT a.pid::int4, COALESCE(a.application_name, ''), "
                           "COALESCE(host(a.client_addr), 'a local socket') "
                           "FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
                           "WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2 "
                           "AND l.classid = $1::oid AND l.objid = hashtext($2)::oid",
                           key,
                           {}},
                    [&](const SqlRow& row) {
                      holder = fmt::format("'{}', connected from {} (server backend pid {})",
                                           row.Bytes(1), row.Bytes(2), row.Int(0));
                    });
  throw Error(ErrorKind::kFailed,
              fmt::format("PostgreSQL store {}: service '{}' is in use by another nlockd ({}); "
                          "a service's state is served by one process at a time: stop that one "
                          "first, or run both with ha = true",
                          DescribePgServer(conninfo), node_id,
                          holder.value_or("its session is not visible to this user")));
}

}  // namespace nlockd::store
