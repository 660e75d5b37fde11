// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include <asio/awaitable.hpp>

#include "store/records.hpp"

namespace nlockd::nsm {

// The registration nlockd's own NLM makes for each client host it monitors (an in-process
// SM_MON). Its status callback is a direct call, never an RPC. Program 0 is not a valid
// callback program, so no external registrant can hold this my_id: SM_MON, SM_UNMON and
// SM_UNMON_ALL naming it are refused.
inline store::MyId LocalNlmId() { return store::MyId{"nlockd-nlm", 0, 0, 0}; }
inline bool IsLocalNlmId(const store::MyId& id) { return id == LocalNlmId(); }

// Where the status callback of nlockd's own NLM goes; server/ implements it with
// NlmService::HostRebooted. Called on the NSM executor.
class LocalStatusReceiver {
 public:
  virtual ~LocalStatusReceiver() = default;
  // The host nlockd's NLM monitors as `mon_name` rebooted and is now at `state`.
  virtual void HostRebooted(const std::string& mon_name, int32_t state) = 0;
};

// The `status` body of a callback (sm_inter.x `status`; the wire type stays in nsm/wire).
struct StatusCallback {
  std::string mon_name;
  int32_t state = 0;
  std::array<uint8_t, 16> priv{};
};

// How status callbacks reach external registrants (an RPC to my_prog/my_vers/my_proc on
// loopback); tests substitute a fake.
class StatusCaller {
 public:
  virtual ~StatusCaller() = default;
  // Returns whether the registrant answered. Ends within its own deadline.
  virtual asio::awaitable<bool> Call(store::MyId target, StatusCallback body) = 0;
};

// The events rpc.statd reports to its --ha-callout program (clustered NFS servers follow the
// monitor list through them); server/ runs the program. Called on the NSM executor; must not
// block.
class MonitorEvents {
 public:
  virtual ~MonitorEvents() = default;
  // SM_MON made a registration, or changed its cookie (not for an identical repeat).
  virtual void ClientAdded(const std::string& mon_name, const std::string& my_name) = 0;
  // SM_UNMON removed a registration; SM_UNMON_ALL, once per registration it removed (my_name as
  // the request gives it).
  virtual void ClientRemoved(const std::string& mon_name, const std::string& my_name) = 0;
  // An SM_NOTIFY came from `address` (numeric), whether or not it names a monitored host.
  virtual void NotifyReceived(const std::string& mon_name, const std::string& address,
                              int32_t state) = 0;
};

// What SM_SIMU_CRASH (and start-up) asks of server/: announce the new state to every monitored
// host (the Notifier's round). Called on the NSM executor after the new state is durable.
class RestartHook {
 public:
  virtual ~RestartHook() = default;
  virtual void Restarted(int32_t state) = 0;
  // Before SM_SIMU_CRASH moves the state to `next_state`, on a worker thread; throwing stops
  // the bump (SM_SIMU_CRASH then fails).
  virtual void BeforeStateBump(int32_t /*next_state*/) {}
};

}  // namespace nlockd::nsm
