// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "store/run_record.hpp"
#include "store/sql/statements.hpp"
#include "store/write_op.hpp"

namespace nlockd::store {

// One bound parameter. Integers travel in `integer`, bytes and text in `bytes`.
struct SqlValue {
  SqlType type = SqlType::kInt64;
  int64_t integer = 0;
  std::string bytes;

  static SqlValue Int32(int32_t v) { return {SqlType::kInt32, v, {}}; }
  static SqlValue Int64(int64_t v) { return {SqlType::kInt64, v, {}}; }
  static SqlValue Bytes(std::string v) { return {SqlType::kBytes, 0, std::move(v)}; }
  static SqlValue Text(std::string v) { return {SqlType::kText, 0, std::move(v)}; }
};

// One statement execution of a write, with its parameters in Statement(stmt) order.
struct SqlCommand {
  Stmt stmt;
  std::vector<SqlValue> params;
  // When set, the statement returns one row whose first column is the new state number.
  int32_t* returned_state = nullptr;
};

// Appends the commands that apply op to node's rows, stamping times with `now`. Both SQL stores
// run exactly these, so they share one meaning of every write.
void AppendCommands(const WriteOp& op, const std::string& node,
                    std::chrono::system_clock::time_point now, std::vector<SqlCommand>& out);

// The parameters of kWriteRun: the run record `record` of `node`, started at `now`.
std::vector<SqlValue> WriteRunParams(const std::string& node, const RunRecord& record,
                                     std::chrono::system_clock::time_point now);

// Microseconds since the Unix epoch, the stored form of a time.
int64_t ToMicros(std::chrono::system_clock::time_point t);
std::chrono::system_clock::time_point FromMicros(int64_t micros);

}  // namespace nlockd::store
