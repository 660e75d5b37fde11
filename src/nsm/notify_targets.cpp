// SPDX-License-Identifier: Apache-2.0
#include "nsm/notify_targets.hpp"

#include <unordered_map>

#include "base/host_name.hpp"

namespace nlockd::nsm {

std::vector<NotifyTarget> MergeTargets(std::vector<NotifyTarget> owed,
                                       std::vector<NotifyTarget> monitored) {
  std::vector<NotifyTarget> merged;
  std::unordered_map<std::string, size_t> index;  // lower-cased mon_name -> position in merged
  merged.reserve(owed.size() + monitored.size());
  for (auto* list : {&owed, &monitored}) {
    for (NotifyTarget& target : *list) {
      if (target.mon_name.empty()) continue;
      auto [it, inserted] = index.emplace(FoldHostName(target.mon_name), merged.size());
      if (inserted) {
        merged.push_back(std::move(target));
      } else if (merged[it->second].address.empty()) {
        merged[it->second].address = std::move(target.address);
      }
    }
  }
  return merged;
}

std::vector<NotifyTarget> MonitoredTargets(const Registry& registry,
                                           const std::optional<std::string>& only) {
  std::vector<NotifyTarget> targets;
  for (const Registry::Peer& peer : registry.Peers()) {
    if (only && FoldName(peer.name) != FoldName(*only)) continue;
    // An address the host is known by saves a name lookup; a name-only host is resolved.
    std::string address = peer.addresses.empty() ? std::string() : *peer.addresses.begin();
    targets.push_back({peer.name, std::move(address)});
  }
  return targets;
}

std::vector<store::NotifyOwed> UnannouncedOwedRows(std::vector<NotifyTarget> targets) {
  std::vector<store::NotifyOwed> rows;
  rows.reserve(targets.size());
  for (NotifyTarget& target : targets) {
    rows.push_back({std::move(target.mon_name), std::move(target.address), 0, 0});
  }
  return rows;
}

}  // namespace nlockd::nsm
