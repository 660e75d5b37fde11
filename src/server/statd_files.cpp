// SPDX-License-Identifier: Apache-2.0
#include "server/statd_files.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <set>

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/error.hpp"

namespace nlockd::server {
namespace {

namespace fs = std::filesystem;

// "%08x %08x %08x %08x " before the cookie: statd reads the cookie at this fixed offset.
constexpr size_t kCookieOffset = 36;
constexpr size_t kCookieDigits = 32;

std::optional<uint32_t> Hex32(std::string_view text) {
  if (text.size() != 8) return std::nullopt;
  uint32_t value = 0;
  for (char c : text) {
    int digit = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
    if (digit < 0) return std::nullopt;
    value = value << 4 | static_cast<uint32_t>(digit);
  }
  return value;
}

// statd prints an in_addr's s_addr (network byte order in memory) as a host-order integer.
std::string AddressText(uint32_t printed) {
  in_addr address{};
  std::memcpy(&address.s_addr, &printed, sizeof printed);
  char text[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &address, text, sizeof text);
  return text;
}

uint32_t PrintedAddress(const std::string& text) {
  in_addr address{};
  if (inet_pton(AF_INET, text.c_str(), &address) != 1) inet_pton(AF_INET, "127.0.0.1", &address);
  uint32_t printed = 0;
  std::memcpy(&printed, &address.s_addr, sizeof printed);
  return printed;
}

bool UsableFileName(const std::string& name) {
  return !name.empty() && name.front() != '.' && name.find_first_of("/ \t\n") == std::string::npos;
}

[[noreturn]] void Fail(const std::string& what, const fs::path& path) {
  throw Error(ErrorKind::kFailed,
              fmt::format("{} {}: {}", what, path.string(), std::strerror(errno)));
}

// Writes `text` to PATH.new, gives it to owner:group and renames it over `path`.
void WriteAtomically(const fs::path& path, std::string_view text, uid_t owner, gid_t group) {
  fs::path temporary = path;
  temporary += ".new";
  int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
  if (fd < 0) Fail("cannot create", temporary);
  bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
                 ::fsync(fd) == 0;
  if (written && ::fchown(fd, owner, group) != 0 && errno != EPERM) written = false;
  ::close(fd);
  if (!written || ::rename(temporary.c_str(), path.c_str()) != 0) {
    int saved = errno;
    ::unlink(temporary.c_str());
    errno = saved;
    Fail("cannot write", path);
  }
}

}  // namespace

std::optional<store::Registration> ParseStatdRecord(std::string_view line) {
  if (!line.empty() && line.back() == '\n') line.remove_suffix(1);
  if (line.size() < kCookieOffset + kCookieDigits + 2) return std::nullopt;
  std::optional<uint32_t> fields[4];
  for (size_t i = 0; i < 4; ++i) {
    if (line[i * 9 + 8] != ' ') return std::nullopt;
    fields[i] = Hex32(line.substr(i * 9, 8));
    if (!fields[i]) return std::nullopt;
  }
  store::Registration registration;
  for (size_t i = 0; i < registration.priv.size(); ++i) {
    std::optional<uint32_t> byte =
        Hex32("000000" + std::string(line.substr(kCookieOffset + 2 * i, 2)));
    if (!byte) return std::nullopt;
    registration.priv[i] = static_cast<uint8_t>(*byte);
  }
  std::string_view names = line.substr(kCookieOffset + kCookieDigits);
  if (names.empty() || names.front() != ' ') return std::nullopt;
  names.remove_prefix(1);
  size_t space = names.find(' ');
  if (space == 0 || space == std::string_view::npos) return std::nullopt;
  registration.mon_name = std::string(names.substr(0, space));
  std::string_view my_name = names.substr(space);
  while (!my_name.empty() && my_name.front() == ' ') my_name.remove_prefix(1);
  if (my_name.empty()) return std::nullopt;
  registration.my_id.my_name = std::string(my_name);
  registration.source_address = AddressText(*fields[0]);
  registration.my_id.my_prog = static_cast<int32_t>(*fields[1]);
  registration.my_id.my_vers = static_cast<int32_t>(*fields[2]);
  registration.my_id.my_proc = static_cast<int32_t>(*fields[3]);
  return registration;
}

std::string FormatStatdRecord(const store::Registration& registration) {
  std::string line =
      fmt::format("{:08x} {:08x} {:08x} {:08x} ", PrintedAddress(registration.source_address),
                  static_cast<uint32_t>(registration.my_id.my_prog),
                  static_cast<uint32_t>(registration.my_id.my_vers),
                  static_cast<uint32_t>(registration.my_id.my_proc));
  for (uint8_t byte : registration.priv) line += fmt::format("{:02x}", byte);
  // statd turns whitespace in my_name into '_' when it records it.
  std::string my_name = registration.my_id.my_name;
  for (char& c : my_name) {
    if (c == ' ' || c == '\t' || c == '\n') c = '_';
  }
  line += fmt::format(" {} {}\n", registration.mon_name, my_name);
  return line;
}

std::vector<store::Registration> ReadStatdRecords(const fs::path& directory,
                                                  std::vector<std::string>& warnings) {
  std::vector<store::Registration> registrations;
  std::error_code error;
  std::set<fs::path> files;
  for (const auto& entry : fs::directory_iterator(directory, error)) {
    std::error_code type_error;
    if (entry.path().filename().string().starts_with('.') || !entry.is_regular_file(type_error)) {
      continue;
    }
    files.insert(entry.path());
  }
  for (const fs::path& file : files) {
    std::ifstream in(file);
    std::string line;
    int number = 0;
    while (std::getline(in, line)) {
      ++number;
      if (std::optional<store::Registration> registration = ParseStatdRecord(line)) {
        registrations.push_back(std::move(*registration));
      } else {
        warnings.push_back(
            fmt::format("{}:{}: not a statd monitor record; skipped", file.string(), number));
      }
    }
  }
  return registrations;
}

void WriteStatdRecords(const fs::path& directory,
                       const std::vector<store::Registration>& registrations, uid_t owner,
                       gid_t group) {
  std::map<std::string, std::string> files;
  for (const store::Registration& registration : registrations) {
    if (!UsableFileName(registration.mon_name)) continue;  // statd refuses such names too
    files[registration.mon_name] += FormatStatdRecord(registration);
  }
  // Listed first, removed after: a directory changed while it is read may skip entries.
  std::vector<fs::path> stale;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(directory, error)) {
    std::string name = entry.path().filename().string();
    std::error_code type_error;
    if (!name.starts_with('.') && entry.is_regular_file(type_error) && !files.contains(name)) {
      stale.push_back(entry.path());
    }
  }
  for (const fs::path& path : stale) {
    if (!fs::remove(path, error) && error) Fail("cannot remove", path);
  }
  for (const auto& [name, text] : files) WriteAtomically(directory / name, text, owner, group);
}

std::optional<int32_t> ReadStatdState(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  int32_t state = 0;
  if (!in.read(reinterpret_cast<char*>(&state), sizeof state)) return std::nullopt;
  return state;
}

void WriteStatdState(const fs::path& file, int32_t state) {
  struct stat existing {};
  uid_t owner = ::stat(file.c_str(), &existing) == 0 ? existing.st_uid : ::geteuid();
  gid_t group = ::stat(file.c_str(), &existing) == 0 ? existing.st_gid : ::getegid();
  WriteAtomically(file, std::string_view(reinterpret_cast<const char*>(&state), sizeof state),
                  owner, group);
}

}  // namespace nlockd::server
