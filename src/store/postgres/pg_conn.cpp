// SPDX-License-Identifier: Apache-2.0
#include "store/postgres/pg_conn.hpp"

#include <algorithm>
#include <array>
#include <vector>

#include <fmt/format.h>

#include "base/error.hpp"
#include "store/postgres/libpq.hpp"
#include "store/postgres/pg_lease.hpp"
#include "store/store.hpp"

namespace nlockd::store {
namespace {

// Steps sent before their results are read: bounds what either side buffers, so that a huge
// batch cannot deadlock two blocking peers that both wait to write (libpq docs, "Pipeline Mode").
constexpr size_t kPipelineWindow = 256;

// libpq's type OIDs (catalog/pg_type_d.h).
constexpr Oid kInt4Oid = 23;
constexpr Oid kInt8Oid = 20;
constexpr Oid kByteaOid = 17;
constexpr Oid kTextOid = 25;

Oid OidOf(SqlType type) {
  switch (type) {
    case SqlType::kInt32:
      return kInt4Oid;
    case SqlType::kInt64:
      return kInt8Oid;
    case SqlType::kBytes:
      return kByteaOid;
    case SqlType::kText:
      return kTextOid;
  }
  return 0;
}

// Parameters in libpq's binary format; integers big-endian in storage owned here, bytes and text
// pointing into the SqlValues, which must outlive this.
class EncodedParams {
 public:
  explicit EncodedParams(std::span<const SqlValue> params)
      : ints_(params.size()),
        types_(params.size()),
        values_(params.size()),
        lengths_(params.size()),
        formats_(params.size(), 1) {
    for (size_t i = 0; i < params.size(); ++i) {
      const SqlValue& p = params[i];
      types_[i] = OidOf(p.type);
      if (p.type == SqlType::kInt32 || p.type == SqlType::kInt64) {
        const size_t width = p.type == SqlType::kInt32 ? 4 : 8;
        const auto bits = static_cast<uint64_t>(p.integer);
        for (size_t b = 0; b < width; ++b) {
          ints_[i][b] = static_cast<char>((bits >> (8 * (width - 1 - b))) & 0xFFU);
        }
        values_[i] = ints_[i].data();
        lengths_[i] = static_cast<int>(width);
      } else {
        values_[i] = p.bytes.data();
        lengths_[i] = static_cast<int>(p.bytes.size());
      }
    }
  }

  int count() const { return static_cast<int>(values_.size()); }
  const Oid* types() const { return types_.data(); }
  const char* const* values() const { return values_.data(); }
  const int* lengths() const { return lengths_.data(); }
  const int* formats() const { return formats_.data(); }

 private:
  std::vector<std::array<char, 8>> ints_;
  std::vector<Oid> types_;
  std::vector<const char*> values_;
  std::vector<int> lengths_;
  std::vector<int> formats_;
};

std::string Trimmed(const char* message) {
  std::string text = message != nullptr ? message : "";
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) {
    text.pop_back();
  }
  std::replace(text.begin(), text.end(), '\n', ' ');
  return text;
}

void IgnoreNotice(void* /*arg*/, const char* /*message*/) {}

}  // namespace

void PgResultDeleter::operator()(pg_result* result) const { Pq().PQclear(result); }

int64_t PgRow::Int(int column) const {
  const auto* bytes =
      reinterpret_cast<const unsigned char*>(Pq().PQgetvalue(result_, row_, column));
  const int length = Pq().PQgetlength(result_, row_, column);
  NLOCKD_ASSERT(length == 2 || length == 4 || length == 8, "not a binary integer column");
  uint64_t bits = 0;
  for (int i = 0; i < length; ++i) {
    bits = (bits << 8) | bytes[i];
  }
  if (length < 8 && (bytes[0] & 0x80U) != 0) {  // sign-extend
    bits |= ~uint64_t{0} << (8 * length);
  }
  return static_cast<int64_t>(bits);
}

std::string_view PgRow::Bytes(int column) const {
  return {Pq().PQgetvalue(result_, row_, column),
          static_cast<size_t>(Pq().PQgetlength(result_, row_, column))};
}

std::string DescribePgServer(const std::string& conninfo) {
  char* error = nullptr;
  PQconninfoOption* options = Pq().PQconninfoParse(conninfo.c_str(), &error);
  if (options == nullptr) {
    const std::string why = Trimmed(error);
    Pq().PQfreemem(error);
    return fmt::format("(unparsable connection string: {})", why);
  }
  std::string out;
  for (PQconninfoOption* o = options; o->keyword != nullptr; ++o) {
    const std::string_view key = o->keyword;
    if (o->val != nullptr && *o->val != '\0' &&
        (key == "host" || key == "hostaddr" || key == "port" || key == "dbname" || key == "user")) {
      out += fmt::format("{}{}={}", out.empty() ? "" : " ", key, o->val);
    }
  }
  Pq().PQconninfoFree(options);
  return out.empty() ? "(libpq defaults)" : out;
}

