// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>
#include <string_view>
#include <system_error>

namespace nlockd::testutil {

// A fresh directory, nlockd-<name>-XXXXXX under the system's temporary directory ($TMPDIR, else
// /tmp), removed with everything in it at destruction; kept (and named on stderr) when the
// environment sets NLOCKD_KEEP_TEST_DIR, to look at what a failed test left. Throws when it
// cannot be made.
class TempDir {
 public:
  explicit TempDir(std::string_view name = "test") {
    std::string pattern =
        (std::filesystem::temp_directory_path() / ("nlockd-" + std::string(name) + "-XXXXXX"))
            .string();
    if (mkdtemp(pattern.data()) == nullptr) {
      throw std::system_error(errno, std::generic_category(), "mkdtemp " + pattern);
    }
    path_ = pattern;
  }
  ~TempDir() {
    if (std::getenv("NLOCKD_KEEP_TEST_DIR") != nullptr) {
      std::cerr << "kept " << path_ << "\n";
      return;
    }
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  // A string, not a std::filesystem::path: most callers put it into command lines and store
  // URIs ("sqlite:" + path() + "/nlockd.db").
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace nlockd::testutil
