// SPDX-License-Identifier: Apache-2.0
#include "server/early_notify_file.hpp"

#include <cerrno>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <system_error>
#include <utility>

#include <fcntl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include "base/error.hpp"
#include "nsm/registry.hpp"

namespace nlockd::server {
namespace {

constexpr std::string_view kVersionLine = "nlockd early-notify 1";
// A record names at most the registrations' hosts; far beyond that, the file is not ours.
constexpr std::uintmax_t kMaxFileBytes = 64u << 20;

bool Plain(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == ':' || c == '-';
}

std::string Encode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    if (Plain(c)) {
      out += c;
    } else {
      out += fmt::format("%{:02X}", static_cast<unsigned char>(c));
    }
  }
  return out;
}

std::optional<std::string> Decode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      if (!Plain(text[i])) return std::nullopt;
      out += text[i];
      continue;
    }
    unsigned value = 0;
    if (i + 2 >= text.size()) return std::nullopt;
    const char* first = text.data() + i + 1;
    auto [end, error] = std::from_chars(first, first + 2, value, 16);
    if (error != std::errc() || end != first + 2) return std::nullopt;
    out += static_cast<char>(value);
    i += 2;
  }
  return out;
}

std::vector<std::string_view> Words(std::string_view line) {
  std::vector<std::string_view> words;
  size_t start = 0;
  while (start <= line.size()) {
    const size_t space = line.find(' ', start);
    const size_t end = space == std::string_view::npos ? line.size() : space;
    words.push_back(line.substr(start, end - start));
    if (space == std::string_view::npos) break;
    start = space + 1;
  }
  return words;
}

[[noreturn]] void FailErrno(const std::string& what, const std::string& path) {
  throw Error(ErrorKind::kFailed,
              fmt::format("{} {}: {}", what, path, std::system_category().message(errno)));
}

void SyncDirectoryOf(const std::string& path) {
  const std::string directory = std::filesystem::path(path).parent_path().string();
  const int dir = ::open(directory.empty() ? "." : directory.c_str(), O_RDONLY | O_CLOEXEC);
  if (dir < 0) FailErrno("cannot open the directory of", path);
  const bool synced = ::fsync(dir) == 0;
  const int saved = errno;
  ::close(dir);
  errno = saved;
  if (!synced) FailErrno("cannot sync the directory of", path);
}

// Removes `path` and syncs its directory, so that an older record cannot come back after a
// crash. Nothing to do when it is not there.
void RemoveDurably(const std::string& path) {
  if (::unlink(path.c_str()) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) return;
    FailErrno("cannot remove the early-notify file", path);
  }
  SyncDirectoryOf(path);
}

// PATH.new written and synced, renamed over PATH, the directory synced: the file is either the
// old record or the new one, after a crash too.
void WriteDurably(const std::string& path, std::string_view text) {
  const std::string temporary = path + ".new";
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) FailErrno("cannot create", temporary);
  size_t done = 0;
  bool written = true;
  while (written && done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    written = n > 0;
    if (written) done += static_cast<size_t>(n);
  }
  written = written && ::fsync(fd) == 0;
  const int saved = errno;
  ::close(fd);
  if (!written || ::rename(temporary.c_str(), path.c_str()) != 0) {
    const int failed = written ? errno : saved;
    ::unlink(temporary.c_str());
    errno = failed;
    FailErrno("cannot write", path);
  }
  SyncDirectoryOf(path);
}

}  // namespace

std::string FormatEarlyNotifyRecord(const EarlyNotifyRecord& record) {
  std::string text =
      fmt::format("{}\nstate {}\nboot {}\n", kVersionLine, record.state, Encode(record.boot_id));
  for (const nsm::NotifyTarget& host : record.hosts) {
    text += "host " + Encode(host.mon_name);
    if (!host.address.empty()) text += " " + Encode(host.address);
    text += "\n";
  }
  text += "end\n";
  return text;
}

std::optional<EarlyNotifyRecord> ParseEarlyNotifyRecord(std::string_view text,
                                                        std::string* problem) {
  auto fail = [problem](std::string why) -> std::optional<EarlyNotifyRecord> {
    if (problem != nullptr) *problem = std::move(why);
    return std::nullopt;
  };
  EarlyNotifyRecord record;
  bool have_state = false;
  bool have_boot = false;
  bool ended = false;
  size_t line_number = 0;
  while (!text.empty()) {
    const size_t newline = text.find('\n');
    if (newline == std::string_view::npos) return fail("its last line is cut short");
    const std::string_view line = text.substr(0, newline);
    text.remove_prefix(newline + 1);
    ++line_number;
    if (ended) return fail("text after its end line");
    if (line_number == 1) {
      if (line != kVersionLine) return fail("not an early-notify file of this version");
      continue;
    }
    const std::vector<std::string_view> words = Words(line);
    const std::string_view key = words[0];
    if (key == "end" && words.size() == 1) {
      ended = true;
    } else if (key == "state" && words.size() == 2 && !have_state) {
      auto [end, error] =
          std::from_chars(words[1].data(), words[1].data() + words[1].size(), record.state);
      if (error != std::errc() || end != words[1].data() + words[1].size()) {
        return fail("line " + std::to_string(line_number) + ": not a state number");
      }
      have_state = true;
    } else if (key == "boot" && words.size() == 2 && !have_boot) {
      std::optional<std::string> boot = Decode(words[1]);
      if (!boot) return fail("line " + std::to_string(line_number) + ": not a boot id");
      record.boot_id = std::move(*boot);
      have_boot = true;
    } else if (key == "host" && (words.size() == 2 || words.size() == 3) && !words[1].empty()) {
      std::optional<std::string> mon_name = Decode(words[1]);
      std::optional<std::string> address =
          words.size() == 3 ? Decode(words[2]) : std::optional<std::string>("");
      if (!mon_name || !address || mon_name->empty()) {
        return fail("line " + std::to_string(line_number) + ": not a host");
      }
      record.hosts.push_back({std::move(*mon_name), std::move(*address)});
    } else {
      return fail("line " + std::to_string(line_number) + " is not understood");
    }
  }
  if (line_number == 0) return fail("it is empty");
  if (!ended || !have_state || !have_boot) return fail("it is not whole");
  return record;
}

