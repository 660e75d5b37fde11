// SPDX-License-Identifier: Apache-2.0
#include "cmd/nlockd/admin_module.hpp"

#include <filesystem>
#include <mutex>
#include <stdexcept>
#include <system_error>
#include <thread>

#include <dlfcn.h>
#include <sys/resource.h>
#include <unistd.h>

#include "nlockd_build_info.hpp"

namespace nlockd::cmd {
namespace {

struct LoadedModule {
  admin::AdminHttpServerFactory create = nullptr;
  std::string error;  // Why it did not load, when create is null.
};

LoadedModule Load() {
  std::error_code ignored;
  const std::string executable = std::filesystem::read_symlink("/proc/self/exe", ignored).string();
  std::string tried;
  for (const std::string& path : AdminModuleCandidates(executable, NLOCKD_ADMIN_MODULE_RELATIVE_DIR,
                                                       NLOCKD_ADMIN_MODULE_DIR)) {
    if (access(path.c_str(), F_OK) != 0) {
      tried += (tried.empty() ? "" : ", ") + path;
      continue;
    }
    void* module = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    // Once per process (LoadAdminHttpServer's call_once), so dlerror's state is ours.
    if (module == nullptr) {
      return {nullptr, std::string("cannot load ") + dlerror()};  // NOLINT(concurrency-mt-unsafe)
    }
    // dlsym's void* to a function pointer: POSIX guarantees the conversion.
    auto build =
        reinterpret_cast<admin::AdminHttpModuleBuild>(dlsym(module, admin::kAdminHttpModuleBuild));
    auto create = reinterpret_cast<admin::AdminHttpServerFactory>(
        dlsym(module, admin::kAdminHttpModuleEntry));
    const std::string ours = NLOCKD_BUILD_VERSION " " NLOCKD_BUILD_REVISION;
    if (build == nullptr || create == nullptr) {
      return {nullptr, path + " is not nlockd's admin HTTP module"};
    }
    if (build() != ours) {
      return {nullptr, path + " belongs to nlockd " + build() + ", not to this nlockd (" + ours +
                           "): install both from one build"};
    }
    return {create, {}};
  }
  return {nullptr, "the admin HTTP module " + std::string(admin::kAdminHttpModuleFile) +
                       " is not installed (looked at " + tried + ")"};
}

}  // namespace

std::vector<std::string> AdminModuleCandidates(const std::string& executable,
                                               const std::string& relative_dir,
                                               const std::string& installed_dir) {
  namespace fs = std::filesystem;
  std::vector<std::string> candidates;
  if (!executable.empty()) {
    const fs::path directory = fs::path(executable).parent_path();
    candidates.push_back((directory / admin::kAdminHttpModuleFile).string());
    candidates.push_back(
        (directory / relative_dir / admin::kAdminHttpModuleFile).lexically_normal().string());
  }
  candidates.push_back((fs::path(installed_dir) / admin::kAdminHttpModuleFile).string());
  return candidates;
}

std::unique_ptr<admin::AdminHttpServer> LoadAdminHttpServer(admin::AdminHandler handler) {
  static std::once_flag once;
  static LoadedModule loaded;
  std::call_once(once, [] {
    // Loaded on a thread of the lowest priority (nice 19, never starved): mapping and
    // relocating the module's libraries and running their initialisers is most of the admin
    // server's start, and on a machine with one CPU it would otherwise hold back the
    // rpcbind registration and restart notification that the io threads are sending.
    std::thread loader([] {
      setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), 19);
      loaded = Load();
    });
    loader.join();
  });
  if (loaded.create == nullptr) throw std::runtime_error(loaded.error);
  return std::unique_ptr<admin::AdminHttpServer>(loaded.create(&handler));
}

}  // namespace nlockd::cmd
