// SPDX-License-Identifier: Apache-2.0
#include "store/sqlite/sqlite_db.hpp"

#include <fmt/format.h>
#include <sqlite3.h>

#include "base/error.hpp"

namespace nlockd::store {

SqliteDb::SqliteDb(std::string path) : path_(std::move(path)) {
  const int rc =
      sqlite3_open_v2(path_.c_str(), &db_,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    const std::string message = db_ != nullptr ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
    sqlite3_close(db_);
    db_ = nullptr;
    throw Error(ErrorKind::kFailed,
                fmt::format("cannot open SQLite database {}: {}", path_, message));
  }
  sqlite3_extended_result_codes(db_, 1);
}

SqliteDb::~SqliteDb() { sqlite3_close(db_); }

void SqliteDb::Exec(const std::string& sql) {
  const int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) {
    Fail(rc, sql.size() > 60 ? sql.substr(0, 60) + "..." : sql);
  }
}

std::string SqliteDb::QueryText(const std::string& sql) {
  SqliteStatement stmt(*this, sql);
  if (!stmt.Step()) {
    throw Error(ErrorKind::kFailed,
                fmt::format("SQLite database {}: '{}' returned no row", path_, sql));
  }
  return std::string(stmt.Bytes(0));
}

void SqliteDb::Fail(int rc, std::string_view doing) const {
  const int primary = rc & 0xFF;
  const char* message = sqlite3_errmsg(db_);
  if (primary == SQLITE_CORRUPT || primary == SQLITE_NOTADB) {
    throw Error(ErrorKind::kFailed,
                fmt::format("SQLite database {} is damaged or is not a database ({}: {}); "
                            "restore it from a backup or move it away",
                            path_, doing, message));
  }
  if (primary == SQLITE_BUSY || primary == SQLITE_LOCKED) {
    throw Error(ErrorKind::kOverloaded,
                fmt::format("SQLite database {} is locked by another connection ({}: {})", path_,
                            doing, message));
  }
  throw Error(ErrorKind::kFailed, fmt::format("SQLite database {}: {} failed: {} ({})", path_,
                                              doing, message, sqlite3_errstr(rc)));
}

SqliteStatement::SqliteStatement(SqliteDb& db, const std::string& sql) : db_(db) {
  const int rc = sqlite3_prepare_v3(db_.get(), sql.c_str(), static_cast<int>(sql.size() + 1),
                                    SQLITE_PREPARE_PERSISTENT, &stmt_, nullptr);
  if (rc != SQLITE_OK) {
    db_.Fail(rc, "preparing " + sql.substr(0, 60));
  }
}

SqliteStatement::~SqliteStatement() { sqlite3_finalize(stmt_); }

void SqliteStatement::Bind(int index, const SqlValue& value) {
  int rc = SQLITE_OK;
  switch (value.type) {
    case SqlType::kInt32:
    case SqlType::kInt64:
      rc = sqlite3_bind_int64(stmt_, index, value.integer);
      break;
    case SqlType::kBytes:
      // A null pointer would bind NULL; an empty value is an empty BLOB.
      rc = value.bytes.empty() ? sqlite3_bind_zeroblob(stmt_, index, 0)
                               : sqlite3_bind_blob64(stmt_, index, value.bytes.data(),
                                                     value.bytes.size(), SQLITE_STATIC);
      break;
    case SqlType::kText:
      rc = sqlite3_bind_text64(stmt_, index, value.bytes.data(), value.bytes.size(), SQLITE_STATIC,
                               SQLITE_UTF8);
      break;
  }
  if (rc != SQLITE_OK) {
    db_.Fail(rc, "binding a parameter");
  }
}

bool SqliteStatement::Step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) {
    return true;
  }
  if (rc == SQLITE_DONE) {
    return false;
  }
  const std::string sql = sqlite3_sql(stmt_);
  sqlite3_reset(stmt_);
  db_.Fail(rc, sql.substr(0, 60));
}

void SqliteStatement::Reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

int64_t SqliteStatement::Int(int column) const { return sqlite3_column_int64(stmt_, column); }

std::string_view SqliteStatement::Bytes(int column) const {
  const void* data = sqlite3_column_blob(stmt_, column);
  const int size = sqlite3_column_bytes(stmt_, column);
  if (data == nullptr || size <= 0) {
    return {};
  }
  return {static_cast<const char*>(data), static_cast<size_t>(size)};
}

}  // namespace nlockd::store
