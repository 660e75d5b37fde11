// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <sys/types.h>

#include "store/records.hpp"

namespace nlockd::server {

// rpc.statd's files in its state directory (/var/lib/nfs by default), read when nlockd takes
// statd's place and written when it gives the place back, so that neither side forgets a
// monitored host or reuses a state number:
//   sm/NAME, sm.bak/NAME  one line per registration: the callback address (IPv4, its network
//                         bytes printed as a host-order %08x), my_prog, my_vers, my_proc (%08x),
//                         priv as 32 lower-case hex digits, mon_name and my_name. sm/ holds the
//                         registrations, sm.bak/ the hosts still owed a reboot notification.
//   state                 the NSM state number: 4 bytes in host order (odd: up).
// Names that begin with "." and files that are not regular are skipped, as statd skips them.

// One line of sm/ or sm.bak/ as a registration (source_address is the callback address, which
// statd always records as 127.0.0.1). nullopt for a line statd would not accept either.
std::optional<store::Registration> ParseStatdRecord(std::string_view line);
// The line statd writes for `registration`, with its newline.
std::string FormatStatdRecord(const store::Registration& registration);

// Every record under `directory` (sm/ or sm.bak/). A missing directory has none; a line that
// does not parse is reported in `warnings` and skipped.
std::vector<store::Registration> ReadStatdRecords(const std::filesystem::path& directory,
                                                  std::vector<std::string>& warnings);
// Replaces the records under `directory` with `registrations`, one file per mon_name, each
// written to NAME.new and renamed, owned by `owner`/`group` (statd runs as the owner of sm/).
// Files for names not in `registrations` are removed. Throws Error on a failed write.
void WriteStatdRecords(const std::filesystem::path& directory,
                       const std::vector<store::Registration>& registrations, uid_t owner,
                       gid_t group);

// The state file's number, or nullopt when it is missing or not 4 bytes (statd then starts
// afresh).
std::optional<int32_t> ReadStatdState(const std::filesystem::path& file);
// Writes `state` as statd does (state.new, then renamed over the file). Throws Error.
void WriteStatdState(const std::filesystem::path& file, int32_t state);

}  // namespace nlockd::server
