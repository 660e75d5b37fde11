// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <string>

#include "bench/load/load_generator.hpp"

namespace nlockd::bench {

// NSM SM_MON calls that must all answer stat_succ (each a durable registration write).
// `distinct` > 0: every lane cycles through that many mon_names of its own (after the first
// round each call updates an existing registration, so the count stays put); 0: every call
// registers a new mon_name. `run` keeps runs against one server apart.
class SmMonWorkload : public Workload {
 public:
  SmMonWorkload(uint64_t run, uint64_t distinct) : run_(run), distinct_(distinct) {}
  std::string name() const override { return distinct_ ? "SM_MON update" : "SM_MON new"; }
  CallSpec Next(size_t connection, size_t lane, uint64_t seq) override;
  bool Check(const CallSpec& call, std::span<const uint8_t> result) override;

 private:
  uint64_t run_;
  uint64_t distinct_;
};

}  // namespace nlockd::bench
