// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "nsm/notify_targets.hpp"

// What a status monitor alone (serve = nsm) on a SQLite store may announce at its next start
// before that store opens: the early round (server/early_round.hpp). sm-notify needs no daemon to
// tell the peers of a reboot; this file lets nlockd do the same from a few hundred bytes rather
// than after its store's start.
namespace nlockd::server {

// The file's contents.
struct EarlyNotifyRecord {
  // The newest state number reserved: the store's state is never newer. A start on a new boot
  // announces the next odd one after it.
  int32_t state = 0;
  // The boot (kernel boot id) on which `state` was reserved. A start on that boot announces
  // nothing early: the store decides between a restart on the same boot and a round still owed.
  std::string boot_id;
  // Whom to tell: the monitored hosts when it was last written. Not authoritative: the store's
  // round follows and tells any host this list lacks.
  std::vector<nsm::NotifyTarget> hosts;

  friend bool operator==(const EarlyNotifyRecord&, const EarlyNotifyRecord&) = default;
};

// Line-oriented text: a version line, `state N`, `boot ID`, then `host MON_NAME [ADDRESS]` per
// host, names percent-encoded outside [A-Za-z0-9._:-].
std::string FormatEarlyNotifyRecord(const EarlyNotifyRecord& record);
// nullopt and `problem` set when the text is not a whole record of this version.
std::optional<EarlyNotifyRecord> ParseEarlyNotifyRecord(std::string_view text,
                                                        std::string* problem);

// The file next to a SQLite store (PATH.early-notify), read and kept by the process that holds
// the store's lock. Invariant, kept by Reserve() before every bump of the store's state: when the
// file exists, its state is the store's or newer, and its boot is the boot of the store's last
// bump or newer. A file that cannot be kept so is removed. Thread-safe; host lists are written by
// a thread of its own, so that SM_MON never waits for a disk.
class EarlyNotifyFile {
 public:
  // Loads the file at `path` if it is there and whole (a file that is not is logged, then
  // treated as absent and replaced at the next Reserve). With `keep` false (a configuration
  // without early rounds) the file is read for floor() and then Remove()d: SetHosts writes
  // nothing, and Reserve creates nothing but rewrites a file still there with its boot and no
  // hosts.
  EarlyNotifyFile(std::string path, bool keep);
  ~EarlyNotifyFile();
  EarlyNotifyFile(const EarlyNotifyFile&) = delete;
  EarlyNotifyFile& operator=(const EarlyNotifyFile&) = delete;

  static std::string PathFor(const std::string& sqlite_path) {
    return sqlite_path + ".early-notify";
  }

  bool keeps() const { return keep_; }
  // The record as loaded or last written; nullopt if there is none (or it was removed).
  std::optional<EarlyNotifyRecord> record() const;
  // The newest state (with its boot) this process has seen in the file or reserved, kept after
  // the file is removed: the store's next bump must not come back to a state that may have
  // been announced.
  std::optional<EarlyNotifyRecord> floor() const;
  // Before the store's state moves to `state` on boot `boot_id`: makes the file say so (its state
  // never goes back), durably. Returns false after a failed write, the file then removed; throws
  // nlockd::Error when it could not be removed either (the invariant would not hold).
  bool Reserve(int32_t state, const std::string& boot_id);
  // The hosts of the next early round; written in the background, coalesced, once a record
  // exists (a Reserve). A failed write is logged and leaves the previous file.
  void SetHosts(std::vector<nsm::NotifyTarget> hosts);
  // Waits until the hosts given so far are written (or failed); for tests.
  void Flush();
  // Removes the file, durably (the directory synced). Throws nlockd::Error if it is there and
  // cannot be removed.
  void Remove();

  const std::string& path() const { return path_; }

 private:
  void WriterLoop();
  // Writes `record` to the file durably; false (logged) on failure.
  bool Write(const EarlyNotifyRecord& record);
  // Raises floor_ to `record`'s state and boot when newer. REQUIRES: mutex_ held.
  void RaiseFloor(const EarlyNotifyRecord& record);

  const std::string path_;
  const bool keep_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::optional<EarlyNotifyRecord> record_;  // guarded by mutex_
  std::optional<EarlyNotifyRecord> floor_;   // guarded by mutex_; its hosts are not kept
  // Hosts set but not yet written (guarded by mutex_), and whether the writer is busy.
  std::optional<std::vector<nsm::NotifyTarget>> pending_hosts_;
  bool writing_ = false;
  bool stopping_ = false;
  // Serialises whole writes and removals (Reserve's, Remove's and the writer's) of the file.
  std::mutex write_mutex_;
  std::thread writer_;  // only when keep_
};

}  // namespace nlockd::server
