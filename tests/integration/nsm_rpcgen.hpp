// SPDX-License-Identifier: Apache-2.0
#pragma once

// NSM (program 100024 version 1) through the stubs rpcgen generates from the system's
// rpcsvc/sm_inter.x (with SM_NULL and SM_NOTIFY added; tests/integration/rpcgen): a client
// nobody here wrote, reduced to values a test compares.

#include <array>
#include <cstdint>
#include <optional>
#include <string>

struct __rpc_client;  // libtirpc's CLIENT

namespace nlockd::integration {

struct NsmMyId {
  std::string my_name = "localhost";
  int32_t my_prog = 100021;
  int32_t my_vers = 4;
  int32_t my_proc = 16;
};

struct NsmStatRes {
  bool succeeded = false;  // res_stat == stat_succ
  int32_t state = 0;
};

class NsmRpcgenClient {
 public:
  // To `host` at `port` (0: ask the host's rpcbind, as clnt_create does).
  NsmRpcgenClient(const std::string& host, uint16_t port, bool tcp);
  ~NsmRpcgenClient();
  NsmRpcgenClient(const NsmRpcgenClient&) = delete;
  NsmRpcgenClient& operator=(const NsmRpcgenClient&) = delete;

  bool connected() const { return client_ != nullptr; }
  const std::string& error() const { return error_; }

  // nullopt when no reply came (error() says why).
  bool Null();
  std::optional<NsmStatRes> Stat(const std::string& mon_name);
  std::optional<NsmStatRes> Mon(const std::string& mon_name, const NsmMyId& id,
                                std::array<uint8_t, 16> priv = {});
  std::optional<int32_t> Unmon(const std::string& mon_name, const NsmMyId& id);
  std::optional<int32_t> UnmonAll(const NsmMyId& id);
  bool SimuCrash();
  bool Notify(const std::string& mon_name, int32_t state);

 private:
  void Failed(const char* what);

  __rpc_client* client_ = nullptr;
  std::string error_;
};

}  // namespace nlockd::integration
