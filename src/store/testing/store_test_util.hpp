// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>

#include <gtest/gtest.h>

#include "store/store.hpp"
#include "store/store_options.hpp"

namespace nlockd::store::testutil {

// Starts a write with its Done and blocks until it has run; rethrows its failure.
void Sync(const std::function<void(Done)>& start);

// A wall clock for StoreOptions::wall_clock that tests move by hand. Thread-safe.
class FakeWallClock {
 public:
  std::chrono::system_clock::time_point Now() const {
    return std::chrono::system_clock::time_point(std::chrono::microseconds(micros_.load()));
  }
  void Set(int64_t micros) { micros_ = micros; }
  std::function<std::chrono::system_clock::time_point()> AsFunction() {
    return [this] { return Now(); };
  }

 private:
  std::atomic<int64_t> micros_{1'700'000'000'000'000};
};

// NLOCKD_TEST_PG_URI (set by scripts/with-postgres.sh), if set.
std::optional<std::string> PgTestUri();
// A node id no other test (or test run) uses, so that tests can share one database.
std::string UniqueNodeId(const std::string& prefix);
// A URI of the test database whose tables live in a new, empty schema (search_path), for tests
// that need a database of their own (schema versions, migrations).
// REQUIRES: PgTestUri() is set.
std::string FreshPgSchemaUri(const std::string& prefix);
// Runs SQL on the test database through the given URI; throws on failure.
void PgExec(const std::string& uri, const std::string& sql);

// Where a store of one backend lives during a test: every Open() sees the same data (except the
// memory backend, whose Open() starts empty), under the backend's own unique node id unless
// the options name another node.
class TestBackend {
 public:
  virtual ~TestBackend() = default;
  virtual std::unique_ptr<Store> Open(StoreOptions options) = 0;
  virtual bool persistent() const = 0;
  // A database server keeps the data, not the host that runs nlockd: a crash of that host (a
  // new boot id) loses no committed write.
  virtual bool on_database_server() const { return false; }
  // The URI OpenStore() takes for this backend.
  virtual std::string uri() const = 0;
  const std::string& node() const { return node_; }

 protected:
  std::string node_ = UniqueNodeId("t");
};

std::unique_ptr<TestBackend> MakeMemoryBackend();
std::unique_ptr<TestBackend> MakeSqliteBackend();
// SQLite whose start-up reads split the lock scan over two connections, whatever the file's size.
std::unique_ptr<TestBackend> MakeSqliteSplitScanBackend();
std::unique_ptr<TestBackend> MakeLoggedSqliteBackend();
// REQUIRES: PgTestUri() is set.
std::unique_ptr<TestBackend> MakePgBackend();

// The parameter of the backend-parameterized suites.
struct BackendParam {
  std::string name;
  std::function<std::unique_ptr<TestBackend>()> make;
  bool needs_pg = false;
};
inline void PrintTo(const BackendParam& param, std::ostream* os) { *os << param.name; }
inline std::string BackendName(const ::testing::TestParamInfo<BackendParam>& info) {
  return info.param.name;
}

// Renders a LoadedState as sorted lines (leveldb's PrintContents), so that tests compare the
// whole store with one literal. Bytes outside printable ASCII print as \xNN.
std::string Dump(const LoadedState& state);
std::string Printable(const std::string& bytes);

Registration MakeRegistration(const std::string& mon_name, const std::string& my_name,
                              int32_t proc = 16, uint8_t priv_fill = 0);
LockRecord MakeLock(const std::string& file, const std::string& host, int32_t svid, uint64_t offset,
                    uint64_t length, bool exclusive = true);
ShareRecord MakeShare(const std::string& file, const std::string& host, int32_t mode,
                      int32_t access);

}  // namespace nlockd::store::testutil