std::string PgConninfoError(const std::string& conninfo) {
  char* error = nullptr;
  PQconninfoOption* options = Pq().PQconninfoParse(conninfo.c_str(), &error);
  if (options != nullptr) {
    Pq().PQconninfoFree(options);
    return "";
  }
  std::string why = error != nullptr ? Trimmed(error) : "out of memory";
  Pq().PQfreemem(error);
  return why;
}

PgConn::PgConn(const std::string& conninfo, std::chrono::seconds connect_timeout,
               const PgClientTcp& tcp)
    : pq_(Pq()), server_(DescribePgServer(conninfo)) {
  const std::string timeout = std::to_string(connect_timeout.count());
  std::vector<const char*> keys{"connect_timeout", "application_name"};
  std::vector<std::string> values{timeout, "nlockd"};
  const auto add = [&](const char* key, int64_t value) {
    if (value <= 0) return;
    keys.push_back(key);
    values.push_back(std::to_string(value));
  };
  add("keepalives_idle", tcp.keepalives_idle.count());
  add("keepalives_interval", tcp.keepalives_interval.count());
  add("keepalives_count", tcp.keepalives_count);
  add("tcp_user_timeout", tcp.user_timeout.count());
  // expand_dbname: conninfo is parsed as a connection string, and since it comes last, its own
  // settings override the defaults before it.
  keys.push_back("dbname");
  values.push_back(conninfo);
  std::vector<const char*> value_ptrs;
  for (const std::string& value : values) value_ptrs.push_back(value.c_str());
  keys.push_back(nullptr);
  value_ptrs.push_back(nullptr);
  conn_ = pq_.PQconnectdbParams(keys.data(), value_ptrs.data(), 1);
  if (conn_ == nullptr) {
    throw Error(ErrorKind::kOverloaded, "libpq: out of memory");
  }
  pq_.PQsetNoticeProcessor(conn_, IgnoreNotice, nullptr);
  if (pq_.PQstatus(conn_) != CONNECTION_OK) {
    const std::string message = Trimmed(pq_.PQerrorMessage(conn_));
    pq_.PQfinish(conn_);
    conn_ = nullptr;
    throw Error(ErrorKind::kDisconnected,
                fmt::format("cannot connect to PostgreSQL at {}: {}", server_, message));
  }
}

PgConn::~PgConn() { pq_.PQfinish(conn_); }

bool PgConn::ok() const { return !broken_ && pq_.PQstatus(conn_) == CONNECTION_OK; }

void PgConn::Fail(const pg_result* result, std::string_view doing) const {
  const char* state =
      result != nullptr ? pq_.PQresultErrorField(result, PG_DIAG_SQLSTATE) : nullptr;
  const std::string sqlstate = state != nullptr ? state : "";
  const std::string message = Trimmed(result != nullptr && *pq_.PQresultErrorMessage(result) != '\0'
                                          ? pq_.PQresultErrorMessage(result)
                                          : pq_.PQerrorMessage(conn_));
  if (sqlstate == kFenceSqlState) {
    throw LeaseLost(fmt::format("PostgreSQL at {}: {}", server_, message));
  }
  const bool lost = pq_.PQstatus(conn_) != CONNECTION_OK || sqlstate.starts_with("08") ||
                    sqlstate.starts_with("57P");
  // lock_not_available: a lock stayed taken past lock_timeout.
  const bool busy = !lost && sqlstate == "55P03";
  throw Error(lost   ? ErrorKind::kDisconnected
              : busy ? ErrorKind::kOverloaded
                     : ErrorKind::kFailed,
              fmt::format("PostgreSQL at {}: {} failed: {}{}", server_, doing, message,
                          sqlstate.empty() ? "" : fmt::format(" (SQLSTATE {})", sqlstate)));
}

void PgConn::Exec(const std::string& sql) {
  PgResult result(pq_.PQexec(conn_, sql.c_str()));
  const ExecStatusType status = pq_.PQresultStatus(result.get());
  if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
    Fail(result.get(), sql.size() > 60 ? sql.substr(0, 60) + "..." : sql);
  }
}

void PgConn::Prepare(const char* name, const char* sql, std::span<const SqlType> types) {
  std::vector<Oid> oids;
  for (SqlType type : types) {
    oids.push_back(OidOf(type));
  }
  PgResult result(pq_.PQprepare(conn_, name, sql, static_cast<int>(oids.size()), oids.data()));
  if (pq_.PQresultStatus(result.get()) != PGRES_COMMAND_OK) {
    Fail(result.get(), fmt::format("preparing {}", name));
  }
}

