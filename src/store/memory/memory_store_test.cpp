// SPDX-License-Identifier: Apache-2.0
#include "store/memory/memory_store.hpp"

#include <gtest/gtest.h>

#include "base/error.hpp"
#include "store/testing/conformance.hpp"

namespace nlockd::store {
namespace testutil {
INSTANTIATE_TEST_SUITE_P(Memory, StoreConformance,
                         ::testing::Values(BackendParam{"Memory", MakeMemoryBackend, false}),
                         BackendName);
}  // namespace testutil

namespace {

TEST(MemoryStore, RunsDoneBeforeTheWriteReturns) {
  MemoryStore store(StoreOptions{});
  bool done = false;
  store.PutRegistration(testutil::MakeRegistration("a", "lockd"),
                        [&](std::exception_ptr error) { done = !error; });
  EXPECT_TRUE(done);
}

TEST(MemoryStore, IsNotPersistentSoTheLockTableIsNeverComplete) {
  StoreOptions options;
  options.boot_id = "b";
  MemoryStore store(options);
  EXPECT_FALSE(store.startup().persistent);
  EXPECT_FALSE(store.startup().lock_table_complete);
  EXPECT_EQ(store.startup().boot_id, "b");
}

TEST(MemoryStore, RefusesAnInvalidNodeId) {
  StoreOptions options;
  options.node_id = "has space";
  EXPECT_THROW(MemoryStore{options}, Error);
  options.node_id = "";
  EXPECT_THROW(MemoryStore{options}, Error);
}

}  // namespace
}  // namespace nlockd::store
