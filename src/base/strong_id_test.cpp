// SPDX-License-Identifier: Apache-2.0
#include "base/strong_id.hpp"

#include <string>
#include <type_traits>
#include <unordered_set>

#include <gtest/gtest.h>

namespace nlockd {
namespace {

using FileKey = StrongId<struct FileKeyTag, std::string>;
using OwnerKey = StrongId<struct OwnerKeyTag, std::string>;

TEST(StrongId, DistinctTagsDoNotConvert) {
  static_assert(!std::is_convertible_v<FileKey, OwnerKey>);
  static_assert(!std::is_convertible_v<std::string, FileKey>);
}

TEST(StrongId, ComparesAndHashesByValue) {
  FileKey a("fh1"), b("fh1"), c("fh2");
  EXPECT_EQ(a, b);
  EXPECT_LT(a, c);
  std::unordered_set<FileKey> set{a, b, c};
  EXPECT_EQ(set.size(), 2u);
}

}  // namespace
}  // namespace nlockd
