// SPDX-License-Identifier: Apache-2.0
#include "admin/build_info.hpp"

#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include "nlockd_build_info.hpp"

namespace nlockd::admin {

void RegisterBuildInfo(prometheus::Registry& registry) {
  prometheus::BuildGauge()
      .Name("nlockd_build_info")
      .Help("Always 1; the labels say which nlockd build runs.")
      .Register(registry)
      .Add({{"version", NLOCKD_BUILD_VERSION},
            {"revision", NLOCKD_BUILD_REVISION},
            {"build_type", NLOCKD_BUILD_TYPE}})
      .Set(1);
}

}  // namespace nlockd::admin