EarlyNotifyFile::EarlyNotifyFile(std::string path, bool keep)
    : path_(std::move(path)), keep_(keep) {
  std::error_code error;
  const std::uintmax_t size = std::filesystem::file_size(path_, error);
  if (!error && size <= kMaxFileBytes) {
    std::ifstream in(path_, std::ios::binary);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::string problem;
    record_ = ParseEarlyNotifyRecord(text, &problem);
    if (!record_) spdlog::warn("nsm early-notify file {} not used: {}", path_, problem);
  } else if (!error) {
    spdlog::warn("nsm early-notify file {} not used: {} bytes", path_, size);
  }
  if (record_) RaiseFloor(*record_);
  if (keep_) writer_ = std::thread([this] { WriterLoop(); });
}

EarlyNotifyFile::~EarlyNotifyFile() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  if (writer_.joinable()) writer_.join();
}

std::optional<EarlyNotifyRecord> EarlyNotifyFile::record() const {
  std::lock_guard lock(mutex_);
  return record_;
}

std::optional<EarlyNotifyRecord> EarlyNotifyFile::floor() const {
  std::lock_guard lock(mutex_);
  return floor_;
}

void EarlyNotifyFile::RaiseFloor(const EarlyNotifyRecord& record) {
  // The boot that reserved the newest state: a state reserved on another boot than this one's
  // may have been announced there.
  if (!floor_ || nsm::StateIsNewer(record.state, floor_->state)) {
    floor_ = EarlyNotifyRecord{record.state, record.boot_id, {}};
  } else if (record.state == floor_->state) {
    floor_->boot_id = record.boot_id;
  }
}

bool EarlyNotifyFile::Reserve(int32_t state, const std::string& boot_id) {
  std::lock_guard write(write_mutex_);
  EarlyNotifyRecord next;
  {
    std::lock_guard lock(mutex_);
    if (record_) next = *record_;
    if (!record_ || nsm::StateIsNewer(state, next.state)) next.state = state;
    next.boot_id = boot_id;
    if (pending_hosts_) next.hosts = *pending_hosts_;
    // Even unwritten: a state reserved may be announced by this process. The state asked for,
    // not the file's newer one: that one was reserved on its own boot.
    RaiseFloor(EarlyNotifyRecord{state, boot_id, {}});
    if (!keep_) {
      // Not kept: nothing to create, but a file left until its removal must name this boot, and
      // no hosts, so that no start on this boot takes it for another's.
      if (!record_) return true;
      next.hosts.clear();
    }
    if (record_ && *record_ == next) return true;
  }
  if (Write(next)) {
    std::lock_guard lock(mutex_);
    record_ = std::move(next);
    // The hosts given so far went with it.
    if (pending_hosts_ && *pending_hosts_ == record_->hosts) pending_hosts_.reset();
    changed_.notify_all();
    return true;
  }
  // Whatever the file says now may be behind the store's coming state: it must not stay.
  try {
    RemoveDurably(path_);
  } catch (const std::exception& e) {
    throw Error(ErrorKind::kFailed,
                fmt::format("{}: it would be behind the store's state", e.what()));
  }
  std::lock_guard lock(mutex_);
  record_.reset();
  return false;
}

void EarlyNotifyFile::Remove() {
  std::lock_guard write(write_mutex_);
  RemoveDurably(path_);
  std::lock_guard lock(mutex_);
  record_.reset();
}

void EarlyNotifyFile::SetHosts(std::vector<nsm::NotifyTarget> hosts) {
  if (!keep_) return;
  {
    std::lock_guard lock(mutex_);
    pending_hosts_ = std::move(hosts);
  }
  changed_.notify_all();
}

void EarlyNotifyFile::Flush() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [this] { return (!pending_hosts_ || !record_) && !writing_; });
}

void EarlyNotifyFile::WriterLoop() {
  std::unique_lock lock(mutex_);
  for (;;) {
    // Hosts wait for a record: the file only ever exists through Reserve.
    changed_.wait(lock, [this] { return stopping_ || (pending_hosts_ && record_); });
    if (!pending_hosts_ || !record_) return;  // stopping, nothing to write
    writing_ = true;
    lock.unlock();
    {
      std::lock_guard write(write_mutex_);
      std::optional<EarlyNotifyRecord> next;
      {
        std::lock_guard inner(mutex_);
        if (record_ && pending_hosts_) {
          next = *record_;
          next->hosts = std::move(*pending_hosts_);
          pending_hosts_.reset();
        }
      }
      if (next && *next != record() && Write(*next)) {
        std::lock_guard inner(mutex_);
        record_ = std::move(next);
      }
    }
    lock.lock();
    writing_ = false;
    changed_.notify_all();
  }
}

bool EarlyNotifyFile::Write(const EarlyNotifyRecord& record) {
  try {
    WriteDurably(path_, FormatEarlyNotifyRecord(record));
    return true;
  } catch (const std::exception& e) {
    spdlog::warn("nsm early-notify file: {}", e.what());
    return false;
  }
}

}  // namespace nlockd::server
