// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <string>

#include "nlm/host_monitor.hpp"
#include "nsm/status_receiver.hpp"

namespace nlockd::nlm {
class NlmService;
}
namespace nlockd::nsm {
class NsmService;
}

namespace nlockd::server {

// Joins NLM and NSM, which never include each other (docs/architecture.md, modules): NLM's "monitor
// this host" becomes a durable NSM registration (with nsm::LocalNlmId() as its my_id), and the
// status callback of such a registration releases the host's locks through
// NlmService::HostRebooted, which grants the waiters they blocked. Runs on the server's executor.
// Attach() before serving; both services must outlive it.
class NsmBridge final : public nlm::HostMonitor, public nsm::LocalStatusReceiver {
 public:
  void Attach(nsm::NsmService& nsm, nlm::NlmService& nlm) {
    nsm_ = &nsm;
    nlm_ = &nlm;
  }

  asio::awaitable<bool> Monitor(nlm::MonitorRequest request) override;
  void HostRebooted(const std::string& mon_name, int32_t state) override;
  // HostRebooted, returning how many locks went with the host.
  size_t ReleaseRebootedHost(const std::string& mon_name, int32_t state);

  // For /metrics: hosts released on a reboot notification, and the locks that went with them.
  uint64_t crash_cleanups() const { return crash_cleanups_; }
  uint64_t locks_cleaned() const { return locks_cleaned_; }

 private:
  uint64_t crash_cleanups_ = 0;
  uint64_t locks_cleaned_ = 0;
  nsm::NsmService* nsm_ = nullptr;
  nlm::NlmService* nlm_ = nullptr;
};

}  // namespace nlockd::server
