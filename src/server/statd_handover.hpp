// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "nlockd/options.hpp"
#include "store/records.hpp"
#include "store/store.hpp"

namespace nlockd::server {

// rpc.statd's state directory while nlockd serves NSM in statd's place (statd_files.hpp has the
// formats). The hand-over both ways:
// - Taking over: when nlockd does not hold the directory (no marker file), the registrations of
//   sm/ replace the store's and the hosts of sm.bak/ become owed a notification; then the marker
//   says that nlockd holds the directory, so that a restart after a crash does not import files
//   that nlockd has not kept current.
// - While running: the state file follows nlockd's state number, written as statd writes it.
// - Giving back (a clean stop, or `nlockd --export-statd-files`): sm/, sm.bak/ and state are
//   written from the store and the marker removed, so that rpc.statd, started next, monitors
//   every host nlockd monitored under the same state number.
// Blocking file I/O: called at start-up, at shutdown and from the export command only (the
// state file also on SM_SIMU_CRASH: four bytes).
class StatdDirectory {
 public:
  // `run_directory` is where statd and sm-notify leave their pid files (/run).
  StatdDirectory(std::filesystem::path directory, std::filesystem::path run_directory);

  // What the directory holds, read as statd reads it.
  struct Contents {
    std::vector<store::Registration> monitored;  // sm/
    // sm.bak/: empty when a live sm-notify still owns it (it delivers them itself).
    std::vector<store::Registration> owed;
    bool owed_left_to_sm_notify = false;
    std::optional<int32_t> state;  // nullopt: missing or not 4 bytes (statd starts afresh)
    std::vector<std::string> warnings;
  };
  Contents Read() const;

  // Whether nlockd holds the directory: it imported it and has not given it back.
  bool HeldByNlockd() const;
  // Whether rpc.statd or sm-notify ran since the host booted (their pid files under the run
  // directory, which the boot empties): this boot was announced already, so taking statd's
  // place now is a restart on the same boot.
  bool StatdRanThisBoot() const;

  // Makes `contents` the store's NSM state: its registrations replace the store's (nlockd's own
  // NLM ones stay), its owed hosts are added to the store's, announcing `state`. Blocks until
  // the writes are durable; throws Error. Then marks the directory as held.
  void Import(const Contents& contents, store::Store& store,
              const std::vector<store::Registration>& stored, int32_t state) const;

  // The state file, written atomically (state.new, then renamed); keeps the file's owner.
  // Throws Error.
  void WriteState(int32_t state) const;

  // Gives the directory back: sm/ from `registrations` (nlockd's own NLM ones left out: they
  // are not statd's), sm.bak/ from `owed` (announcing `my_name`), state, owned like sm/ (statd
  // runs as its owner); then removes the marker. Throws Error.
  // `state` nullopt: the state file is left as it is.
  void Export(const std::vector<store::Registration>& registrations,
              const std::vector<store::NotifyOwed>& owed, const std::string& my_name,
              std::optional<int32_t> state) const;

  const std::filesystem::path& path() const { return directory_; }

 private:
  std::filesystem::path marker() const { return directory_ / "nlockd.held"; }

  std::filesystem::path directory_;
  std::filesystem::path run_directory_;
};

// `nlockd --export-statd-files`: gives rpc.statd's files (Options::statd_state_directory) back
// from the store while nlockd is stopped, after a crash or when it cannot start. Opens the
// store as a start does (the SQLite store's lock refuses it while nlockd runs), but moves no
// state. Returns what it wrote, in one line; throws Error.
std::string ExportStatdFiles(const nlockd::Options& options);

// The state rpc.statd's file holds, as statd takes it: an even number (down) is used as the
// next odd one.
int32_t StatdStateAsUp(int32_t state);

}  // namespace nlockd::server
