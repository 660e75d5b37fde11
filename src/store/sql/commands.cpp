// SPDX-License-Identifier: Apache-2.0
#include "store/sql/commands.hpp"

#include <string_view>
#include <utility>

#include "store/sql/key_digest.hpp"

namespace nlockd::store {
namespace {

// uint64 offsets and lengths are stored as the int64 with the same bits.
int64_t AsInt64(uint64_t v) { return static_cast<int64_t>(v); }

std::string PrivBytes(const std::array<uint8_t, 16>& priv) {
  return std::string(reinterpret_cast<const char*>(priv.data()), priv.size());
}

struct CommandBuilder {
  // The most parameters a statement takes (kPutRegistration), so that building one allocates once.
  static constexpr size_t kMaxParams = 12;

  const std::string& node;
  int64_t now;
  std::vector<SqlCommand>& out;

  // Appends a command whose first parameter is the node. (`out` is a reference member, so the
  // const visitor std::visit requires can still append.)
  SqlCommand& Add(Stmt stmt) const {
    out.push_back(SqlCommand{stmt, {}, nullptr});
    out.back().params.reserve(kMaxParams);
    out.back().params.push_back(SqlValue::Text(node));
    return out.back();
  }

  void operator()(const PutRegistrationOp& op) const {
    const Registration& r = op.registration;
    auto& params = Add(Stmt::kPutRegistration).params;
    params.push_back(SqlValue::Bytes(RegistrationDigest(r.mon_name, r.my_id)));
    params.push_back(SqlValue::Bytes(r.mon_name));
    params.push_back(SqlValue::Bytes(r.my_id.my_name));
    params.push_back(SqlValue::Int32(r.my_id.my_prog));
    params.push_back(SqlValue::Int32(r.my_id.my_vers));
    params.push_back(SqlValue::Int32(r.my_id.my_proc));
    params.push_back(SqlValue::Bytes(PrivBytes(r.priv)));
    params.push_back(SqlValue::Bytes(r.source_address));
    params.push_back(SqlValue::Int64(now));  // created_at; kept by an update
    params.push_back(SqlValue::Int64(now));
    params.push_back(SqlValue::Int64(r.peer_state));
  }
  void operator()(const RemoveRegistrationOp& op) const {
    Add(Stmt::kRemoveRegistration)
        .params.push_back(SqlValue::Bytes(RegistrationDigest(op.mon_name, op.my_id)));
  }
  void operator()(const RemoveRegistrationsOfOp& op) const {
    auto& params = Add(Stmt::kRemoveRegistrationsOf).params;
    params.push_back(SqlValue::Bytes(op.my_id.my_name));
    params.push_back(SqlValue::Int32(op.my_id.my_prog));
    params.push_back(SqlValue::Int32(op.my_id.my_vers));
    params.push_back(SqlValue::Int32(op.my_id.my_proc));
  }
  void operator()(const PutNotifyOwedOp& op) const {
    for (const NotifyOwed& owed : op.owed) {
      auto& params = Add(Stmt::kPutNotifyOwed).params;
      params.push_back(SqlValue::Bytes(owed.mon_name));
      params.push_back(SqlValue::Bytes(owed.address));
      params.push_back(SqlValue::Int64(owed.state));
      params.push_back(SqlValue::Int32(owed.attempts));
    }
  }
  void operator()(const ClearOp&) const {
    Add(Stmt::kClearRegistrations);
    Add(Stmt::kClearLocks);
    Add(Stmt::kClearShares);
  }
  void operator()(const BumpStateOp& op) const {
    if (op.to) {
      SqlCommand& set = Add(Stmt::kSetState);
      set.params.push_back(SqlValue::Int64(*op.to));
      set.returned_state = op.new_state;
    } else {
      Add(Stmt::kBumpState).returned_state = op.new_state;
    }
    Add(Stmt::kRecordState).params.push_back(SqlValue::Int64(now));
  }
  void operator()(const MarkCleanShutdownOp&) const {
    Add(Stmt::kMarkClean);
    Add(Stmt::kRecordState).params.push_back(SqlValue::Int64(now));
  }
  void operator()(const LockChangesOp& op) const {
    for (const LockChange& change : op.changes) {
      std::visit(*this, change);
    }
  }
  void operator()(const PutLock& change) const {
    const LockRecord& l = change.lock;
    AddPutLock(l, LockOwnerDigest(l.file_key, l.host, l.svid, l.owner_handle));
  }
  void operator()(const RemoveLock& change) const {
    const LockRecord& l = change.lock;
    auto& params = Add(Stmt::kRemoveLock).params;
    params.push_back(SqlValue::Bytes(LockOwnerDigest(l.file_key, l.host, l.svid, l.owner_handle)));
    params.push_back(SqlValue::Int64(AsInt64(l.offset)));
  }
  void operator()(const ReplaceLocks& change) const {
    const std::string digest =
        LockOwnerDigest(change.file_key, change.host, change.svid, change.owner_handle);
    if (!change.within) {
      Add(Stmt::kRemoveOwnerLocks).params.push_back(SqlValue::Bytes(digest));
    } else {
      // Offsets are stored as int64 with the same bits, which orders each half of the uint64
      // range correctly but puts the upper half first: a span across 2^63 is two spans.
      constexpr uint64_t kTopBit = uint64_t{1} << 63;
      const auto [first, last] = *change.within;
      auto remove_within = [&](uint64_t from, uint64_t to) {
        auto& params = Add(Stmt::kRemoveOwnerLocksWithin).params;
        params.push_back(SqlValue::Bytes(digest));
        params.push_back(SqlValue::Int64(AsInt64(from)));
        params.push_back(SqlValue::Int64(AsInt64(to)));
      };
      if (first < kTopBit && last >= kTopBit) {
        remove_within(first, kTopBit - 1);
        remove_within(kTopBit, last);
      } else {
        remove_within(first, last);
      }
    }
    for (const LockRange& range : change.ranges) {
      AddPutLock(LockRecord{change.file_key, change.host, change.svid, change.owner_handle,
                            range.exclusive, range.offset, range.length},
                 digest);
    }
  }
  void operator()(const PutShare& change) const {
    const ShareRecord& s = change.share;
    auto& params = Add(Stmt::kPutShare).params;
    params.push_back(SqlValue::Bytes(ShareDigest(s.file_key, s.host, s.owner_handle)));
    params.push_back(SqlValue::Bytes(s.file_key));
    params.push_back(SqlValue::Bytes(s.host));
    params.push_back(SqlValue::Bytes(s.owner_handle));
    params.push_back(SqlValue::Int32(s.mode));
    params.push_back(SqlValue::Int32(s.access));
  }
  void operator()(const RemoveShare& change) const {
    const ShareRecord& s = change.share;
    Add(Stmt::kRemoveShare)
        .params.push_back(SqlValue::Bytes(ShareDigest(s.file_key, s.host, s.owner_handle)));
  }
  void operator()(const ReleaseHostOp& op) const {
    Add(Stmt::kReleaseHostLocks).params.push_back(SqlValue::Bytes(op.host));
    Add(Stmt::kReleaseHostShares).params.push_back(SqlValue::Bytes(op.host));
  }
  void operator()(const RemoveNotifyOwedOp& op) const {
    Add(Stmt::kRemoveNotifyOwed).params.push_back(SqlValue::Bytes(op.mon_name));
  }
  void operator()(const MarkLockTableCompleteOp&) const { Add(Stmt::kMarkLocksComplete); }

