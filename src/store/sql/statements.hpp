// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace nlockd::store {

// The parameter types of SQL statements, as both backends bind them.
enum class SqlType { kInt32, kInt64, kBytes, kText };

// Every statement the SQL stores run after migration, written once in the SQL that SQLite and
// PostgreSQL share, with PostgreSQL's $1..$n placeholders (SQLite reads them as ?1..?n).
enum class Stmt {
  // Writes (applied by the writer thread).
  kPutRegistration,
  kRemoveRegistration,
  kRemoveRegistrationsOf,
  kPutNotifyOwed,
  kRemoveNotifyOwed,
  kClearRegistrations,
  kClearLocks,
  kClearShares,
  kBumpState,  // returns the new state
  kSetState,   // to $2; returns it
  kMarkClean,
  kRecordState,
  kMarkLocksComplete,
  kPutLock,
  kRemoveLock,
  kRemoveOwnerLocks,
  kRemoveOwnerLocksWithin,  // range_offset BETWEEN $3 AND $4 (as stored: int64 bits)
  kPutShare,
  kRemoveShare,
  kReleaseHostLocks,
  kReleaseHostShares,
  // Opening a store.
  kReadRun,
  kWriteRun,
  kNewStorageEpoch,  // the database server restarted under a running store
  // Reads.
  kLoadState,
  kLoadRegistrations,
  kLoadLocks,
  kLoadLocksBelow,  // owner_key < $2: the halves of a parallel scan
  kLoadLocksFrom,   // owner_key >= $2
  kLoadShares,
  kLoadNotifyOwed,
  kLoadStateHistory,
  kCountRegistrations,
  kCountLocks,
  kCountShares,
  kCountNotifyOwed,
};
inline constexpr size_t kStmtCount = static_cast<size_t>(Stmt::kCountNotifyOwed) + 1;

struct StatementDef {
  const char* name;  // also the PostgreSQL prepared statement name
  const char* sql;
  std::span<const SqlType> params;
};

const StatementDef& Statement(Stmt stmt);

// sql with $n placeholders rewritten as SQLite's ?n.
std::string ToSqlitePlaceholders(const char* sql);

}  // namespace nlockd::store
