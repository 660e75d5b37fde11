// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "admin/admin_http.hpp"

namespace nlockd::cmd {

// Where the daemon looks for the admin HTTP module (admin/admin_http.hpp), in order: beside
// its own executable (a build tree), in `relative_dir` from the executable's directory (an
// installation moved as a whole: NLOCKD_ADMIN_MODULE_RELATIVE_DIR, sbin/ to the library
// directory's nlockd/), then in `installed_dir` (NLOCKD_ADMIN_MODULE_DIR).
std::vector<std::string> AdminModuleCandidates(const std::string& executable,
                                               const std::string& relative_dir,
                                               const std::string& installed_dir);

// Loads the module (the first candidate that exists; once per process, never unloaded: the
// server's threads run its code) and returns a new, unstarted server over `handler`. Throws
// std::runtime_error naming the paths tried, dlopen's reason, or a module of another build.
std::unique_ptr<admin::AdminHttpServer> LoadAdminHttpServer(admin::AdminHandler handler);

}  // namespace nlockd::cmd