 private:
  // `owner_digest` is LockOwnerDigest of the lock's owner (computed once per owner).
  void AddPutLock(const LockRecord& l, const std::string& owner_digest) const {
    auto& params = Add(Stmt::kPutLock).params;
    params.push_back(SqlValue::Bytes(owner_digest));
    params.push_back(SqlValue::Int64(AsInt64(l.offset)));
    params.push_back(SqlValue::Bytes(l.file_key));
    params.push_back(SqlValue::Bytes(l.host));
    params.push_back(SqlValue::Int32(l.svid));
    params.push_back(SqlValue::Bytes(l.owner_handle));
    params.push_back(SqlValue::Int32(l.exclusive ? 1 : 0));
    params.push_back(SqlValue::Int64(AsInt64(l.length)));
  }
};

}  // namespace

void AppendCommands(const WriteOp& op, const std::string& node,
                    std::chrono::system_clock::time_point now, std::vector<SqlCommand>& out) {
  std::visit(CommandBuilder{node, ToMicros(now), out}, op);
}

std::vector<SqlValue> WriteRunParams(const std::string& node, const RunRecord& record,
                                     std::chrono::system_clock::time_point now) {
  return {SqlValue::Text(node),           SqlValue::Int64(record.state),
          SqlValue::Text(record.boot_id), SqlValue::Int32(record.locks_complete ? 1 : 0),
          SqlValue::Int64(ToMicros(now)), SqlValue::Text(record.storage_epoch)};
}

int64_t ToMicros(std::chrono::system_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
}

std::chrono::system_clock::time_point FromMicros(int64_t micros) {
  return std::chrono::system_clock::time_point(std::chrono::microseconds(micros));
}

}  // namespace nlockd::store
