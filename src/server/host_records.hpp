#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <unordered_map>

#include "nlm/host_monitor.hpp"

namespace nlockd::server {

// The in-process status monitor NLM uses until the NSM service takes over: it records each
// monitored host (address, caller_name, its NSM state, since when) in memory, so the admin
// API can list them and a host's reboot can be matched. Not durable: with it a restart
// forgets which hosts to notify. Runs on the server's executor.
class HostRecords : public nlm::HostMonitor {
 public:
  struct Record {
    std::string caller_name;
    asio::ip::address address;
    int32_t nsm_state = 0;
    std::chrono::system_clock::time_point since;
  };

  // `limit` bounds the hosts recorded (DESIGN.md: 10,000 registrations by default); past it
  // monitoring fails and NLM answers DENIED_NOLOCKS.
  explicit HostRecords(size_t limit) : limit_(limit) {}

  asio::awaitable<bool> Monitor(nlm::MonitorRequest request) override;
  const std::unordered_map<std::string, Record>& records() const { return records_; }

 private:
  size_t limit_;
  std::unordered_map<std::string, Record> records_;
};

}  // namespace nlockd::server
