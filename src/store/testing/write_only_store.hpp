// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <vector>

#include "store/store.hpp"

namespace nlockd::store::testutil {

// A Store with nothing to read, for tests of code that only writes to it: derive from it and
// implement Submit.
class WriteOnlyStore : public Store {
 public:
  const StartupInfo& startup() const override { return startup_; }
  LoadedState LoadAll() override { return {}; }
  StoreCounts Counts() override { return {}; }
  std::vector<StateChange> StateHistory() override { return {}; }

 private:
  StartupInfo startup_;
};

}  // namespace nlockd::store::testutil
