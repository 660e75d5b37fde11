// SPDX-License-Identifier: Apache-2.0
// nlockd under AddressSanitizer with every check on, alloc-dealloc-mismatch included. Asio's
// aligned new and delete once paired differently across translation units, depending on which
// header a file included first; the build now pins that choice (docs/decisions/0002), and this
// test keeps it pinned.
#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

#include "integration/nlm_rpcgen.hpp"
#include "integration/nlm_test_support.hpp"

namespace nlockd::integration {
namespace {

std::string OriginalAsanOptions() {
  static const std::string original = [] {
    const char* value = std::getenv("ASAN_OPTIONS");
    return std::string(value == nullptr ? "" : value);
  }();
  return original;
}

void SetChildAsanOptions(const std::string& extra) {
  std::string options = OriginalAsanOptions();
  if (!options.empty() && !extra.empty()) options += ":";
  setenv("ASAN_OPTIONS", (options + extra).c_str(), 1);
}

// What the nlockd of the other tests runs with.
void SetChildAsanOptionsForTests() { SetChildAsanOptions(""); }

#if defined(__SANITIZE_ADDRESS__)
class AsanChildOptions : public ::testing::Environment {
 public:
  void SetUp() override { SetChildAsanOptionsForTests(); }
};

[[maybe_unused]] ::testing::Environment* const kAsanChildOptions =
    ::testing::AddGlobalTestEnvironment(new AsanChildOptions);
#endif

TEST(NlmUnderAsan, NlockdServesLocksWithEveryAsanCheckOn) {
  // Once failed: a file that included Asio before any std header allocated coroutine frames
  // with operator new, and other files freed them with std::free.
  SetChildAsanOptions("alloc_dealloc_mismatch=1");
  auto nlockd = StartLocalNlockd(30);
  SetChildAsanOptionsForTests();
  ASSERT_NE(nlockd->port(), 0);
  auto c = NlmRpcgenClient::Connect(4, true, LoopbackAddress(nlockd->port()));
  ASSERT_NE(c, nullptr);
  NlmLock lock = Owner("asan", 1, 0, 10);
  EXPECT_EQ(Outcome(c->Lock(lock, NlmLockFlags{}, "new"), *c), "denied_grace_period");
  EXPECT_EQ(Outcome(c->Lock(lock, NlmLockFlags{.reclaim = true}, "reclaim"), *c), "granted");
  EXPECT_EQ(Outcome(c->Unlock(lock, "unlock"), *c), "granted");
  EXPECT_EQ(nlockd->Stop(), 0) << nlockd->process().output();
}

}  // namespace
}  // namespace nlockd::integration
