// SPDX-License-Identifier: Apache-2.0
// nlockctl: the command-line client of nlockd's admin API (docs/api.md); the logic is in
// admin/cli.cpp.
#include <cstdlib>
#include <iostream>

#include "admin/cli.hpp"

int main(int argc, char** argv) {
  nlockd::admin::CliEnvironment environment;
  if (const char* server = std::getenv("NLOCKCTL_SERVER")) environment.server = server;
  if (const char* token = std::getenv("NLOCKCTL_TOKEN")) environment.token = token;
  if (const char* file = std::getenv("NLOCKCTL_TOKEN_FILE")) environment.token_file = file;
  if (const char* directory = std::getenv("CREDENTIALS_DIRECTORY")) {
    environment.credentials_directory = directory;
  }
  return nlockd::admin::RunCli(argc, argv, std::cout, std::cerr, environment);
}
