// SPDX-License-Identifier: Apache-2.0
#pragma once

// NLOCKD_EXPORT marks what libnlockd.so exports; everything else in it is hidden.
#if defined(NLOCKD_STATIC_DEFINE)
#define NLOCKD_EXPORT
#else
#define NLOCKD_EXPORT __attribute__((visibility("default")))
#endif
