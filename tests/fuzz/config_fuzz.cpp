// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: the config file parser (TOML through the settings table), nfs.conf's
// reader and what nlockd takes from it, and the parsers of the values a flag may give. Bad input
// must be refused with nlockd's Error, nothing else. The parser reads a path, so the input is
// handed to it as an in-memory file.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/error.hpp"
#include "server/config.hpp"
#include "server/nfs_conf.hpp"

namespace {

// An in-memory file holding the input, at a path the parser can open.
class MemoryFile {
 public:
  MemoryFile(const uint8_t* data, size_t size) : fd_(memfd_create("config", MFD_CLOEXEC)) {
    size_t done = 0;
    while (fd_ >= 0 && done < size) {
      const ssize_t n = write(fd_, data + done, size - done);
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
  }
  ~MemoryFile() {
    if (fd_ >= 0) close(fd_);
  }
  MemoryFile(const MemoryFile&) = delete;
  MemoryFile& operator=(const MemoryFile&) = delete;
  std::string path() const { return "/proc/self/fd/" + std::to_string(fd_); }

 private:
  int fd_;
};

template <typename F>
void Refusing(F parse) {
  try {
    parse();
  } catch (const nlockd::Error&) {
    // Refused with a message: what bad input should get.
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  spdlog::set_level(spdlog::level::off);  // Warnings about odd values are not findings.
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  MemoryFile file(data, size);
  Refusing([&] {
    nlockd::server::Config config;
    nlockd::server::LoadConfigFile(file.path(), config);
    (void)nlockd::server::RenderEffectiveConfig(config);
  });
  const std::string text(reinterpret_cast<const char*>(data), size);
  // The same bytes as nfs.conf (its includes resolve in a directory that does not exist).
  Refusing([&] {
    std::vector<std::string> warnings;
    const nlockd::server::NfsConf conf =
        nlockd::server::NfsConf::Parse(text, "/nonexistent/nfs.conf", warnings);
    nlockd::server::Config statd;
    nlockd::server::ApplyNfsConf(conf, true, false, statd, warnings);
    nlockd::server::Config lockd;
    nlockd::server::ApplyNfsConf(conf, false, true, lockd, warnings);
  });
  Refusing([&] { (void)nlockd::server::ParseListenAddress(text); });
  Refusing([&] { (void)nlockd::server::ParseAdminListen(text); });
  Refusing([&] { (void)nlockd::server::ParseIpLiteral(text, "fuzz"); });
  Refusing([&] { (void)nlockd::server::CheckStoreUri(text); });
  return 0;
}
