// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <string_view>

#include "store/records.hpp"
#include "store/run_record.hpp"

namespace nlockd::store {

// A result row as the shared decoders read it; each backend adapts its own cursor.
class SqlRow {
 public:
  virtual ~SqlRow() = default;
  virtual int64_t Int(int column) const = 0;
  // Bytes of a BLOB/BYTEA or TEXT column, valid until the cursor moves.
  virtual std::string_view Bytes(int column) const = 0;
};

// Each decodes a row of the statement named beside it (statements.cpp) and throws
// nlockd::Error(kFailed) on a value no write could have stored (a damaged database).
Registration DecodeRegistration(const SqlRow& row);  // kLoadRegistrations
LockRecord DecodeLock(const SqlRow& row);            // kLoadLocks
ShareRecord DecodeShare(const SqlRow& row);          // kLoadShares
NotifyOwed DecodeNotifyOwed(const SqlRow& row);      // kLoadNotifyOwed
StateChange DecodeStateChange(const SqlRow& row);    // kLoadStateHistory
RunRecord DecodeRunRecord(const SqlRow& row);        // kReadRun
// A stored state number or an INTEGER column.
int32_t DecodeInt32(int64_t value, const char* what);

}  // namespace nlockd::store
