// SPDX-License-Identifier: Apache-2.0
#include "store/sql/rows.hpp"

#include <algorithm>
#include <limits>
#include <string>

#include <fmt/format.h>

#include "base/error.hpp"
#include "store/sql/commands.hpp"

namespace nlockd::store {

int32_t DecodeInt32(int64_t value, const char* what) {
  if (value < std::numeric_limits<int32_t>::min() || value > std::numeric_limits<int32_t>::max()) {
    throw Error(
        ErrorKind::kFailed,
        fmt::format("store: {} holds {}, outside the int32 range: damaged database", what, value));
  }
  return static_cast<int32_t>(value);
}

namespace {

std::string ToString(std::string_view bytes) { return std::string(bytes); }

}  // namespace

Registration DecodeRegistration(const SqlRow& row) {
  Registration r;
  r.mon_name = ToString(row.Bytes(0));
  r.my_id.my_name = ToString(row.Bytes(1));
  r.my_id.my_prog = DecodeInt32(row.Int(2), "registrations.my_prog");
  r.my_id.my_vers = DecodeInt32(row.Int(3), "registrations.my_vers");
  r.my_id.my_proc = DecodeInt32(row.Int(4), "registrations.my_proc");
  const std::string_view priv = row.Bytes(5);
  if (priv.size() != r.priv.size()) {
    throw Error(ErrorKind::kFailed,
                fmt::format("store: registrations.priv holds {} bytes, not 16: damaged database",
                            priv.size()));
  }
  std::copy(priv.begin(), priv.end(), r.priv.begin());
  r.source_address = ToString(row.Bytes(6));
  r.created = FromMicros(row.Int(7));
  r.updated = FromMicros(row.Int(8));
  r.peer_state = DecodeInt32(row.Int(9), "registrations.peer_state");
  return r;
}

LockRecord DecodeLock(const SqlRow& row) {
  LockRecord l;
  l.file_key = ToString(row.Bytes(0));
  l.host = ToString(row.Bytes(1));
  l.svid = DecodeInt32(row.Int(2), "locks.svid");
  l.owner_handle = ToString(row.Bytes(3));
  l.exclusive = row.Int(4) != 0;
  l.offset = static_cast<uint64_t>(row.Int(5));
  l.length = static_cast<uint64_t>(row.Int(6));
  return l;
}

ShareRecord DecodeShare(const SqlRow& row) {
  ShareRecord s;
  s.file_key = ToString(row.Bytes(0));
  s.host = ToString(row.Bytes(1));
  s.owner_handle = ToString(row.Bytes(2));
  s.mode = DecodeInt32(row.Int(3), "shares.share_mode");
  s.access = DecodeInt32(row.Int(4), "shares.share_access");
  return s;
}

NotifyOwed DecodeNotifyOwed(const SqlRow& row) {
  NotifyOwed n;
  n.mon_name = ToString(row.Bytes(0));
  n.address = ToString(row.Bytes(1));
  n.state = DecodeInt32(row.Int(2), "notify_owed.state");
  n.attempts = DecodeInt32(row.Int(3), "notify_owed.attempts");
  return n;
}

StateChange DecodeStateChange(const SqlRow& row) {
  return StateChange{DecodeInt32(row.Int(0), "state_history.state"), FromMicros(row.Int(1))};
}

RunRecord DecodeRunRecord(const SqlRow& row) {
  RunRecord run;
  run.state = DecodeInt32(row.Int(0), "node_state.state");
  run.boot_id = ToString(row.Bytes(1));
  run.clean_shutdown = row.Int(2) != 0;
  run.locks_complete = row.Int(3) != 0;
  run.storage_epoch = ToString(row.Bytes(4));
  run.state_boot_id = ToString(row.Bytes(5));
  return run;
}

}  // namespace nlockd::store
