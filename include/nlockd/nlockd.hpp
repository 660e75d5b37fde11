// SPDX-License-Identifier: Apache-2.0
#pragma once

// libnlockd: an NFS lock manager (NLM and NSM) to link into an NFS server. See
// docs/embedding.md for how to use it.
#include "nlockd/ha.hpp"
#include "nlockd/lock_service.hpp"
#include "nlockd/options.hpp"
#include "nlockd/types.hpp"
#include "nlockd/version.hpp"
