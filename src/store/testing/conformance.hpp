// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "store/store.hpp"
#include "store/testing/store_test_util.hpp"

namespace nlockd::store::testutil {

// The fixture of the Store conformance suite (store_conformance_test.cpp). Each backend's test
// file instantiates it: INSTANTIATE_TEST_SUITE_P(Sqlite, StoreConformance, ...).
class StoreConformance : public ::testing::TestWithParam<BackendParam> {
 protected:
  void SetUp() override;
  void TearDown() override { store_.reset(); }

  // Closes the store (uncleanly: no MarkCleanShutdown) and opens it again, on boot `boot_id`.
  void Reopen(const std::string& boot_id);

  void Put(const Registration& registration);
  void Apply(std::vector<LockChange> changes);
  LoadedState Load() { return store_->LoadAll(); }
  std::string DumpStore() { return Dump(store_->LoadAll()); }

  FakeWallClock clock_;
  StoreOptions options_;
  std::unique_ptr<TestBackend> backend_;
  std::unique_ptr<Store> store_;
};

// The same fixture for the suite that only persistent backends pass (restarts).
class PersistentStore : public StoreConformance {};

}  // namespace nlockd::store::testutil
