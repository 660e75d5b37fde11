// SPDX-License-Identifier: Apache-2.0
#include "store/log/lock_log.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <system_error>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include <fcntl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "base/error.hpp"
#include "store/log/crc32c.hpp"

namespace nlockd::store {
namespace {

enum class OpTag : uint8_t { kLockChanges = 1, kReleaseHost = 2 };
enum class ChangeTag : uint8_t {
  kPutLock = 1,
  kRemoveLock = 2,
  kReplaceLocks = 3,
  kPutShare = 4,
  kRemoveShare = 5
};

// CRC-32 of the IEEE 802.3 polynomial: zlib's.
uint32_t Crc32(std::string_view bytes) {
  return static_cast<uint32_t>(
      crc32_z(crc32_z(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(bytes.data()), bytes.size()));
}

// The first word of a record: its format in the top four bits, the payload length below.
constexpr int kFormatShift = 28;
constexpr uint32_t kLengthMask = (1U << kFormatShift) - 1;
static_assert(kMaxLogPayload <= kLengthMask);

// The checksum of a record's payload in `format`; nullopt for a format this build cannot read.
std::optional<uint32_t> Checksum(uint32_t format, std::string_view payload) {
  switch (static_cast<LogFormat>(format)) {
    case LogFormat::kCrc32:
      return Crc32(payload);
    case LogFormat::kCrc32c:
      return Crc32c(payload);
  }
  return std::nullopt;
}

}  // namespace

// Exposed for the test of the CRC (a known check value).
uint32_t LogCrc32(std::string_view bytes) { return Crc32(bytes); }

namespace {

class Writer {
 public:
  explicit Writer(std::string& out) : out_(out) {}
  void U8(uint8_t v) { out_.push_back(static_cast<char>(v)); }
  // Little-endian, appended at once (a push_back per byte cost a quarter of an append).
  void U32(uint32_t v) { Le<4>(v); }
  void U64(uint64_t v) { Le<8>(v); }
  void I32(int32_t v) { U32(static_cast<uint32_t>(v)); }
  void Str(std::string_view s) {
    U32(static_cast<uint32_t>(s.size()));
    out_.append(s);
  }
  void Lock(const LockRecord& l) {
    Str(l.file_key);
    Str(l.host);
    I32(l.svid);
    Str(l.owner_handle);
    U8(l.exclusive ? 1 : 0);
    U64(l.offset);
    U64(l.length);
  }
  void Share(const ShareRecord& s) {
    Str(s.file_key);
    Str(s.host);
    Str(s.owner_handle);
    I32(s.mode);
    I32(s.access);
  }
  void operator()(const PutLock& c) {
    U8(static_cast<uint8_t>(ChangeTag::kPutLock));
    Lock(c.lock);
  }
  void operator()(const RemoveLock& c) {
    U8(static_cast<uint8_t>(ChangeTag::kRemoveLock));
    Lock(c.lock);
  }
  void operator()(const ReplaceLocks& c) {
    (*this)(ReplaceLocksView{c.file_key, c.host, c.svid, c.owner_handle, c.ranges, c.within});
  }
  // The journal's change per LOCK or UNLOCK: sized first and written into place (appending
  // field by field cost a third of the record).
  void operator()(const ReplaceLocksView& c) {
    const size_t size = 1 + 4 + c.file_key.size() + 4 + c.host.size() + 4 + 4 +
                        c.owner_handle.size() + 4 + 17 * c.ranges.size() + 1 + (c.within ? 16 : 0);
    const size_t at = out_.size();
    out_.resize(at + size);
    char* p = out_.data() + at;
    *p++ = static_cast<char>(ChangeTag::kReplaceLocks);
    p = Put(p, c.file_key);
    p = Put(p, c.host);
    p = Put<4>(p, static_cast<uint32_t>(c.svid));
    p = Put(p, c.owner_handle);
    p = Put<4>(p, static_cast<uint32_t>(c.ranges.size()));
    for (const LockRange& r : c.ranges) {
      *p++ = static_cast<char>(r.exclusive ? 1 : 0);
      p = Put<8>(p, r.offset);
      p = Put<8>(p, r.length);
    }
    *p++ = static_cast<char>(c.within ? 1 : 0);
    if (c.within) {
      p = Put<8>(p, c.within->first);
      p = Put<8>(p, c.within->last);
    }
    NLOCKD_ASSERT(p == out_.data() + out_.size(), "ReplaceLocks record size");
  }
  void operator()(const PutShare& c) {
    U8(static_cast<uint8_t>(ChangeTag::kPutShare));
    Share(c.share);
  }
  void operator()(const RemoveShare& c) {
    U8(static_cast<uint8_t>(ChangeTag::kRemoveShare));
    Share(c.share);
  }
  void operator()(const LockChangesOp& op) {
    U8(static_cast<uint8_t>(OpTag::kLockChanges));
    U32(static_cast<uint32_t>(op.changes.size()));
    for (const LockChange& change : op.changes) std::visit(*this, change);
  }
  void operator()(const ReleaseHostOp& op) {
    U8(static_cast<uint8_t>(OpTag::kReleaseHost));
    Str(op.host);
  }

