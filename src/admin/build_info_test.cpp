// SPDX-License-Identifier: Apache-2.0
#include "admin/build_info.hpp"

#include <gtest/gtest.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include "nlockd_build_info.hpp"

namespace nlockd::admin {
namespace {

TEST(RegisterBuildInfo, ExportsVersionAndRevisionAsLabels) {
  prometheus::Registry registry;
  RegisterBuildInfo(registry);
  std::string text = prometheus::TextSerializer().Serialize(registry.Collect());
  EXPECT_NE(text.find(std::string("nlockd_build_info{build_type=\"") + NLOCKD_BUILD_TYPE +
                      "\",revision=\"" + NLOCKD_BUILD_REVISION + "\",version=\"" +
                      NLOCKD_BUILD_VERSION + "\"} 1"),
            std::string::npos)
      << text;
}

}  // namespace
}  // namespace nlockd::admin
