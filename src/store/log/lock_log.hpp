// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "store/write_op.hpp"

namespace nlockd::store {

// The writes the lock log carries: the lock table's, which the lock journal issues per call.
using LoggedOp = std::variant<LockChangesOp, ReleaseHostOp>;

// A log record: [format and payload length u32][checksum of the payload u32][payload],
// little-endian; the payload is one LoggedOp. The first word's top four bits are the record's
// format (LogFormat), the other 28 its payload length. A record cut short (a write the process
// did not finish), damaged, or of a format this build does not know ends the log: nothing after
// it was ever acknowledged.
//
// The format is carried by every record, so that a log an older nlockd left behind (killed,
// then upgraded) is replayed by a newer one; records are only ever written in kCurrent.
enum class LogFormat : uint8_t {
  kCrc32 = 0,   // the checksum is CRC-32 (zlib's): the first lock log's records
  kCrc32c = 1,  // the checksum is CRC-32C (crc32c.hpp): one CPU instruction per 8 bytes
};
inline constexpr LogFormat kCurrentLogFormat = LogFormat::kCrc32c;

std::string EncodeLogRecord(const LoggedOp& op);

// Decodes the records of `bytes` in order; stops at the first incomplete or damaged one and
// sets *valid_bytes (if given) to where the good prefix ends. Records encoded by this process a
// moment ago, read back from memory, cannot be damaged: kTrust skips their checksums (a CRC-32
// per record costs about as much as decoding it).
enum class Checksums : uint8_t { kVerify, kTrust };
std::vector<LoggedOp> DecodeLogRecords(std::string_view bytes, size_t* valid_bytes = nullptr,
                                       Checksums checksums = Checksums::kVerify);

// Appends the record of `op` to *out (a buffer reused across records saves an allocation each).
// `format` other than kCurrentLogFormat only for tests (a log an older nlockd wrote).
void EncodeLogRecordTo(const LoggedOp& op, std::string& out, LogFormat format = kCurrentLogFormat);

// One ReplaceLocks change, its strings and ranges viewed, not copied: what the lock journal
// writes for a LOCK or UNLOCK, straight from the lock manager's state.
struct ReplaceLocksView {
  std::string_view file_key;
  std::string_view host;
  int32_t svid = 0;
  std::string_view owner_handle;
  std::span<const LockRange> ranges;
  std::optional<OffsetSpan> within;
};

// Builds the record of one LockChangesOp change by change at the end of a buffer, without the
// op: the same bytes as EncodeLogRecordTo of a LockChangesOp of the same changes.
class LockChangesRecord {
 public:
  // Begins the record at the end of *out, which must outlive this.
  explicit LockChangesRecord(std::string& out);
  void Add(const ReplaceLocksView& change);
  void Add(const LockChange& change);
  // Writes the change count, the length and the checksum. Nothing may be added after.
  void Finish();
  uint32_t changes() const { return changes_; }

 private:
  std::string& out_;
  size_t start_;
  uint32_t changes_ = 0;
};

// A logged write after coalescing, and the index of the last input write it accounts for: once it
// is applied, so is the effect of every input up to that one.
struct CoalescedOp {
  LoggedOp op;
  size_t through = 0;
};

// The writes that leave a store in the same state as applying all of `ops` in order, fewer when
// later ones overwrite earlier ones: every lock-table write sets a part of the table to a value
// (ReplaceLocks the owner's rows on a file, all or those starting within a span; PutLock and
// RemoveLock the row at one offset; PutShare and RemoveShare one share; ReleaseHost everything of
// a host), so a change whose part a single later write sets again is dropped, and the kept lock
// changes between two host releases become one LockChangesOp. A LOCK and its UNLOCK in one bunch
// leave one change, the UNLOCK's. Kept writes stay in their order; the result is never empty
// when `ops` is not, and its last element accounts for the last input.
std::vector<CoalescedOp> CoalesceLogged(std::vector<LoggedOp> ops);

// The CRC-32 of a format kCrc32 record's payload (IEEE 802.3 polynomial, as zlib's crc32).
uint32_t LogCrc32(std::string_view bytes);

// The largest payload a record may claim; a longer one is damage, not a record (stops a garbage
// length from allocating gigabytes at recovery). Below 1 << 28: the length leaves the format
// bits alone.
inline constexpr uint32_t kMaxLogPayload = 64U << 20;

// One segment file of the log. Once Append returns, the record is in the page cache and survives
// a crash of the process (not of the host). With a capacity, the file is given that many bytes
// up front (fallocate) and mapped shared: a record that fits is copied into the mapping, which
// is the page cache itself, so an append costs a memcpy, not a write(2) through the file
// system; records that do not fit, or every record when the file system cannot reserve the
// space (no fallocate) or the mapping fails, are written with pwrite(2) at the same offset. The
// space not yet written reads as zeros, which end the log for DecodeLogRecords. Closing cuts
// the file to its records. Not thread-safe.
class LogSegment {
 public:
  // Creates (or truncates) the file. Throws nlockd::Error(kFailed) naming it.
  explicit LogSegment(std::string path, uint64_t capacity = 0);
  ~LogSegment();
  LogSegment(const LogSegment&) = delete;
  LogSegment& operator=(const LogSegment&) = delete;

  // Writes bytes at the end. Throws nlockd::Error(kFailed) (disk full, I/O error); a partial
  // record it may leave behind is cut at the next append or ignored by recovery.
  void Append(std::string_view bytes);

  const std::string& path() const { return path_; }
  uint64_t size() const { return size_; }
  // Whether appends go to a shared mapping (else pwrite).
  bool mapped() const { return map_ != nullptr; }

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;  // the end of the last complete record
  char* map_ = nullptr;
  uint64_t capacity_ = 0;  // bytes mapped at map_
};

// Reads a whole segment file; "" if it does not exist. Throws nlockd::Error(kFailed) on errors.
std::string ReadLogFile(const std::string& path);

// The records of a segment file, as DecodeLogRecords reads them; none if it does not exist.
// Decodes from a read-only mapping of the file, so that only the pages up to the end of its
// records are read: a segment left by a killed process keeps its reserved space (megabytes of
// zeros) that copying the whole file would read and copy for nothing at every start. Throws
// nlockd::Error(kFailed) naming the file when it cannot be read.
std::vector<LoggedOp> ReadLogRecords(const std::string& path);

}  // namespace nlockd::store
