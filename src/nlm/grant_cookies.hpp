// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace nlockd::nlm {

// Makes the cookies of GRANTED / GRANTED_MSG callbacks: 8 bytes that another host cannot guess
// (it would settle or refuse a grant that is not its own with a forged GRANTED_RES). Each cookie
// is SipHash-2-4 (Aumasson and Bernstein, 2012), a keyed pseudo-random function, of a counter
// under a 128-bit secret key: distinct for every call and unpredictable without the key, even
// to a host that has seen many of them. The key is injected (randomness arrives through a
// constructor, so that tests are repeatable); production passes one from std::random_device, tests
// a fixed one.
class GrantCookies {
 public:
  using Key = std::array<uint64_t, 2>;
  explicit GrantCookies(Key key) : key_(key) {}

  std::string Next();

  // The keyed function itself, exposed for the test vectors of the SipHash paper.
  static uint64_t SipHash24(const Key& key, const uint8_t* data, size_t size);

 private:
  Key key_;
  uint64_t counter_ = 0;
};

}  // namespace nlockd::nlm
