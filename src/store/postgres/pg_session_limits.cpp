// SPDX-License-Identifier: Apache-2.0
#include "store/postgres/pg_session_limits.hpp"

#include <algorithm>
#include <map>
#include <utility>

#include <fmt/format.h>

#include "base/error.hpp"

namespace nlockd::store {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

seconds AtLeastOneSecond(milliseconds length) {
  return std::max(seconds(1), std::chrono::duration_cast<seconds>(length));
}

// One server setting, its value in the unit pg_settings reports it in (ms, s or a count).
struct Setting {
  const char* name;
  int64_t value;
  bool tcp;  // meaningless (reads 0) on a Unix-domain socket
};

std::vector<Setting> SettingsOf(const PgSessionLimits& limits) {
  std::vector<Setting> settings{{"statement_timeout", 0, false}};
  const auto add = [&](const char* name, int64_t value, bool tcp) {
    if (value > 0) settings.push_back({name, value, tcp});
  };
  add("lock_timeout", limits.lock_timeout.count(), false);
  add("idle_in_transaction_session_timeout", limits.idle_in_transaction.count(), false);
  add("tcp_keepalives_idle", limits.server_keepalives_idle.count(), true);
  add("tcp_keepalives_interval", limits.server_keepalives_interval.count(), true);
  add("tcp_keepalives_count", limits.server_keepalives_count, true);
  add("tcp_user_timeout", limits.server_user_timeout.count(), true);
  return settings;
}

}  // namespace

PgSessionLimits LeaseSessionLimits(milliseconds lease) {
  PgSessionLimits limits;
  // A lease statement waits for the row while a fenced write commits (milliseconds); a longer
  // wait means a transaction that cannot finish, which a standby then ends (PgLease::
  // EndStaleTransactions) and a holder outlasts by retrying its renewal.
  limits.lock_timeout = std::clamp(lease / 10, milliseconds(100), milliseconds(1000));
  // The lease connection opens a transaction only to create the schema: a node cut off inside
  // it must not keep the schema lock from the others.
  limits.idle_in_transaction = std::clamp(lease / 2, milliseconds(500), milliseconds(30000));
  // Not sooner than a lease (plus three probes): see LeaseSessionLimits' comment.
  limits.server_keepalives_idle = AtLeastOneSecond(lease);
  limits.server_keepalives_interval = seconds(1);
  limits.server_keepalives_count = 3;
  limits.server_user_timeout = lease + seconds(3);
  // A standby's call on a dead path fails within about a lease instead of hanging; the holder's
  // own deadline stops it sooner in any case.
  limits.client.keepalives_idle = AtLeastOneSecond(lease / 2);
  limits.client.keepalives_interval = seconds(1);
  limits.client.keepalives_count = 2;
  limits.client.user_timeout = lease;
  return limits;
}

PgSessionLimits StoreSessionLimits(milliseconds lease) {
  PgSessionLimits limits;
  // nlockd leaves no gap between the statements of its transactions but a round trip: half a
  // lease is far more, and short enough that a standby finds the row free by the time the
  // lease expires.
  limits.idle_in_transaction = std::clamp(lease / 2, milliseconds(500), milliseconds(30000));
  // A session whose path died mid-transaction (a NAT dropping the flow) holds the lease row
  // share-locked until the server notices: within about half a lease.
  limits.server_keepalives_idle = AtLeastOneSecond(lease / 4);
  limits.server_keepalives_interval = seconds(1);
  limits.server_keepalives_count = 2;
  limits.server_user_timeout = std::max(milliseconds(1000), lease / 2);
  return limits;
}

std::vector<std::string> ApplySessionLimits(PgConn& conn, const PgSessionLimits& limits) {
  const std::vector<Setting> settings = SettingsOf(limits);
  std::vector<std::string> problems;
  std::map<std::string, std::string> wanted;
  // One round trip for all; one per setting only to find the one a server refuses.
  std::string all = "SELECT 1";
  std::vector<SqlValue> params;
  for (const Setting& setting : settings) {
    all += fmt::format(", set_config('{}', ${}, false)", setting.name, params.size() + 1);
    params.push_back(SqlValue::Text(std::to_string(setting.value)));
  }
  bool each = false;
  try {
    conn.ForEachRow(PgStep{nullptr, all.c_str(), params, {}}, [](const SqlRow&) {});
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::kDisconnected) throw;
    each = true;
  }
  for (const Setting& setting : settings) {
    if (each) {
      const std::vector<SqlValue> one{SqlValue::Text(setting.name),
                                      SqlValue::Text(std::to_string(setting.value))};
      try {
        conn.ForEachRow(PgStep{nullptr, "SELECT set_config($1, $2, false)", one, {}},
                        [](const SqlRow&) {});
      } catch (const Error& e) {
        if (e.kind() == ErrorKind::kDisconnected) throw;
        problems.push_back(
            fmt::format("cannot set {} to {}: {}", setting.name, setting.value, e.what()));
        continue;
      }
    }
    wanted.emplace(setting.name, std::to_string(setting.value));
  }
  // Read back in a statement of its own: a pooler that hands each transaction another server
  // connection shows the server's defaults here.
  bool unix_socket = false;
  std::map<std::string, std::string> seen;
  conn.ForEachRow(PgStep{nullptr,
                         "SELECT name, setting, (inet_client_addr() IS NULL)::int4 "
                         "FROM pg_settings WHERE name IN ('statement_timeout', 'lock_timeout', "
                         "'idle_in_transaction_session_timeout', 'tcp_keepalives_idle', "
                         "'tcp_keepalives_interval', 'tcp_keepalives_count', 'tcp_user_timeout')",
                         {},
                         {}},
                  [&](const SqlRow& row) {
                    seen.emplace(std::string(row.Bytes(0)), std::string(row.Bytes(1)));
                    unix_socket = row.Int(2) != 0;
                  });
  for (const Setting& setting : settings) {
    auto want = wanted.find(setting.name);
    if (want == wanted.end() || (setting.tcp && unix_socket)) continue;
    auto got = seen.find(setting.name);
    const std::string value = got == seen.end() ? "(unknown)" : got->second;
    if (value != want->second) {
      problems.push_back(
          fmt::format("{} reads {} after it was set to {} (a connection pooler that does not "
                      "keep session settings?)",
                      setting.name, value, want->second));
    }
  }
  return problems;
}

}  // namespace nlockd::store
