// SPDX-License-Identifier: Apache-2.0
#include "base/describe.hpp"

namespace nlockd {

std::string Describe(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "unknown error";
  }
}

}  // namespace nlockd
