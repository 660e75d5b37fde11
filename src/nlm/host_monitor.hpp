// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <string>

#include <asio/awaitable.hpp>
#include <asio/ip/address.hpp>

namespace nlockd::nlm {

// A host that NLM asks the status monitor to watch (an in-process SM_MON).
struct MonitorRequest {
  std::string host;         // The name to monitor: the address, or the caller_name.
  std::string caller_name;  // Its caller_name, as a label.
  asio::ip::address address;
  int32_t nsm_state = 0;  // lockargs.state: the client's NSM state.
};

// The status monitor as NLM sees it; server/ wires it to nsm/. A host is monitored before it
// is granted its first lock, so that its reboot releases its locks.
class HostMonitor {
 public:
  virtual ~HostMonitor() = default;
  // Returns once the monitor registration is durable; false if it could not be made (NLM then
  // answers DENIED_NOLOCKS, as Linux lockd does when SM_MON fails).
  virtual asio::awaitable<bool> Monitor(MonitorRequest request) = 0;
};

}  // namespace nlockd::nlm
