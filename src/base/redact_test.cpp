// SPDX-License-Identifier: Apache-2.0
#include "base/redact.hpp"

#include <gtest/gtest.h>

namespace nlockd {
namespace {

TEST(RedactStoreUri, HidesTheUserinfoPassword) {
  EXPECT_EQ(RedactStoreUri("postgresql://nlockd:s3cret@db.example/nlockd"),
            "postgresql://nlockd:REDACTED@db.example/nlockd");
  EXPECT_EQ(RedactStoreUri("postgres://u:p@ss@[::1]:5432/db?sslmode=require"),
            "postgres://u:REDACTED@[::1]:5432/db?sslmode=require");
  EXPECT_EQ(RedactStoreUri("postgresql://db/nlockd?user=u&password=x&sslmode=require"),
            "postgresql://db/nlockd?user=u&password=REDACTED&sslmode=require");
  EXPECT_EQ(RedactStoreUri("host=db password='a b' user=u"), "host=db password=REDACTED user=u");
}

TEST(RedactStoreUri, LeavesUrisWithoutPasswordsAlone) {
  EXPECT_EQ(RedactStoreUri("postgresql://nlockd@db/nlockd"), "postgresql://nlockd@db/nlockd");
  EXPECT_EQ(RedactStoreUri("postgresql://db:5432/nlockd"), "postgresql://db:5432/nlockd");
  EXPECT_EQ(RedactStoreUri("sqlite:/var/lib/nlockd/nlockd.db"), "sqlite:/var/lib/nlockd/nlockd.db");
  EXPECT_EQ(RedactStoreUri("memory:"), "memory:");
  EXPECT_EQ(RedactSecret(""), "");
  EXPECT_EQ(RedactSecret("token"), "REDACTED");
}

TEST(RedactPasswordOf, HidesThePasswordWhereverItAppears) {
  EXPECT_EQ(RedactPasswordOf("postgresql://u:hunter2@db/x",
                             "connection to db failed: password hunter2 rejected (hunter2)"),
            "connection to db failed: password REDACTED rejected (REDACTED)");
  EXPECT_EQ(RedactPasswordOf("postgresql://u@db/x", "user u failed"), "user u failed");
}

}  // namespace
}  // namespace nlockd
