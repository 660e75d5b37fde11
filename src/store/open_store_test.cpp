// SPDX-License-Identifier: Apache-2.0
#include "store/open_store.hpp"

#include <filesystem>

#include <dlfcn.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "base/error.hpp"
#include "testutil/temp_dir.hpp"

namespace nlockd::store {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

// Whether libpq is mapped into this process (RTLD_NOLOAD: looked up, never loaded).
bool LibpqLoaded() {
  void* library = dlopen("libpq.so.5", RTLD_NOW | RTLD_NOLOAD);
  if (library == nullptr) return false;
  dlclose(library);  // the lookup took a reference
  return true;
}

Error OpenError(const std::string& uri, StoreOptions options = {}) {
  try {
    OpenStore(uri, options);
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "opening " << uri << " succeeded";
  return Error(ErrorKind::kFailed, "");
}

TEST(OpenStore, MemoryIsNotPersistent) {
  EXPECT_FALSE(OpenStore("memory:", {})->startup().persistent);
}

TEST(OpenStore, SqliteTakesThePathAfterTheScheme) {
  nlockd::testutil::TempDir dir("open-store");
  const std::string path = dir.path() + "/var/nlockd.db";
  EXPECT_TRUE(OpenStore("sqlite:" + path, {})->startup().persistent);
  EXPECT_TRUE(std::filesystem::exists(path));
}

// libpq and its twenty libraries are loaded only for a PostgreSQL store (postgres/libpq.hpp).
// In a fresh process (the other tests here open PostgreSQL stores): re-executed, not forked.
TEST(OpenStore, SqliteAndMemoryStoresLeaveLibpqUnloaded) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  nlockd::testutil::TempDir dir("open-store");
  const std::string uri = "sqlite:" + dir.path() + "/nlockd.db";
  EXPECT_EXIT(
      {
        OpenStore("memory:", {});
        OpenStore(uri, {});
        _exit(LibpqLoaded() ? 1 : 0);
      },
      ::testing::ExitedWithCode(0), "");
}

// A first start: neither the directory nor the file exists when the caller takes the lock, and
// the store adopts that lock.
TEST(OpenStore, ASqliteStoreLockedFirstCreatesItsDirectoryAndIsAdopted) {
  testutil::TempDir dir;
  const std::string path = dir.path() + "/var/lib/nlockd/nlockd.db";
  StoreOptions options;
  options.sqlite_lock = std::make_shared<SqliteStoreLock>(path);
  auto store = OpenStore("sqlite:" + path, options);
  EXPECT_TRUE(store->startup().persistent);
  EXPECT_THROW(SqliteStoreLock{path}, Error) << "held by the store";
  store.reset();
  SqliteStoreLock again(path);  // released with the store
}

TEST(OpenStore, AnUnknownSchemeIsAClearError) {
  const Error e = OpenError("mysql://root:secret@db/x");
  EXPECT_EQ(e.kind(), ErrorKind::kFailed);
  EXPECT_THAT(e.what(),
              AllOf(HasSubstr("unknown store URI scheme 'mysql:'"), Not(HasSubstr("secret"))));
  EXPECT_THAT(OpenError("sqlite:").what(), HasSubstr("empty database path"));
}

TEST(OpenStore, AnUnreachablePostgresIsAClearErrorAtOpen) {
  // Port 1 on loopback: nothing listens there, so the connection is refused at once.
  const Error e = OpenError("postgresql://nlockd:secret@127.0.0.1:1/nlockd");
  EXPECT_EQ(e.kind(), ErrorKind::kDisconnected);
  EXPECT_THAT(e.what(), AllOf(HasSubstr("cannot connect to PostgreSQL"), HasSubstr("127.0.0.1"),
                              HasSubstr("port=1"), Not(HasSubstr("secret"))));
  EXPECT_EQ(OpenError("postgres://127.0.0.1:1/nlockd").kind(), ErrorKind::kDisconnected);
  // Loaded at run time: this binary does not link it.
  EXPECT_TRUE(LibpqLoaded());
}

TEST(OpenStore, AMalformedPostgresUriIsAClearError) {
  const Error e = OpenError("postgresql://127.0.0.1:notaport/nlockd?bogus_option=1");
  EXPECT_THAT(e.what(), HasSubstr("PostgreSQL"));
}

TEST(OpenStore, AnInvalidNodeIdIsRefusedByEveryBackend) {
  StoreOptions options;
  options.node_id = "no spaces";
  EXPECT_THAT(OpenError("memory:", options).what(), HasSubstr("invalid store node id"));
  EXPECT_THAT(OpenError("postgresql://127.0.0.1:1/x", options).what(),
              HasSubstr("invalid store node id"));
}

}  // namespace
}  // namespace nlockd::store
