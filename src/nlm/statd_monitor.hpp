// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include <asio/awaitable.hpp>

#include "nlm/host_monitor.hpp"
#include "rpc/client.hpp"

namespace nlockd::nlm {

struct StatdMonitorOptions {
  // This host's name as the status monitor records it (SM_MON's my_id.my_name).
  std::string my_name;
  // Where the system's status monitor is found: its local rpcbind.
  std::string rpcbind_host = "127.0.0.1";
  uint16_t rpcbind_port = 111;
  // Each SM_MON's deadline, the rpcbind lookup included.
  std::chrono::milliseconds deadline{5000};
};

// Monitors client hosts through the system's status monitor (rpc.statd), for a process that
// serves NLM only, as NFS-Ganesha does: SM_MON over loopback to the statd that the local
// rpcbind names, with my_id = (my_name, NLM 100021, version 4, procedure 16) and mon_name = the
// host key NLM uses, so that statd's status callback (NLM procedure 16) names the host to
// release. priv carries the host's address (IPv4 in the first four bytes, IPv6 in all 16), as
// Linux lockd's does. Then `local` records the host too (durably), so that the restart
// notification round reaches it. Runs on the client's executor; `client` and `local` must
// outlive it.
class StatdMonitor final : public HostMonitor {
 public:
  StatdMonitor(rpc::Client& client, HostMonitor& local, StatdMonitorOptions options)
      : client_(client), local_(local), options_(std::move(options)) {}

  // False when statd cannot be reached or refuses (stat_fail); NLM then answers
  // DENIED_NOLOCKS, as Linux lockd does when its SM_MON fails.
  asio::awaitable<bool> Monitor(MonitorRequest request) override;

  uint64_t failures() const { return failures_; }

 private:
  rpc::Client& client_;
  HostMonitor& local_;
  StatdMonitorOptions options_;
  uint64_t failures_ = 0;
};

// The SM_MON arguments (sm_inter.x `mon`): mon_name, my_id (my_name, my_prog, my_vers,
// my_proc), priv[16].
std::vector<uint8_t> EncodeSmMon(const std::string& mon_name, const std::string& my_name,
                                 const asio::ip::address& address);

}  // namespace nlockd::nlm