 private:
  template <size_t N>
  static char* Put(char* p, uint64_t v) {
    for (size_t i = 0; i < N; ++i) p[i] = static_cast<char>((v >> (8 * i)) & 0xFFU);
    return p + N;
  }
  static char* Put(char* p, std::string_view s) {
    p = Put<4>(p, static_cast<uint32_t>(s.size()));
    if (!s.empty()) std::memcpy(p, s.data(), s.size());
    return p + s.size();
  }
  template <size_t N>
  void Le(uint64_t v) {
    char bytes[N];
    for (size_t i = 0; i < N; ++i) bytes[i] = static_cast<char>((v >> (8 * i)) & 0xFFU);
    out_.append(bytes, N);
  }

  std::string& out_;
};

// Reads a payload; any overrun sets ok_ to false (and yields zeros).
class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  bool ok() const { return ok_ && pos_ == in_.size(); }
  uint8_t U8() { return Take(1) ? static_cast<uint8_t>(in_[pos_ - 1]) : 0; }
  uint32_t U32() { return static_cast<uint32_t>(Le(4)); }
  uint64_t U64() { return Le(8); }
  int32_t I32() { return static_cast<int32_t>(U32()); }
  std::string Str() {
    const uint32_t n = U32();
    if (!Take(n)) return {};
    return std::string(in_.substr(pos_ - n, n));
  }
  LockRecord Lock() {
    LockRecord l;
    l.file_key = Str();
    l.host = Str();
    l.svid = I32();
    l.owner_handle = Str();
    l.exclusive = U8() != 0;
    l.offset = U64();
    l.length = U64();
    return l;
  }
  ShareRecord Share() {
    ShareRecord s;
    s.file_key = Str();
    s.host = Str();
    s.owner_handle = Str();
    s.mode = I32();
    s.access = I32();
    return s;
  }
  std::optional<LockChange> Change() {
    switch (static_cast<ChangeTag>(U8())) {
      case ChangeTag::kPutLock:
        return PutLock{Lock()};
      case ChangeTag::kRemoveLock:
        return RemoveLock{Lock()};
      case ChangeTag::kReplaceLocks: {
        ReplaceLocks r;
        r.file_key = Str();
        r.host = Str();
        r.svid = I32();
        r.owner_handle = Str();
        const uint32_t n = U32();
        // Each range takes 17 bytes: a count beyond what is left is damage.
        if (n > (in_.size() - pos_) / 17) return Bad();
        r.ranges.reserve(n);
        for (uint32_t i = 0; i < n; ++i) {
          LockRange range;
          range.exclusive = U8() != 0;
          range.offset = U64();
          range.length = U64();
          r.ranges.push_back(range);
        }
        if (U8() != 0) {
          OffsetSpan span;
          span.first = U64();
          span.last = U64();
          r.within = span;
        }
        return r;
      }
      case ChangeTag::kPutShare:
        return PutShare{Share()};
      case ChangeTag::kRemoveShare:
        return RemoveShare{Share()};
    }
    return Bad();
  }
  std::optional<LoggedOp> Op() {
    switch (static_cast<OpTag>(U8())) {
      case OpTag::kLockChanges: {
        LockChangesOp op;
        const uint32_t n = U32();
        if (n > in_.size() - pos_) return Bad();  // each change takes a byte at least
        op.changes.reserve(n);
        for (uint32_t i = 0; i < n && ok_; ++i) {
          std::optional<LockChange> change = Change();
          if (!change) return std::nullopt;
          op.changes.push_back(std::move(*change));
        }
        return op;
      }
      case OpTag::kReleaseHost:
        return ReleaseHostOp{Str()};
    }
    return Bad();
  }

