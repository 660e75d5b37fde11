// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "store/sql/commands.hpp"
#include "store/sql/rows.hpp"

struct sqlite3;
struct sqlite3_stmt;

namespace nlockd::store {

// Owns one SQLite connection. Not thread-safe: one thread at a time (the library is opened
// without its own mutexes).
class SqliteDb {
 public:
  // Opens (creating it if absent) the database file at path. Throws nlockd::Error(kFailed).
  explicit SqliteDb(std::string path);
  ~SqliteDb();
  SqliteDb(const SqliteDb&) = delete;
  SqliteDb& operator=(const SqliteDb&) = delete;

  // Runs one or more statements that return no rows we need.
  void Exec(const std::string& sql);
  // Runs a statement that returns one row of one column, and returns it as text.
  std::string QueryText(const std::string& sql);

  // Throws the nlockd::Error for result code rc of this connection: kOverloaded when another
  // process holds the database lock, kFailed otherwise (a damaged file says so).
  [[noreturn]] void Fail(int rc, std::string_view doing) const;

  sqlite3* get() const { return db_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  sqlite3* db_ = nullptr;
};

// Owns one prepared statement of a SqliteDb, which must outlive it; used by that db's thread.
class SqliteStatement final : public SqlRow {
 public:
  // Prepares sql (SQLite placeholders). Throws nlockd::Error.
  SqliteStatement(SqliteDb& db, const std::string& sql);
  ~SqliteStatement() override;
  SqliteStatement(const SqliteStatement&) = delete;
  SqliteStatement& operator=(const SqliteStatement&) = delete;

  // REQUIRES: the statement is reset; bytes stay valid until Reset().
  void Bind(int index, const SqlValue& value);
  // Advances to the next row: true if there is one, false when done. Throws nlockd::Error.
  bool Step();
  // Ends the current execution and clears the bindings.
  void Reset();

  int64_t Int(int column) const override;
  std::string_view Bytes(int column) const override;

 private:
  SqliteDb& db_;
  sqlite3_stmt* stmt_ = nullptr;
};

}  // namespace nlockd::store
