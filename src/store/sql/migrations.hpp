// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace nlockd::store {

enum class Dialect { kSqlite, kPostgres };

// One step of the schema, shared by the SQL stores. `sql` is portable SQL with two dialect
// tokens: {BYTES} (BLOB / BYTEA) and {WITHOUT_ROWID} (SQLite's clustered tables / nothing).
struct Migration {
  int64_t version;  // 1, 2, ... without gaps
  const char* description;
  const char* sql;
};

// The schema of this build, oldest first. Never edit a released step: add one.
std::span<const Migration> SchemaMigrations();

// The table that records how far a database was migrated (one row).
inline constexpr const char* kSchemaVersionDdl =
    "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)";

std::string RenderMigration(const Migration& migration, Dialect dialect);

// The steps that bring a database at version `current` up to date. Throws nlockd::Error(kFailed)
// when the database is newer than this build (`database` names it in the message).
std::vector<const Migration*> PendingMigrations(int64_t current,
                                                std::span<const Migration> migrations,
                                                const std::string& database);

}  // namespace nlockd::store