 private:
  std::nullopt_t Bad() {
    ok_ = false;
    return std::nullopt;
  }
  bool Take(size_t n) {
    if (!ok_ || in_.size() - pos_ < n) {
      ok_ = false;
      return false;
    }
    pos_ += n;
    return true;
  }
  uint64_t Le(int n) {
    if (!Take(static_cast<size_t>(n))) return 0;
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; --i) {
      v = (v << 8) |
          static_cast<uint8_t>(in_[pos_ - static_cast<size_t>(n) + static_cast<size_t>(i)]);
    }
    return v;
  }

  std::string_view in_;
  size_t pos_ = 0;
  bool ok_ = true;
};

uint32_t ReadU32(std::string_view bytes, size_t at) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i)
    v = (v << 8) | static_cast<uint8_t>(bytes[at + static_cast<size_t>(i)]);
  return v;
}

void WriteU32At(std::string& out, size_t at, uint32_t v) {
  for (size_t i = 0; i < 4; ++i) out[at + i] = static_cast<char>((v >> (8 * i)) & 0xFFU);
}

// Fills in the header of the record that begins at `start` and runs to the end of `out`.
void SealRecord(std::string& out, size_t start, LogFormat format) {
  const std::string_view payload = std::string_view(out).substr(start + 8);
  const auto length = static_cast<uint32_t>(payload.size());
  const auto code = static_cast<uint32_t>(format);
  WriteU32At(out, start, (code << kFormatShift) | length);
  WriteU32At(out, start + 4, *Checksum(code, payload));
}

}  // namespace

std::string EncodeLogRecord(const LoggedOp& op) {
  std::string record;
  EncodeLogRecordTo(op, record);
  return record;
}

void EncodeLogRecordTo(const LoggedOp& op, std::string& out, LogFormat format) {
  const size_t start = out.size();
  out.append(8, '\0');
  Writer writer(out);
  std::visit(writer, op);
  SealRecord(out, start, format);
}

LockChangesRecord::LockChangesRecord(std::string& out) : out_(out), start_(out.size()) {
  out_.append(8, '\0');  // the header, sealed by Finish
  Writer(out_).U8(static_cast<uint8_t>(OpTag::kLockChanges));
  out_.append(4, '\0');  // the change count
}

void LockChangesRecord::Add(const ReplaceLocksView& change) {
  Writer writer(out_);
  writer(change);
  ++changes_;
}

void LockChangesRecord::Add(const LockChange& change) {
  Writer writer(out_);
  std::visit(writer, change);
  ++changes_;
}

void LockChangesRecord::Finish() {
  WriteU32At(out_, start_ + 9, changes_);
  SealRecord(out_, start_, kCurrentLogFormat);
}

std::vector<LoggedOp> DecodeLogRecords(std::string_view bytes, size_t* valid_bytes,
                                       Checksums checksums) {
  std::vector<LoggedOp> ops;
  size_t at = 0;
  while (bytes.size() - at >= 8) {
    const uint32_t word = ReadU32(bytes, at);
    const uint32_t format = word >> kFormatShift;
    const uint32_t length = word & kLengthMask;
    const uint32_t crc = ReadU32(bytes, at + 4);
    // A record has a payload: a zero length is space reserved and never written (a mapped
    // segment's tail).
    if (length == 0 || length > kMaxLogPayload || bytes.size() - at - 8 < length) break;
    const std::string_view payload = bytes.substr(at + 8, length);
    // A format this build does not know ends the log: it cannot tell damage from data.
    if (format > static_cast<uint32_t>(kCurrentLogFormat)) break;
    if (checksums == Checksums::kVerify && Checksum(format, payload) != crc) break;
    Reader reader(payload);
    std::optional<LoggedOp> op = reader.Op();
    if (!op || !reader.ok()) break;
    ops.push_back(std::move(*op));
    at += 8 + length;
  }
  if (valid_bytes != nullptr) *valid_bytes = at;
  return ops;
}

