// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <iosfwd>
#include <optional>
#include <string>

namespace nlockd::admin {

// nlockctl's exit codes, for scripts.
enum CliExit : int {
  kCliOk = 0,
  kCliServerError = 1,  // The server answered with an error (its message goes to stderr).
  kCliUsage = 2,        // Bad command line.
  kCliUnreachable = 3,  // No answer: cannot connect, or the connection failed.
};

// Defaults taken from the environment (NLOCKCTL_SERVER, NLOCKCTL_TOKEN); flags override them.
struct CliEnvironment {
  std::optional<std::string> server;      // NLOCKCTL_SERVER
  std::optional<std::string> token;       // NLOCKCTL_TOKEN
  std::optional<std::string> token_file;  // NLOCKCTL_TOKEN_FILE
  // $CREDENTIALS_DIRECTORY (systemd's LoadCredential=): a relative token file is looked up
  // there, as the daemon looks up its own.
  std::optional<std::string> credentials_directory;
};

// nlockctl: parses the command line, calls the admin API (docs/api.md) and prints a table, or
// the API's JSON with --json. Returns the exit code.
int RunCli(int argc, const char* const* argv, std::ostream& out, std::ostream& err,
           const CliEnvironment& environment);

}  // namespace nlockd::admin
