// SPDX-License-Identifier: Apache-2.0
#include "server/nsm_bridge.hpp"

#include <spdlog/spdlog.h>

#include "base/logging.hpp"
#include "nlm/service.hpp"
#include "nsm/service.hpp"

namespace nlockd::server {

asio::awaitable<bool> NsmBridge::Monitor(nlm::MonitorRequest request) {
  bool ok = co_await nsm_->MonitorLocal(request.host, request.address, request.nsm_state);
  if (ok) {
    spdlog::info("monitoring host={} caller={} address={} nsm_state={}", LogValue(request.host),
                 LogValue(request.caller_name), request.address.to_string(), request.nsm_state);
  }
  co_return ok;
}

void NsmBridge::HostRebooted(const std::string& mon_name, int32_t state) {
  ReleaseRebootedHost(mon_name, state);
}

size_t NsmBridge::ReleaseRebootedHost(const std::string& mon_name, int32_t state) {
  size_t released = nlm_->HostRebooted(mon_name);
  ++crash_cleanups_;
  locks_cleaned_ += released;
  spdlog::info("host {} rebooted (state {}): released {} locks", mon_name, state, released);
  return released;
}

}  // namespace nlockd::server
