// SPDX-License-Identifier: Apache-2.0
#include "store/sql/migrations.hpp"

#include <array>
#include <string_view>

#include <fmt/format.h>

#include "base/error.hpp"

namespace nlockd::store {
namespace {

// Version 1: one row per registration, lock, share and host owed a notification, each keyed
// by its node, plus the per-node run record and state history. Names, handles and addresses are
// bytes, as they come off the wire. Times are microseconds since the Unix epoch; booleans 0/1;
// offsets and lengths are uint64 stored as the int64 with the same bits.
constexpr const char* kSchemaV1 = R"sql(
CREATE TABLE node_state (
  node TEXT NOT NULL PRIMARY KEY,
  state BIGINT NOT NULL,
  boot_id TEXT NOT NULL,
  storage_epoch TEXT NOT NULL,
  clean_shutdown INTEGER NOT NULL,
  locks_complete INTEGER NOT NULL,
  started_at BIGINT NOT NULL
);
CREATE TABLE state_history (
  node TEXT NOT NULL,
  seq BIGINT NOT NULL,
  state BIGINT NOT NULL,
  changed_at BIGINT NOT NULL,
  PRIMARY KEY (node, seq)
) {WITHOUT_ROWID};
CREATE TABLE registrations (
  node TEXT NOT NULL,
  reg_key {BYTES} NOT NULL,
  mon_name {BYTES} NOT NULL,
  my_name {BYTES} NOT NULL,
  my_prog INTEGER NOT NULL,
  my_vers INTEGER NOT NULL,
  my_proc INTEGER NOT NULL,
  priv {BYTES} NOT NULL,
  source_address {BYTES} NOT NULL,
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL,
  PRIMARY KEY (node, reg_key)
) {WITHOUT_ROWID};
CREATE TABLE locks (
  node TEXT NOT NULL,
  owner_key {BYTES} NOT NULL,
  range_offset BIGINT NOT NULL,
  file_key {BYTES} NOT NULL,
  host {BYTES} NOT NULL,
  svid INTEGER NOT NULL,
  owner_handle {BYTES} NOT NULL,
  is_exclusive INTEGER NOT NULL,
  range_length BIGINT NOT NULL,
  PRIMARY KEY (node, owner_key, range_offset)
) {WITHOUT_ROWID};
CREATE INDEX locks_host ON locks (node, host);
CREATE TABLE shares (
  node TEXT NOT NULL,
  share_key {BYTES} NOT NULL,
  file_key {BYTES} NOT NULL,
  host {BYTES} NOT NULL,
  owner_handle {BYTES} NOT NULL,
  share_mode INTEGER NOT NULL,
  share_access INTEGER NOT NULL,
  PRIMARY KEY (node, share_key)
) {WITHOUT_ROWID};
CREATE INDEX shares_host ON shares (node, host);
CREATE TABLE notify_owed (
  node TEXT NOT NULL,
  mon_name {BYTES} NOT NULL,
  address {BYTES} NOT NULL,
  state BIGINT NOT NULL,
  attempts INTEGER NOT NULL,
  PRIMARY KEY (node, mon_name)
) {WITHOUT_ROWID};
)sql";

// Version 2: the monitored host's last NSM state, on each of its registrations.
constexpr const char* kSchemaV2 = R"sql(
ALTER TABLE registrations ADD COLUMN peer_state BIGINT NOT NULL DEFAULT 0;
)sql";

// Version 3: the boot on which the state number was last announced (BumpState). Until then the
// run record's boot stood for it, so rows migrated take that.
constexpr const char* kSchemaV3 = R"sql(
ALTER TABLE node_state ADD COLUMN state_boot_id TEXT NOT NULL DEFAULT '';
UPDATE node_state SET state_boot_id = boot_id;
)sql";

constexpr std::array kMigrations{
    Migration{1, "registrations, locks, shares, notifications owed, state", kSchemaV1},
    Migration{2, "registrations.peer_state", kSchemaV2},
    Migration{3, "node_state.state_boot_id", kSchemaV3},
};

void ReplaceAll(std::string& text, std::string_view token, std::string_view with) {
  for (size_t at = text.find(token); at != std::string::npos;
       at = text.find(token, at + with.size())) {
    text.replace(at, token.size(), with);
  }
}

}  // namespace

std::span<const Migration> SchemaMigrations() { return kMigrations; }

std::string RenderMigration(const Migration& migration, Dialect dialect) {
  std::string sql(migration.sql);
  const bool sqlite = dialect == Dialect::kSqlite;
  ReplaceAll(sql, "{BYTES}", sqlite ? "BLOB" : "BYTEA");
  ReplaceAll(sql, "{WITHOUT_ROWID}", sqlite ? "WITHOUT ROWID" : "");
  return sql;
}

std::vector<const Migration*> PendingMigrations(int64_t current,
                                                std::span<const Migration> migrations,
                                                const std::string& database) {
  for (size_t i = 0; i < migrations.size(); ++i) {
    NLOCKD_REQUIRE(migrations[i].version == static_cast<int64_t>(i) + 1,
                   "migrations must be numbered 1, 2, ... without gaps");
  }
  const auto newest = static_cast<int64_t>(migrations.size());
  if (current > newest || current < 0) {
    throw Error(ErrorKind::kFailed,
                fmt::format("{} has schema version {}, but this nlockd knows versions up to {}; "
                            "it was written by a newer nlockd (upgrade nlockd, or point it at "
                            "another database)",
                            database, current, newest));
  }
  std::vector<const Migration*> pending;
  for (const Migration& m : migrations.subspan(static_cast<size_t>(current))) {
    pending.push_back(&m);
  }
  return pending;
}

}  // namespace nlockd::store
