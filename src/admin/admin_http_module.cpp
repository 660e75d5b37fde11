// SPDX-License-Identifier: Apache-2.0
// nlockd-admin-http.so: the admin HTTP server (AdminServer, cpp-httplib) as a module that the
// daemon loads with dlopen once it serves (cmd/nlockd/admin_module.hpp). Only these two C
// functions are exported; everything else in the module, its copy of admin/ and base/ included,
// is hidden.
#include "admin/admin_http.hpp"
#include "admin/admin_server.hpp"
#include "nlockd_build_info.hpp"

extern "C" __attribute__((visibility("default"))) nlockd::admin::AdminHttpServer*
nlockd_admin_http_server_new(const nlockd::admin::AdminHandler* handler) {
  return new nlockd::admin::AdminServer(*handler);
}

extern "C" __attribute__((visibility("default"))) const char* nlockd_admin_http_module_build() {
  return NLOCKD_BUILD_VERSION " " NLOCKD_BUILD_REVISION;
}
