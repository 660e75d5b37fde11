// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "store/sql/commands.hpp"
#include "store/sql/rows.hpp"

struct pg_conn;
struct pg_result;

namespace nlockd::store {

struct Libpq;

// Owns a PGresult.
struct PgResultDeleter {
  void operator()(pg_result* result) const;
};
using PgResult = std::unique_ptr<pg_result, PgResultDeleter>;

// One row of a binary-format result, read by the shared decoders.
class PgRow final : public SqlRow {
 public:
  PgRow(const pg_result* result, int row) : result_(result), row_(row) {}
  int64_t Int(int column) const override;
  std::string_view Bytes(int column) const override;

 private:
  const pg_result* result_;
  int row_;
};

// One statement of a pipeline: a prepared statement with parameters, or SQL without them.
struct PgStep {
  const char* prepared = nullptr;  // statement name, or
  const char* sql = nullptr;       // literal SQL
  std::span<const SqlValue> params;
  // Called with the result of a statement that returns rows.
  std::function<void(const pg_result*)> on_rows;
};

// "host=... port=... dbname=... user=..." for messages: a connection string without secrets.
std::string DescribePgServer(const std::string& conninfo);
// Why libpq cannot parse conninfo, or "" if it can.
// Both load libpq (Pq()), and so throw nlockd::Error(kFailed) when it cannot be loaded.
std::string PgConninfoError(const std::string& conninfo);

// The client side's TCP limits on a connection (libpq's keepalives_* and tcp_user_timeout), so
// that a call on a connection whose network path died fails rather than hanging for the
// system's default (hours). Zero fields keep libpq's defaults; the conninfo's own settings win.
struct PgClientTcp {
  std::chrono::seconds keepalives_idle{0};
  std::chrono::seconds keepalives_interval{0};
  int keepalives_count = 0;
  std::chrono::milliseconds user_timeout{0};
};

// Owns one libpq connection (blocking mode). Not thread-safe: one thread at a time. Failures
// throw nlockd::Error: kDisconnected when the connection is lost or the server refuses to serve
// now (SQLSTATE classes 08 and 57P), kOverloaded when a lock stayed taken past the session's
// lock_timeout (SQLSTATE 55P03: retry later), kFailed for anything else (bad SQL, constraints).
class PgConn {
 public:
  // Connects; conninfo is a libpq URI or key=value string (its connect_timeout wins over ours).
  PgConn(const std::string& conninfo, std::chrono::seconds connect_timeout,
         const PgClientTcp& tcp = {});
  ~PgConn();
  PgConn(const PgConn&) = delete;
  PgConn& operator=(const PgConn&) = delete;

  // Whether the connection is still up (as far as libpq knows).
  bool ok() const;

  // Runs SQL without parameters (one or more statements).
  void Exec(const std::string& sql);
  // Prepares sql under name with the given parameter types.
  void Prepare(const char* name, const char* sql, std::span<const SqlType> types);
  // Runs one statement, results in binary format, calling on_row for each row as it arrives
  // (single-row mode: a big table is never held in memory at once). step.on_rows is unused.
  void ForEachRow(const PgStep& step, const std::function<void(const SqlRow&)>& on_row);
  // Sends all steps as one pipeline (a round trip per kPipelineWindow steps, not per step) and
  // reads every result; throws the first failure after the pipeline is drained.
  void RunPipeline(std::span<const PgStep> steps);

  // Whether the store's statements are prepared on this connection.
  bool prepared() const { return prepared_; }
  void set_prepared() { prepared_ = true; }
  // Marks the connection as not to be used again (ok() turns false): its session was left in a
  // state nobody tracks, so the pool closes it rather than lending it out.
  void MarkBroken() { broken_ = true; }

  // Throws the Error for a failed result (or, without one, for the connection's last error).
  [[noreturn]] void Fail(const pg_result* result, std::string_view doing) const;

 private:
  void Send(const PgStep& step);
  // Reads the results of one pipelined query up to its terminating null; records the first
  // failure in *error.
  void ReadQueryResults(const PgStep& step, std::exception_ptr* error);
  void ReadPipelineSync();

  const Libpq& pq_;
  pg_conn* conn_ = nullptr;
  std::string server_;   // DescribePgServer() of the conninfo
  bool broken_ = false;  // a pipeline or the store's setup failed midway
  bool prepared_ = false;
};

}  // namespace nlockd::store
