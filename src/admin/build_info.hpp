// SPDX-License-Identifier: Apache-2.0
#pragma once

namespace prometheus {
class Registry;
}

namespace nlockd::admin {

// Adds the gauge nlockd_build_info{version, revision, build_type} = 1 to `registry`, the
// Prometheus convention for telling which build a target runs (join it on `instance`).
void RegisterBuildInfo(prometheus::Registry& registry);

}  // namespace nlockd::admin
