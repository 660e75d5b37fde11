// SPDX-License-Identifier: Apache-2.0
#include "store/sql/statements.hpp"

#include <array>

#include "base/error.hpp"

namespace nlockd::store {
namespace {

constexpr SqlType T = SqlType::kText;
constexpr SqlType B = SqlType::kBytes;
constexpr SqlType I = SqlType::kInt32;
constexpr SqlType L = SqlType::kInt64;

// The state number is an XDR int kept in a BIGINT; these wrap it like NextOddState() and
// NextEvenState() (the sum is shifted to be non-negative before the modulo).
#define NLOCKD_NEXT_ODD \
  "((state + CASE WHEN state % 2 = 0 THEN 1 ELSE 2 END + 2147483648) % 4294967296) - 2147483648"
#define NLOCKD_NEXT_EVEN \
  "((state + CASE WHEN state % 2 = 0 THEN 0 ELSE 1 END + 2147483648) % 4294967296) - 2147483648"

constexpr std::array kNode{T};
constexpr std::array kPutRegistrationParams{T, B, B, B, I, I, I, B, B, L, L, L};
constexpr std::array kNodeBytes{T, B};
constexpr std::array kNodeMyId{T, B, I, I, I};
constexpr std::array kPutNotifyOwedParams{T, B, B, L, I};
constexpr std::array kNodeInt64{T, L};
constexpr std::array kPutLockParams{T, B, L, B, B, I, B, I, L};
constexpr std::array kNodeBytesInt64{T, B, L};
constexpr std::array kNodeBytesInt64Int64{T, B, L, L};
constexpr std::array kPutShareParams{T, B, B, B, B, I, I};
constexpr std::array kWriteRunParams{T, L, T, I, L, T};
constexpr std::array kNodeText{T, T};

// Indexed by Stmt.
const std::array<StatementDef, kStmtCount> kStatements{{
    {"put_registration",
     "INSERT INTO registrations (node, reg_key, mon_name, my_name, my_prog, my_vers, my_proc, "
     "priv, source_address, created_at, updated_at, peer_state) "
     "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) "
     "ON CONFLICT (node, reg_key) DO UPDATE SET priv = excluded.priv, "
     "source_address = excluded.source_address, updated_at = excluded.updated_at, "
     "peer_state = excluded.peer_state",
     kPutRegistrationParams},
    {"remove_registration", "DELETE FROM registrations WHERE node = $1 AND reg_key = $2",
     kNodeBytes},
    {"remove_registrations_of",
     "DELETE FROM registrations WHERE node = $1 AND my_name = $2 AND my_prog = $3 "
     "AND my_vers = $4 AND my_proc = $5",
     kNodeMyId},
    {"put_notify_owed",
     "INSERT INTO notify_owed (node, mon_name, address, state, attempts) "
     "VALUES ($1, $2, $3, $4, $5) ON CONFLICT (node, mon_name) DO UPDATE SET "
     "address = excluded.address, state = excluded.state, attempts = excluded.attempts",
     kPutNotifyOwedParams},
    {"remove_notify_owed", "DELETE FROM notify_owed WHERE node = $1 AND mon_name = $2", kNodeBytes},
    {"clear_registrations", "DELETE FROM registrations WHERE node = $1", kNode},
    {"clear_locks", "DELETE FROM locks WHERE node = $1", kNode},
    {"clear_shares", "DELETE FROM shares WHERE node = $1", kNode},
    {"bump_state",
     "UPDATE node_state SET state = " NLOCKD_NEXT_ODD
     ", state_boot_id = boot_id WHERE node = $1 RETURNING state",
     kNode},
    {"set_state",
     "UPDATE node_state SET state = $2, state_boot_id = boot_id WHERE node = $1 RETURNING state",
     kNodeInt64},
    {"mark_clean",
     "UPDATE node_state SET clean_shutdown = 1, state = " NLOCKD_NEXT_EVEN " WHERE node = $1",
     kNode},
    {"record_state",
     "INSERT INTO state_history (node, seq, state, changed_at) "
     "SELECT node, (SELECT COALESCE(MAX(seq), 0) + 1 FROM state_history WHERE node = $1), "
     "state, $2 FROM node_state WHERE node = $1",
     kNodeInt64},
    {"mark_locks_complete", "UPDATE node_state SET locks_complete = 1 WHERE node = $1", kNode},
    {"put_lock",
     "INSERT INTO locks (node, owner_key, range_offset, file_key, host, svid, owner_handle, "
     "is_exclusive, range_length) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) "
     "ON CONFLICT (node, owner_key, range_offset) DO UPDATE SET "
     "is_exclusive = excluded.is_exclusive, range_length = excluded.range_length",
     kPutLockParams},
    {"remove_lock", "DELETE FROM locks WHERE node = $1 AND owner_key = $2 AND range_offset = $3",
     kNodeBytesInt64},
    {"remove_owner_locks", "DELETE FROM locks WHERE node = $1 AND owner_key = $2", kNodeBytes},
    {"remove_owner_locks_within",
     "DELETE FROM locks WHERE node = $1 AND owner_key = $2 AND range_offset BETWEEN $3 AND $4",
     kNodeBytesInt64Int64},
    {"put_share",
     "INSERT INTO shares (node, share_key, file_key, host, owner_handle, share_mode, "
     "share_access) VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (node, share_key) DO UPDATE "
     "SET share_mode = excluded.share_mode, share_access = excluded.share_access",
     kPutShareParams},
    {"remove_share", "DELETE FROM shares WHERE node = $1 AND share_key = $2", kNodeBytes},
    {"release_host_locks", "DELETE FROM locks WHERE node = $1 AND host = $2", kNodeBytes},
    {"release_host_shares", "DELETE FROM shares WHERE node = $1 AND host = $2", kNodeBytes},
    {"read_run",
     "SELECT state, boot_id, clean_shutdown, locks_complete, storage_epoch, state_boot_id "
     "FROM node_state WHERE node = $1",
     kNode},
    {"write_run",
     "INSERT INTO node_state (node, state, boot_id, clean_shutdown, locks_complete, started_at, "
     "storage_epoch) VALUES ($1, $2, $3, 0, $4, $5, $6) ON CONFLICT (node) DO UPDATE SET "
     "boot_id = excluded.boot_id, clean_shutdown = 0, locks_complete = excluded.locks_complete, "
     "started_at = excluded.started_at, storage_epoch = excluded.storage_epoch",
     kWriteRunParams},
    {"new_storage_epoch",
     "UPDATE node_state SET storage_epoch = $2, locks_complete = 0 WHERE node = $1", kNodeText},
    {"load_state", "SELECT state FROM node_state WHERE node = $1", kNode},
    {"load_registrations",
     "SELECT mon_name, my_name, my_prog, my_vers, my_proc, priv, source_address, created_at, "
     "updated_at, peer_state FROM registrations WHERE node = $1",
     kNode},
    {"load_locks",
     "SELECT file_key, host, svid, owner_handle, is_exclusive, range_offset, range_length "
     "FROM locks WHERE node = $1",
     kNode},
    {"load_locks_below",
     "SELECT file_key, host, svid, owner_handle, is_exclusive, range_offset, range_length "
     "FROM locks WHERE node = $1 AND owner_key < $2",
     kNodeBytes},
    {"load_locks_from",
     "SELECT file_key, host, svid, owner_handle, is_exclusive, range_offset, range_length "
     "FROM locks WHERE node = $1 AND owner_key >= $2",
     kNodeBytes},
    {"load_shares",
     "SELECT file_key, host, owner_handle, share_mode, share_access FROM shares WHERE node = $1",
     kNode},
    {"load_notify_owed",
     "SELECT mon_name, address, state, attempts FROM notify_owed WHERE node = $1", kNode},
    {"load_state_history",
     "SELECT state, changed_at FROM state_history WHERE node = $1 ORDER BY seq", kNode},
    {"count_registrations", "SELECT count(*) FROM registrations WHERE node = $1", kNode},
    {"count_locks", "SELECT count(*) FROM locks WHERE node = $1", kNode},
    {"count_shares", "SELECT count(*) FROM shares WHERE node = $1", kNode},
    {"count_notify_owed", "SELECT count(*) FROM notify_owed WHERE node = $1", kNode},
}};

#undef NLOCKD_NEXT_ODD
#undef NLOCKD_NEXT_EVEN

}  // namespace

const StatementDef& Statement(Stmt stmt) {
  const auto index = static_cast<size_t>(stmt);
  NLOCKD_REQUIRE(index < kStmtCount);
  return kStatements[index];
}

std::string ToSqlitePlaceholders(const char* sql) {
  std::string out(sql);
  for (char& c : out) {
    if (c == '$') {
      c = '?';
    }
  }
  return out;
}

}  // namespace nlockd::store
