#pragma once

#include <string>

namespace nlockd::store::testutil {

// The crash test: runs store_crash_child against the store at uri, kills it with SIGKILL once
// it has acknowledged at least min_acks durable registrations (so, mid-load), then reopens the
// store and checks (with gtest assertions) that every acknowledged registration is there.
void RunCrashTest(const std::string& uri, int min_acks);

}  // namespace nlockd::store::testutil