void PgConn::Send(const PgStep& step) {
  const EncodedParams encoded(step.params);
  const int sent =
      step.prepared != nullptr
          ? pq_.PQsendQueryPrepared(conn_, step.prepared, encoded.count(), encoded.values(),
                                    encoded.lengths(), encoded.formats(), 1)
          : pq_.PQsendQueryParams(conn_, step.sql, encoded.count(), encoded.types(),
                                  encoded.values(), encoded.lengths(), encoded.formats(), 1);
  if (sent != 1) {
    Fail(nullptr, step.prepared != nullptr ? step.prepared : step.sql);
  }
}

void PgConn::ForEachRow(const PgStep& step, const std::function<void(const SqlRow&)>& on_row) {
  const char* what = step.prepared != nullptr ? step.prepared : step.sql;
  Send(step);
  pq_.PQsetSingleRowMode(conn_);
  std::exception_ptr error;
  while (pg_result* raw = pq_.PQgetResult(conn_)) {
    PgResult result(raw);
    const ExecStatusType status = pq_.PQresultStatus(raw);
    if (error) {
      continue;  // drain, so the connection can run the next query
    }
    try {
      if (status == PGRES_SINGLE_TUPLE) {
        on_row(PgRow(raw, 0));
      } else if (status != PGRES_TUPLES_OK && status != PGRES_COMMAND_OK) {
        Fail(raw, what);
      }
    } catch (...) {
      error = std::current_exception();
    }
  }
  if (error) {
    std::rethrow_exception(error);
  }
}

void PgConn::ReadQueryResults(const PgStep& step, std::exception_ptr* error) {
  const char* what = step.prepared != nullptr ? step.prepared : step.sql;
  while (pg_result* raw = pq_.PQgetResult(conn_)) {
    PgResult result(raw);
    const ExecStatusType status = pq_.PQresultStatus(raw);
    if (pq_.PQstatus(conn_) != CONNECTION_OK) {
      Fail(raw, what);  // nothing more will come
    }
    if (*error || status == PGRES_COMMAND_OK || status == PGRES_PIPELINE_ABORTED) {
      continue;
    }
    try {
      if (status != PGRES_TUPLES_OK) {
        Fail(raw, what);
      }
      if (step.on_rows) {
        step.on_rows(raw);
      }
    } catch (...) {
      *error = std::current_exception();
    }
  }
  if (pq_.PQstatus(conn_) != CONNECTION_OK) {
    Fail(nullptr, what);
  }
}

void PgConn::ReadPipelineSync() {
  PgResult result(pq_.PQgetResult(conn_));
  if (pq_.PQresultStatus(result.get()) != PGRES_PIPELINE_SYNC) {
    if (pq_.PQstatus(conn_) != CONNECTION_OK) {
      Fail(result.get(), "pipeline sync");
    }
    throw Error(ErrorKind::kFailed,
                fmt::format("PostgreSQL at {}: pipeline out of step ({})", server_,
                            pq_.PQresStatus(pq_.PQresultStatus(result.get()))));
  }
}

void PgConn::RunPipeline(std::span<const PgStep> steps) {
  if (pq_.PQenterPipelineMode(conn_) != 1) {
    Fail(nullptr, "entering pipeline mode");
  }
  std::exception_ptr error;
  try {
    size_t next = 0;
    while (next < steps.size() && !error) {
      const size_t end = std::min(next + kPipelineWindow, steps.size());
      for (size_t i = next; i < end; ++i) {
        const PgStep& step = steps[i];
        Send(step);
      }
      const int requested =
          end == steps.size() ? pq_.PQpipelineSync(conn_) : pq_.PQsendFlushRequest(conn_);
      if (requested != 1 || pq_.PQflush(conn_) != 0) {
        Fail(nullptr, "sending a pipeline");
      }
      for (size_t i = next; i < end; ++i) {
        ReadQueryResults(steps[i], &error);
      }
      next = end;
    }
    if (next < steps.size()) {  // stopped early after a failure: end the pipeline now
      if (pq_.PQpipelineSync(conn_) != 1 || pq_.PQflush(conn_) != 0) {
        Fail(nullptr, "sending a pipeline sync");
      }
    }
    ReadPipelineSync();
    if (pq_.PQexitPipelineMode(conn_) != 1) {
      Fail(nullptr, "leaving pipeline mode");
    }
  } catch (...) {
    broken_ = true;  // mid-pipeline: the connection cannot be trusted with another query
    throw;
  }
  if (error) {
    std::rethrow_exception(error);
  }
}

}  // namespace nlockd::store
