// SPDX-License-Identifier: Apache-2.0
#include "store/open_store.hpp"

#include <string_view>

#include <fmt/format.h>

#include "base/error.hpp"
#include "store/log/logged_store.hpp"
#include "store/memory/memory_store.hpp"
#include "store/postgres/pg_store.hpp"
#include "store/sqlite/sqlite_store.hpp"

namespace nlockd::store {

bool IsSharedStoreUri(const std::string& uri) {
  const std::string_view view = uri;
  return view.starts_with("postgresql://") || view.starts_with("postgres://");
}

std::unique_ptr<Store> OpenStore(const std::string& uri, const StoreOptions& options) {
  const std::string_view view = uri;
  if (view == "memory:") {
    return std::make_unique<MemoryStore>(options);
  }
  if (view.starts_with("sqlite:")) {
    const std::string path = uri.substr(std::string_view("sqlite:").size());
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
