// SPDX-License-Identifier: Apache-2.0
#include "store/run_record.hpp"

#include <fstream>

#include <fmt/format.h>

#include "base/error.hpp"

namespace nlockd::store {
namespace {

constexpr size_t kMaxNodeIdLength = 128;

bool IsNodeIdChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == ':' || c == '@' || c == '-';
}

}  // namespace

RunStart BeginRun(const std::optional<RunRecord>& previous, const std::string& boot_id,
                  const std::string& storage_epoch, bool keeps_lock_table) {
  RunStart start;
  start.info.persistent = true;
  start.info.boot_id = boot_id;
  start.record.boot_id = boot_id;
  start.record.storage_epoch = storage_epoch;
  start.record.clean_shutdown = false;
  if (!previous) {
    start.info.first_run = true;
    start.info.lock_table_complete = true;  // a new store held nothing
    start.record.locks_complete = keeps_lock_table;
    return start;
  }
  // Committed-class writes survive unless the one holding them lost its caches: for a local file
  // the kernel (a new boot), for a database server (a storage epoch) that server alone. A crash
  // of the host that ran nlockd loses nothing the database server committed, which is what
  // lets another node of an HA pair take over after kill -9 with the fine-grained grace.
  const bool nothing_lost = storage_epoch.empty() ? !boot_id.empty() && previous->boot_id == boot_id
                                                  : previous->storage_epoch == storage_epoch;
  const bool complete = previous->locks_complete && (previous->clean_shutdown || nothing_lost);
  start.info.previous_run_clean = previous->clean_shutdown;
  start.info.previous_boot_id = previous->boot_id;
  start.info.state_boot_id = previous->state_boot_id;
  start.info.state = previous->state;
  start.info.lock_table_complete = complete;
  start.record.state = previous->state;
  start.record.locks_complete = complete && keeps_lock_table;
  return start;
}

std::string ReadBootId(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) {
    return "";
  }
  return line;
}

std::string CurrentBootId(const StoreOptions& options) {
  return options.boot_id.empty() ? ReadBootId(kBootIdPath) : options.boot_id;
}

void ValidateOptions(const StoreOptions& options) {
  const std::string& node = options.node_id;
  bool node_ok = !node.empty() && node.size() <= kMaxNodeIdLength;
  for (char c : node) {
    node_ok = node_ok && IsNodeIdChar(c);
  }
  if (!node_ok) {
    throw Error(ErrorKind::kFailed,
                fmt::format("invalid store node id '{}': want 1..{} characters of "
                            "[A-Za-z0-9._:@-]",
                            node, kMaxNodeIdLength));
  }
  if (options.max_batch == 0 || options.max_queued == 0 || options.pg_pool_size == 0) {
    throw Error(ErrorKind::kFailed,
                "store options: max_batch, max_queued and pg_pool_size must be positive");
  }
}

std::chrono::system_clock::time_point WallNow(const StoreOptions& options) {
  const auto now = options.wall_clock ? options.wall_clock() : std::chrono::system_clock::now();
  return std::chrono::time_point_cast<std::chrono::microseconds>(now);
}

}  // namespace nlockd::store
