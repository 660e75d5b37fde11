// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <libpq-fe.h>

namespace nlockd::store {

// The libpq functions the PostgreSQL store calls, in one list so that the table and its loader
// cannot disagree.
#define NLOCKD_LIBPQ_FUNCTIONS(X) \
  X(PQclear)                      \
  X(PQconnectdbParams)            \
  X(PQconninfoFree)               \
  X(PQconninfoParse)              \
  X(PQenterPipelineMode)          \
  X(PQerrorMessage)               \
  X(PQexec)                       \
  X(PQexitPipelineMode)           \
  X(PQfinish)                     \
  X(PQflush)                      \
  X(PQfreemem)                    \
  X(PQgetlength)                  \
  X(PQgetResult)                  \
  X(PQgetvalue)                   \
  X(PQntuples)                    \
  X(PQpipelineSync)               \
  X(PQprepare)                    \
  X(PQresStatus)                  \
  X(PQresultErrorField)           \
  X(PQresultErrorMessage)         \
  X(PQresultStatus)               \
  X(PQsendFlushRequest)           \
  X(PQsendQueryParams)            \
  X(PQsendQueryPrepared)          \
  X(PQsetNoticeProcessor)         \
  X(PQsetSingleRowMode)           \
  X(PQstatus)

// libpq, looked up when the first PostgreSQL connection string is parsed rather than linked:
// libpq brings about twenty libraries with it (Kerberos, LDAP, GnuTLS, SASL), which a process
// on a SQLite or memory store would otherwise map and relocate at every start for nothing
// (seconds inside a slow VM, where nlockd starts as the status monitor). The members keep
// libpq's own names, so that the calls read (and grep) as libpq's documentation spells them.
struct Libpq {
  // `name` is a function's name, declared as a member of that name: it cannot be parenthesised.
  // NOLINTNEXTLINE(bugprone-macro-parentheses)
#define NLOCKD_LIBPQ_MEMBER(name) decltype(&::name) name = nullptr;
  NLOCKD_LIBPQ_FUNCTIONS(NLOCKD_LIBPQ_MEMBER)
#undef NLOCKD_LIBPQ_MEMBER
};

// The shared object dlopen() looks for: libpq's SONAME (Debian's libpq5).
inline constexpr const char* kLibpqSoname = "libpq.so.5";

// libpq's functions, loaded on the first call and kept for the life of the process: the dynamic
// linker holds a loaded library process-wide anyway, and the table never changes once filled,
// so every thread may read it. Throws nlockd::Error(kFailed) naming the library and the
// linker's reason when libpq or one of the functions cannot be found (again on each call).
const Libpq& Pq();

}  // namespace nlockd::store
