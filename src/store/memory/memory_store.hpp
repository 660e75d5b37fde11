// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "store/store.hpp"
#include "store/store_options.hpp"

namespace nlockd::store {

// A Store in process memory, for unit tests: nothing survives it, so startup() reports a
// non-persistent first run. Thread-safe (one mutex); every Done runs on the calling thread
// before the write method returns.
class MemoryStore final : public Store {
 public:
  // Throws nlockd::Error(kFailed) on invalid options.
  explicit MemoryStore(StoreOptions options);

  const StartupInfo& startup() const override { return startup_; }
  LoadedState LoadAll() override;
  StoreCounts Counts() override;
  std::vector<StateChange> StateHistory() override;

 protected:
  void Submit(WriteOp op, Done done) override;

 private:
  using RegistrationKey = std::tuple<std::string, std::string, int32_t, int32_t, int32_t>;
  using LockKey = std::tuple<std::string, std::string, int32_t, std::string, uint64_t>;
  using ShareKey = std::tuple<std::string, std::string, std::string>;

  struct Applier;

  const StoreOptions options_;
  StartupInfo startup_;

  std::mutex mu_;  // guards everything below
  int32_t state_ = 0;
  std::vector<StateChange> history_;
  std::map<RegistrationKey, Registration> registrations_;
  std::map<LockKey, LockRecord> locks_;
  std::map<ShareKey, ShareRecord> shares_;
  std::map<std::string, NotifyOwed> notify_owed_;
};

}  // namespace nlockd::store