namespace {

// What a lock-table change sets, as CoalesceLogged compares it.
struct LockOwnerKey {
  std::string_view file, host;
  int32_t svid = 0;
  std::string_view oh;
  friend bool operator==(const LockOwnerKey&, const LockOwnerKey&) = default;
};
struct ShareKey {
  std::string_view file, host, oh;
  friend bool operator==(const ShareKey&, const ShareKey&) = default;
};
size_t Mix(size_t seed, size_t h) {
  return seed ^ (h + 0x9e3779b97f4a7c15ULL + (seed << 6) + (seed >> 2));
}
struct KeyHash {
  size_t operator()(const LockOwnerKey& k) const {
    const std::hash<std::string_view> h;
    return Mix(Mix(Mix(h(k.file), h(k.host)), std::hash<int32_t>()(k.svid)), h(k.oh));
  }
  size_t operator()(const ShareKey& k) const {
    const std::hash<std::string_view> h;
    return Mix(Mix(h(k.file), h(k.host)), h(k.oh));
  }
};

// The parts of one owner's rows that later writes set: all of them, or those starting within
// one of `spans`.
struct Coverage {
  bool all = false;
  std::vector<OffsetSpan> spans;

  // Whether one later write sets every row `scope` may set (nullopt: all of the owner's rows).
  bool Covers(const std::optional<OffsetSpan>& scope) const {
    if (all) return true;
    if (!scope) return false;
    return std::any_of(spans.begin(), spans.end(), [&](const OffsetSpan& s) {
      return s.first <= scope->first && scope->last <= s.last;
    });
  }
  void Add(const std::optional<OffsetSpan>& scope) {
    if (!scope) {
      all = true;
      spans.clear();
    } else if (!Covers(scope)) {
      spans.push_back(*scope);
    }
  }
};

// Scans the writes from the last to the first, deciding which changes a later write overwrites.
class Superseded {
 public:
  // True if a later write sets everything `change` sets; else records what it sets.
  bool Check(const LockChange& change) {
    return std::visit([this](const auto& c) { return Check(c); }, change);
  }
  bool Check(const ReleaseHostOp& op) { return !released_.insert(op.host).second; }

 private:
  bool Lock(const LockOwnerKey& key, const std::optional<OffsetSpan>& scope) {
    if (released_.contains(key.host)) return true;
    Coverage& coverage = locks_[key];
    if (coverage.Covers(scope)) return true;
    coverage.Add(scope);
    return false;
  }
  bool Check(const ReplaceLocks& c) {
    return Lock({c.file_key, c.host, c.svid, c.owner_handle}, c.within);
  }
  bool Check(const PutLock& c) { return Row(c.lock); }
  bool Check(const RemoveLock& c) { return Row(c.lock); }
  bool Row(const LockRecord& l) {
    return Lock({l.file_key, l.host, l.svid, l.owner_handle}, OffsetSpan{l.offset, l.offset});
  }
  bool Check(const PutShare& c) { return Share(c.share); }
  bool Check(const RemoveShare& c) { return Share(c.share); }
  bool Share(const ShareRecord& s) {
    if (released_.contains(s.host)) return true;
    return !shares_.insert(ShareKey{s.file_key, s.host, s.owner_handle}).second;
  }

  std::unordered_set<std::string_view> released_;
  std::unordered_map<LockOwnerKey, Coverage, KeyHash> locks_;
  std::unordered_set<ShareKey, KeyHash> shares_;
};

}  // namespace

std::vector<CoalescedOp> CoalesceLogged(std::vector<LoggedOp> ops) {
  // dropped[i][j]: change j of ops[i] (for a host release, j = 0) is overwritten later.
  std::vector<std::vector<bool>> dropped(ops.size());
  {
    Superseded later;
    for (size_t i = ops.size(); i-- > 0;) {
      if (const auto* release = std::get_if<ReleaseHostOp>(&ops[i])) {
        dropped[i].push_back(later.Check(*release));
        continue;
      }
      const auto& changes = std::get<LockChangesOp>(ops[i]).changes;
      dropped[i].resize(changes.size());
      for (size_t j = changes.size(); j-- > 0;) dropped[i][j] = later.Check(changes[j]);
    }
  }
  // The string_views of `later` are gone; the writes can move.
  std::vector<CoalescedOp> out;
  LockChangesOp merged;
  auto flush = [&](size_t through) {
    if (merged.changes.empty()) return;
    out.push_back(CoalescedOp{std::move(merged), through});
    merged.changes.clear();
  };
  for (size_t i = 0; i < ops.size(); ++i) {
    if (auto* release = std::get_if<ReleaseHostOp>(&ops[i])) {
      if (dropped[i][0]) continue;
      flush(i - 1);  // i > 0 when merged holds anything
      out.push_back(CoalescedOp{std::move(*release), i});
      continue;
    }
    auto& changes = std::get<LockChangesOp>(ops[i]).changes;
    for (size_t j = 0; j < changes.size(); ++j) {
      if (!dropped[i][j]) merged.changes.push_back(std::move(changes[j]));
    }
  }
  flush(ops.size() - 1);
  if (!ops.empty()) {
    if (out.empty()) {
      out.push_back(CoalescedOp{LockChangesOp{}, ops.size() - 1});  // only empty writes
    } else {
      // What follows the last kept write is empty (a dropped change has a later kept one).
      out.back().through = ops.size() - 1;
    }
  }
  return out;
}

