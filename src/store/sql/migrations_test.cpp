// SPDX-License-Identifier: Apache-2.0
#include "store/sql/migrations.hpp"

#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/error.hpp"

namespace nlockd::store {
namespace {

using ::testing::HasSubstr;

const std::vector<Migration> kThree{{1, "one", "A"}, {2, "two", "B"}, {3, "three", "C"}};

std::vector<int64_t> Versions(const std::vector<const Migration*>& pending) {
  std::vector<int64_t> out;
  for (const Migration* m : pending) out.push_back(m->version);
  return out;
}

TEST(Migrations, ANewDatabaseGetsEveryStep) {
  EXPECT_EQ(Versions(PendingMigrations(0, kThree, "db")), (std::vector<int64_t>{1, 2, 3}));
}

TEST(Migrations, AnOlderDatabaseGetsTheStepsItLacks) {
  EXPECT_EQ(Versions(PendingMigrations(1, kThree, "db")), (std::vector<int64_t>{2, 3}));
  EXPECT_TRUE(PendingMigrations(3, kThree, "db").empty());
}

TEST(Migrations, ANewerDatabaseIsRefusedWithAClearMessage) {
  try {
    PendingMigrations(4, kThree, "SQLite database /x.db");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kFailed);
    EXPECT_THAT(e.what(), HasSubstr("SQLite database /x.db has schema version 4"));
    EXPECT_THAT(e.what(), HasSubstr("knows versions up to 3"));
  }
}

TEST(Migrations, StepsMustBeNumberedWithoutGaps) {
  const std::vector<Migration> gap{{1, "one", "A"}, {3, "three", "C"}};
  EXPECT_THROW(PendingMigrations(0, gap, "db"), Error);
}

TEST(Migrations, RenderingPicksEachDialectsTypes) {
  const Migration m{1, "t", "CREATE TABLE t (b {BYTES}, c {BYTES}) {WITHOUT_ROWID};"};
  EXPECT_EQ(RenderMigration(m, Dialect::kSqlite), "CREATE TABLE t (b BLOB, c BLOB) WITHOUT ROWID;");
  EXPECT_EQ(RenderMigration(m, Dialect::kPostgres), "CREATE TABLE t (b BYTEA, c BYTEA) ;");
}

TEST(Migrations, TheShippedSchemaIsNumberedAndRendersWithoutTokens) {
  ASSERT_FALSE(SchemaMigrations().empty());
  EXPECT_EQ(PendingMigrations(0, SchemaMigrations(), "db").size(), SchemaMigrations().size());
  for (const Migration& m : SchemaMigrations()) {
    for (Dialect d : {Dialect::kSqlite, Dialect::kPostgres}) {
      EXPECT_THAT(RenderMigration(m, d), ::testing::Not(HasSubstr("{")));
    }
  }
}

}  // namespace
}  // namespace nlockd::store
