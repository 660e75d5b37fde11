// SPDX-License-Identifier: Apache-2.0
#include "store/postgres/libpq.hpp"

#include <string>

#include <dlfcn.h>
#include <fmt/format.h>

#include "base/error.hpp"

namespace nlockd::store {
namespace {

std::string LastDlError() {
  // glibc keeps dlerror()'s message per thread.
  const char* why = dlerror();  // NOLINT(concurrency-mt-unsafe)
  return why != nullptr ? why : "unknown reason";
}

// Opens libpq and fills the table. The handle is never closed once the table is filled: libpq
// keeps process-wide state (OpenSSL's initialisation among it) that must outlive every connection.
Libpq Load() {
  void* library = dlopen(kLibpqSoname, RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    throw Error(ErrorKind::kFailed,
                fmt::format("a PostgreSQL store needs the PostgreSQL client library {} (Debian's "
                            "libpq5), which cannot be loaded: {}",
                            kLibpqSoname, LastDlError()));
  }
  Libpq table;
  const auto find = [library](const char* name) {
    void* symbol = dlsym(library, name);
    if (symbol == nullptr) {
      const std::string why = LastDlError();
      dlclose(library);
      throw Error(ErrorKind::kFailed,
                  fmt::format("{} has no function {} (libpq 14 or newer is needed): {}",
                              kLibpqSoname, name, why));
    }
    return symbol;
  };
  // dlsym's void* to a function pointer: POSIX guarantees the conversion.
#define NLOCKD_LIBPQ_FIND(name) table.name = reinterpret_cast<decltype(&::name)>(find(#name));
  NLOCKD_LIBPQ_FUNCTIONS(NLOCKD_LIBPQ_FIND)
#undef NLOCKD_LIBPQ_FIND
  return table;
}

}  // namespace

const Libpq& Pq() {
  // Filled once, under the thread-safe initialisation of a static; a load that throws leaves it
  // unfilled, so the next call tries again (installing libpq5 mends it) and says why again.
  static const Libpq table = Load();
  return table;
}

}  // namespace nlockd::store
