// SPDX-License-Identifier: Apache-2.0
#include "store/open_store.hpp"

#include <string_view>

#include <fmt/format.h>

#include "base/error.hpp"
#include "store/log/logged_store.hpp"
#include "store/memory/memory_store.hpp"
#include "store/postgres/pg_store.hpp"
#include "store/sqlite/file_holder.hpp"
#include "store/sqlite/sqlite_store.hpp"

namespace nlockd::store {

bool IsSharedStoreUri(const std::string& uri) {
  const std::string_view view = uri;
  return view.starts_with("postgresql://") || view.starts_with("postgres://");
}

std::optional<std::string> SqliteStorePath(const std::string& uri) {
  constexpr std::string_view kScheme = "sqlite:";
  if (!std::string_view(uri).starts_with(kScheme)) return std::nullopt;
  return uri.substr(kScheme.size());
}

// The lock file and the name SqliteStore uses.
SqliteStoreLock::SqliteStoreLock(const std::string& path)
    : path_(path),
      holder_(std::make_unique<FileHolder>(path + ".lock", "SQLite database " + path)) {}

SqliteStoreLock::~SqliteStoreLock() = default;

std::unique_ptr<FileHolder> SqliteStoreLock::TakeHolder(const std::string& path) {
  if (path != path_ || !holder_) {
    throw Error(
        ErrorKind::kFailed,
        fmt::format("SQLite database {}: the lock taken for {} is not its own", path, path_));
  }
  return std::move(holder_);
}

std::unique_ptr<Store> OpenStore(const std::string& uri, const StoreOptions& options) {
  const std::string_view view = uri;
  if (view == "memory:") {
    return std::make_unique<MemoryStore>(options);
  }
  if (std::optional<std::string> sqlite_path = SqliteStorePath(uri)) {
    const std::string& path = *sqlite_path;
    // The lock log next to the file; the SqliteStore holds the file (and so the log) first.
    auto sqlite = std::make_unique<SqliteStore>(path, options);
    return std::make_unique<LoggedStore>(std::move(sqlite), path + ".journal");
  }
  if (IsSharedStoreUri(uri)) {
    return std::make_unique<PgStore>(uri, options);
  }
  throw Error(ErrorKind::kFailed,
              fmt::format("unknown store URI scheme '{}:': use memory:, sqlite:PATH or "
                          "postgresql://USER@HOST/DB",
                          uri.substr(0, uri.find(':'))));
}

}  // namespace nlockd::store
