// SPDX-License-Identifier: Apache-2.0
#include "integration/nsm_rpcgen.hpp"

#include <cstring>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <rpc/rpc.h>

#include "sm_inter_test.h"

namespace nlockd::integration {

namespace {

constexpr timeval kTimeout{10, 0};

my_id ToWire(const NsmMyId& id) {
  my_id out{};
  out.my_name = const_cast<char*>(id.my_name.c_str());
  out.my_prog = id.my_prog;
  out.my_vers = id.my_vers;
  out.my_proc = id.my_proc;
  return out;
}

}  // namespace

NsmRpcgenClient::NsmRpcgenClient(const std::string& host, uint16_t port, bool tcp) {
  if (port == 0) {
    client_ = clnt_create(host.c_str(), SM_PROG, SM_VERS, tcp ? "tcp" : "udp");
  } else {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    inet_pton(AF_INET, host.c_str(), &address.sin_addr);
    int sock = RPC_ANYSOCK;
    if (tcp) {
      client_ = clnttcp_create(&address, SM_PROG, SM_VERS, &sock, 0, 0);
    } else {
      timeval retry{0, 200000};
      client_ = clntudp_create(&address, SM_PROG, SM_VERS, retry, &sock);
    }
  }
  if (!client_) {
    error_ = clnt_spcreateerror(host.c_str());
    return;
  }
  timeval timeout = kTimeout;
  clnt_control(client_, CLSET_TIMEOUT, reinterpret_cast<char*>(&timeout));
}

NsmRpcgenClient::~NsmRpcgenClient() {
  if (client_) clnt_destroy(client_);
}

void NsmRpcgenClient::Failed(const char* what) { error_ = clnt_sperror(client_, what); }

bool NsmRpcgenClient::Null() {
  if (sm_null_1(nullptr, client_) == nullptr) {
    Failed("SM_NULL");
    return false;
  }
  return true;
}

std::optional<NsmStatRes> NsmRpcgenClient::Stat(const std::string& mon_name) {
  sm_name args{const_cast<char*>(mon_name.c_str())};
  sm_stat_res* res = sm_stat_1(&args, client_);
  if (!res) {
    Failed("SM_STAT");
    return std::nullopt;
  }
  return NsmStatRes{res->res_stat == stat_succ, res->state};
}

std::optional<NsmStatRes> NsmRpcgenClient::Mon(const std::string& mon_name, const NsmMyId& id,
                                               std::array<uint8_t, 16> priv) {
  mon args{};
  args.mon_id.mon_name = const_cast<char*>(mon_name.c_str());
  args.mon_id.my_id = ToWire(id);
  std::memcpy(args.priv, priv.data(), priv.size());
  sm_stat_res* res = sm_mon_1(&args, client_);
  if (!res) {
    Failed("SM_MON");
    return std::nullopt;
  }
  return NsmStatRes{res->res_stat == stat_succ, res->state};
}

std::optional<int32_t> NsmRpcgenClient::Unmon(const std::string& mon_name, const NsmMyId& id) {
  mon_id args{};
  args.mon_name = const_cast<char*>(mon_name.c_str());
  args.my_id = ToWire(id);
  sm_stat* res = sm_unmon_1(&args, client_);
  if (!res) {
    Failed("SM_UNMON");
    return std::nullopt;
  }
  return res->state;
}

std::optional<int32_t> NsmRpcgenClient::UnmonAll(const NsmMyId& id) {
  my_id args = ToWire(id);
  sm_stat* res = sm_unmon_all_1(&args, client_);
  if (!res) {
    Failed("SM_UNMON_ALL");
    return std::nullopt;
  }
  return res->state;
}

bool NsmRpcgenClient::SimuCrash() {
  if (sm_simu_crash_1(nullptr, client_) == nullptr) {
    Failed("SM_SIMU_CRASH");
    return false;
  }
  return true;
}

bool NsmRpcgenClient::Notify(const std::string& mon_name, int32_t state) {
  stat_chge args{const_cast<char*>(mon_name.c_str()), state};
  if (sm_notify_1(&args, client_) == nullptr) {
    Failed("SM_NOTIFY");
    return false;
  }
  return true;
}

}  // namespace nlockd::integration
