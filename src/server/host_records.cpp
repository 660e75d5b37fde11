#include "server/host_records.hpp"

#include <spdlog/spdlog.h>

namespace nlockd::server {

asio::awaitable<bool> HostRecords::Monitor(nlm::MonitorRequest request) {
  auto it = records_.find(request.host);
  if (it == records_.end() && records_.size() >= limit_) {
    spdlog::warn("monitor limit {} reached; not monitoring host={}", limit_, request.host);
    co_return false;
  }
  Record& record = records_[request.host];
  record.caller_name = request.caller_name;
  record.address = request.address;
  record.nsm_state = request.nsm_state;
  record.since = std::chrono::system_clock::now();
  spdlog::info("monitoring host={} caller={} nsm_state={}", request.host, request.caller_name,
               request.nsm_state);
  co_return true;
}

}  // namespace nlockd::server
