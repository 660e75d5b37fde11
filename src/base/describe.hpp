// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <exception>
#include <string>

namespace nlockd {

// The message of a caught exception (what() of a std::exception), for a log line.
std::string Describe(const std::exception_ptr& error);

}  // namespace nlockd
