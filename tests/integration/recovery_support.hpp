// SPDX-License-Identifier: Apache-2.0
#pragma once

// Shared by the restart-recovery tests: nlockd on a SQLite store in a temporary
// directory, restarted with kill -9 or a changed boot id, its admin API, its log, and the lock
// owners of the simulated client hosts of LoopbackPeers.

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "integration/loopback_peers.hpp"
#include "integration/nlockd_process.hpp"
#include "integration/nsm_rpcgen.hpp"
#include "integration/scoped_boot_id.hpp"
#include "testutil/temp_dir.hpp"

namespace nlockd::integration::recovery {

using nlohmann::json;
constexpr auto kWait = std::chrono::seconds(30);

using testutil::TempDir;

using integration::ScopedBootId;

// nlockd on 127.0.0.1 with a SQLite store, the peers' status monitors at `statd_port`, no
// rpcbind, and `extra` flags.
inline std::unique_ptr<NlockdProcess> StartNlockd(const std::string& store, uint16_t statd_port,
                                                  int grace_seconds,
                                                  const std::vector<std::string>& extra = {}) {
  std::vector<std::string> args{"--store",
                                store,
                                "--listen",
                                "127.0.0.1:0",
                                "--rpcbind-register=false",
                                "--name",
                                "server.test",
                                "--grace",
                                std::to_string(grace_seconds),
                                "--notify-statd-port",
                                std::to_string(statd_port)};
  args.insert(args.end(), extra.begin(), extra.end());
  return std::make_unique<NlockdProcess>(NLOCKD_BINARY, args);
}

// Kills nlockd as a crash would: no shutdown, no last writes.
inline void Crash(NlockdProcess& nlockd) {
  EXPECT_EQ(nlockd.process().Stop(SIGKILL, std::chrono::seconds(10)), 128 + SIGKILL);
}

// The groups of the first log line matching `pattern`, logged already or within `timeout`.
// For lines that one nlockd process logs once (start-up lines come before the listening line
// that NlockdProcess waited for, so waiting alone would miss them).
inline std::optional<std::vector<std::string>> WaitForLog(NlockdProcess& nlockd,
                                                          const std::regex& pattern,
                                                          std::chrono::milliseconds timeout) {
  auto groups = [](const std::smatch& match) {
    std::vector<std::string> out;
    for (const auto& group : match) out.push_back(group.str());
    return out;
  };
  const std::string output = nlockd.process().output();
  std::smatch match;
  if (std::regex_search(output, match, pattern)) return groups(match);
  auto later = nlockd.process().WaitForLine(pattern, timeout);
  if (!later) return std::nullopt;
  return groups(*later);
}

// The NSM state number nlockd answers SM_STAT with.
inline int32_t StateOf(const NlockdProcess& nlockd) {
  NsmRpcgenClient client("127.0.0.1", nlockd.port(), false);
  auto stat = client.Stat("server.test");
  EXPECT_TRUE(stat) << client.error();
  return stat ? stat->state : -1;
}

// An HTTP client of one nlockd's admin server.
class Admin {
 public:
  explicit Admin(const NlockdProcess& nlockd) : client_("127.0.0.1", nlockd.admin_port()) {
    client_.set_read_timeout(std::chrono::seconds(10));
  }
  // The JSON body of a 200 answer; null (with a test failure) otherwise.
  json Get(const std::string& path) { return Of(client_.Get(path), path); }
  json Post(const std::string& path) {
    return Of(client_.Post(path, "{}", "application/json"), path);
  }

  // Every held lock as "host file svid owner offset+length type awaiting", sorted: the lock
  // table as a value to compare across a restart.
  std::vector<std::string> LockTable() {
    std::vector<std::string> rows;
    for (size_t offset = 0;;) {
      json page = Get("/api/v1/locks?limit=1000&offset=" + std::to_string(offset));
      if (!page.is_object() || !page["locks"].is_array()) break;
      for (const json& lock : page["locks"]) {
        rows.push_back(lock["host"].get<std::string>() + " " + lock["file"].get<std::string>() +
                       " " + std::to_string(lock["svid"].get<int64_t>()) + " " +
                       lock["owner"].get<std::string>() + " " +
                       std::to_string(lock["offset"].get<uint64_t>()) + "+" +
                       std::to_string(lock["length"].get<uint64_t>()) +
                       (lock["exclusive"].get<bool>() ? " exclusive" : " shared") +
                       (lock["awaiting_reclaim"].get<bool>() ? " awaiting" : ""));
      }
      if (!page["next_offset"].is_number()) break;
      offset = page["next_offset"].get<size_t>();
    }
    std::sort(rows.begin(), rows.end());
    return rows;
  }

 private:
  static json Of(const httplib::Result& result, const std::string& path) {
    if (!result || result->status != 200) {
      ADD_FAILURE() << path << ": " << (result ? std::to_string(result->status) : "no answer")
                    << " " << (result ? result->body : "");
      return nullptr;
    }
    return json::parse(result->body, nullptr, false);
  }

  httplib::Client client_;
};

// The locks of simulated host `host` (LoopbackPeers numbering): an exclusive lock on a file of
// its own and a shared lock on a file that every host shares, so the restored table holds
// overlapping shared locks too.
inline std::vector<NlmLock> LocksOf(size_t host) {
  const std::string caller = "host" + std::to_string(host);
  const auto svid = static_cast<int32_t>(host + 1);
  const std::string oh = std::to_string(svid) + "@" + caller;
  return {NlmLock{caller, "file-" + std::to_string(host), oh, svid, 0, 100},
          NlmLock{caller, "common", oh, svid, 0, 50}};
}
inline bool IsExclusive(const NlmLock& lock) { return lock.fh != "common"; }

// Takes (or, with reclaim, reclaims) every lock of `host`; the statuses, one per lock.
inline std::string LockAll(size_t host, uint16_t port, bool reclaim, int32_t nsm_state = 1) {
  std::string out;
  for (const NlmLock& lock : LocksOf(host)) {
    NlmLockFlags flags{IsExclusive(lock), false, reclaim, nsm_state};
    out += (out.empty() ? "" : " ") +
           StatOf(LoopbackPeers::Lock(LoopbackPeers::Address(host), port, lock, flags));
  }
  return out;
}
inline constexpr const char* kAllGranted = "stat=granted stat=granted";

// A host that held nothing before the restart, and its requests.
inline constexpr size_t kNewcomer = 240;
inline NlmLock NewcomerLock(const std::string& fh, uint64_t offset = 0, uint64_t length = 10) {
  return NlmLock{"newcomer", fh, "1@newcomer", 1, offset, length};
}
inline std::string NewcomerLocks(uint16_t port, const NlmLock& lock, bool block = false) {
  return StatOf(LoopbackPeers::Lock(LoopbackPeers::Address(kNewcomer), port, lock,
                                    NlmLockFlags{true, block, false, 1}));
}

}  // namespace nlockd::integration::recovery