LogSegment::LogSegment(std::string path, uint64_t capacity) : path_(std::move(path)) {
  fd_ = open(path_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd_ < 0) {
    throw Error(ErrorKind::kFailed,
                fmt::format("cannot create lock log {}: {}", path_, std::strerror(errno)));
  }
  if (capacity == 0) return;
  // Reserved blocks first: a store into a mapped page the file system cannot back (a hole on a
  // full disk) kills the process with SIGBUS, where pwrite would have returned ENOSPC.
  if (fallocate(fd_, 0, 0, static_cast<off_t>(capacity)) != 0) {
    spdlog::debug("store: lock log {} is written with pwrite: cannot reserve {} bytes: {}", path_,
                  capacity, std::strerror(errno));
    return;
  }
  void* map = mmap(nullptr, capacity, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
  if (map == MAP_FAILED) {
    spdlog::debug("store: lock log {} is written with pwrite: cannot map it: {}", path_,
                  std::strerror(errno));
    return;
  }
  map_ = static_cast<char*>(map);
  capacity_ = capacity;
}

LogSegment::~LogSegment() {
  if (map_ != nullptr) {
    munmap(map_, capacity_);
    // The reserved space past the records goes; a crash leaves it, as zeros, and that reads as
    // the end of the log too.
    if (ftruncate(fd_, static_cast<off_t>(size_)) != 0) {
      spdlog::warn("store: cannot cut lock log {} to its records: {}", path_, std::strerror(errno));
    }
  }
  if (fd_ >= 0) close(fd_);
}

void LogSegment::Append(std::string_view bytes) {
  // Past the mapping once a record went beyond it (size_ > capacity_): pwrite from then on.
  if (map_ != nullptr && size_ <= capacity_ && bytes.size() <= capacity_ - size_) {
    std::memcpy(map_ + size_, bytes.data(), bytes.size());
    size_ += bytes.size();
    return;
  }
  uint64_t at = size_;
  while (!bytes.empty()) {
    const ssize_t n = pwrite(fd_, bytes.data(), bytes.size(), static_cast<off_t>(at));
    if (n < 0) {
      if (errno == EINTR) continue;
      throw Error(ErrorKind::kFailed,
                  fmt::format("cannot write lock log {}: {}", path_, std::strerror(errno)));
    }
    at += static_cast<uint64_t>(n);
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  size_ = at;
}

std::string ReadLogFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  std::ostringstream all;
  all << in.rdbuf();
  if (in.bad()) {
    throw Error(ErrorKind::kFailed, fmt::format("cannot read lock log {}", path));
  }
  return std::move(all).str();
}

std::vector<LoggedOp> ReadLogRecords(const std::string& path) {
  auto cannot_read = [&path](int error) {
    return Error(ErrorKind::kFailed, fmt::format("cannot read lock log {}: {}", path,
                                                 std::generic_category().message(error)));
  };
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return {};
    throw cannot_read(errno);
  }
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    const int error = errno;
    close(fd);
    throw cannot_read(error);
  }
  if (st.st_size == 0) {
    close(fd);
    return {};
  }
  const auto size = static_cast<size_t>(st.st_size);
  void* map = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);  // the mapping keeps the file
  if (map == MAP_FAILED) {
    // A file system that cannot map: read it whole.
    return DecodeLogRecords(ReadLogFile(path));
  }
  std::vector<LoggedOp> ops;
  try {
    ops = DecodeLogRecords(std::string_view(static_cast<const char*>(map), size));
  } catch (...) {
    munmap(map, size);
    throw;
  }
  munmap(map, size);
  return ops;
}

}  // namespace nlockd::store
