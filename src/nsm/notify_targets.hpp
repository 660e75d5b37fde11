// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "nsm/registry.hpp"

// Whom a restart notification round announces the new state to.
namespace nlockd::nsm {

// A host to notify. address: an IP literal, or empty to resolve mon_name (asynchronously, within
// the attempt's deadline).
struct NotifyTarget {
  std::string mon_name;
  std::string address;

  friend bool operator==(const NotifyTarget&, const NotifyTarget&) = default;
};

// The hosts to notify at start-up: every host still owed from an earlier run (its row's address
// kept) and every monitored host (`monitored`, e.g. the registrations' mon_names), one per
// mon_name compared case-insensitively; an entry with an address wins over one without.
std::vector<NotifyTarget> MergeTargets(std::vector<NotifyTarget> owed,
                                       std::vector<NotifyTarget> monitored);
// Every distinct monitored host (only the one named `only`, compared case-insensitively), with
// an address it is known by when it has one.
std::vector<NotifyTarget> MonitoredTargets(const Registry& registry,
                                           const std::optional<std::string>& only = std::nullopt);
// Store rows recording `targets` as owed a notification before its state is announced: state 0,
// which the round that announces one replaces. Written before a bump, so that a restart after
// it on the same boot still owes the round (Core::RecordRoundAsOwed, SM_SIMU_CRASH).
std::vector<store::NotifyOwed> UnannouncedOwedRows(std::vector<NotifyTarget> targets);

}  // namespace nlockd::nsm
