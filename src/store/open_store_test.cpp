// SPDX-License-Identifier: Apache-2.0
#include "store/open_store.hpp"

#include <filesystem>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/error.hpp"
#include "testutil/temp_dir.hpp"

namespace nlockd::store {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

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
