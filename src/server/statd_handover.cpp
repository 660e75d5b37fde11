// SPDX-License-Identifier: Apache-2.0
#include "server/statd_handover.hpp"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <fstream>
#include <future>
#include <set>
#include <tuple>

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/error.hpp"
#include "nsm/status_receiver.hpp"
#include "server/statd_files.hpp"
#include "store/open_store.hpp"

namespace nlockd::server {
namespace {

namespace fs = std::filesystem;

// What the kernel's lockd registers (sm_inter.x: NLM 100021 v4 procedure 16), used for the
// sm.bak/ lines of hosts owed a notification: sm-notify reads only their two names.
constexpr int32_t kNlmProgram = 100021;
constexpr int32_t kNlmVersion = 4;
constexpr int32_t kNlmStatusProcedure = 16;

// Whether the pid file names a process of that name that is still running.
bool LiveProcess(const fs::path& pid_file, const std::string& name) {
  std::ifstream in(pid_file);
  long pid = 0;
  if (!(in >> pid) || pid <= 0) return false;
  if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno != EPERM) return false;
  std::ifstream comm(fmt::format("/proc/{}/comm", pid));
  std::string command;
  return std::getline(comm, command) && command == name;
}

void Wait(std::vector<std::future<void>>& writes) {
  for (auto& write : writes) write.get();  // rethrows the store's error
  writes.clear();
}

store::Done Promise(std::vector<std::future<void>>& writes) {
  auto promise = std::make_shared<std::promise<void>>();
  writes.push_back(promise->get_future());
  return [promise](std::exception_ptr error) {
    if (error) {
      promise->set_exception(error);
    } else {
      promise->set_value();
    }
  };
}

auto Key(const store::Registration& registration) {
  return std::tie(registration.mon_name, registration.my_id.my_name, registration.my_id.my_prog,
                  registration.my_id.my_vers, registration.my_id.my_proc);
}

// The owner of `directory`, creating it (0755, as nfs-common ships sm/) when missing.
std::pair<uid_t, gid_t> OwnerOf(const fs::path& directory) {
  std::error_code error;
  fs::create_directories(directory, error);
  struct stat info {};
  if (::stat(directory.c_str(), &info) != 0) {
    throw Error(ErrorKind::kFailed,
                fmt::format("cannot use {}: {}", directory.string(), std::strerror(errno)));
  }
  return {info.st_uid, info.st_gid};
}

}  // namespace

int32_t StatdStateAsUp(int32_t state) {
  // statd adds one to an even number (nsm_get_state), wrapping as the int it is.
  return state % 2 == 0 ? static_cast<int32_t>(static_cast<uint32_t>(state) + 1U) : state;
}

StatdDirectory::StatdDirectory(fs::path directory, fs::path run_directory)
    : directory_(std::move(directory)), run_directory_(std::move(run_directory)) {}

StatdDirectory::Contents StatdDirectory::Read() const {
  Contents contents;
  contents.monitored = ReadStatdRecords(directory_ / "sm", contents.warnings);
  // A running sm-notify is delivering sm.bak/ and removes each record as its host answers;
  // notifying them again would be a second, late announcement of the same reboot.
  contents.owed_left_to_sm_notify = LiveProcess(run_directory_ / "sm-notify.pid", "sm-notify");
  if (!contents.owed_left_to_sm_notify) {
    contents.owed = ReadStatdRecords(directory_ / "sm.bak", contents.warnings);
  }
  contents.state = ReadStatdState(directory_ / "state");
  return contents;
}

bool StatdDirectory::HeldByNlockd() const {
  std::error_code error;
  return fs::exists(marker(), error);
}

bool StatdDirectory::StatdRanThisBoot() const {
  std::error_code error;
  return fs::exists(run_directory_ / "rpc.statd.pid", error) ||
         fs::exists(run_directory_ / "sm-notify.pid", error);
}

void StatdDirectory::Import(const Contents& contents, store::Store& store,
                            const std::vector<store::Registration>& stored, int32_t state) const {
  std::set<std::tuple<std::string, std::string, int32_t, int32_t, int32_t>> in_files;
  for (const store::Registration& registration : contents.monitored) {
    in_files.insert(Key(registration));
  }
  std::vector<std::future<void>> writes;
  for (const store::Registration& registration : stored) {
    if (nsm::IsLocalNlmId(registration.my_id) || in_files.contains(Key(registration))) continue;
    // statd's files are the newer truth: statd ran after nlockd last gave them back.
    store.RemoveRegistration(registration.mon_name, registration.my_id, Promise(writes));
  }
  for (const store::Registration& registration : contents.monitored) {
    store.PutRegistration(registration, Promise(writes));
  }
  std::vector<store::NotifyOwed> owed;
  std::set<std::string> owed_names;
  for (const store::Registration& registration : contents.owed) {
    if (owed_names.insert(registration.mon_name).second) {
      owed.push_back(store::NotifyOwed{registration.mon_name, "", state, 0});
    }
  }
  if (!owed.empty()) store.PutNotifyOwed(std::move(owed), Promise(writes));
  Wait(writes);
  // Written only once the store holds everything: a crash before it imports again.
  const std::string note =
      "nlockd holds this directory (it serves NSM in rpc.statd's place): sm/ and sm.bak/ are "
      "written back when it stops cleanly or by `nlockd --export-statd-files`.\n";
  const fs::path temporary = marker().string() + ".new";
  {
    std::ofstream out(temporary, std::ios::trunc);
    out << note;
    if (!out.flush()) {
      throw Error(ErrorKind::kFailed, fmt::format("cannot write {}", temporary.string()));
    }
  }
  std::error_code error;
  fs::rename(temporary, marker(), error);
  if (error) {
    throw Error(ErrorKind::kFailed,
                fmt::format("cannot write {}: {}", marker().string(), error.message()));
  }
}

void StatdDirectory::WriteState(int32_t state) const {
  WriteStatdState(directory_ / "state", state);
}

void StatdDirectory::Export(const std::vector<store::Registration>& registrations,
                            const std::vector<store::NotifyOwed>& owed, const std::string& my_name,
                            std::optional<int32_t> state) const {
  std::vector<store::Registration> monitored;
  for (const store::Registration& registration : registrations) {
    if (!nsm::IsLocalNlmId(registration.my_id)) monitored.push_back(registration);
  }
  std::vector<store::Registration> to_notify;
  for (const store::NotifyOwed& host : owed) {
    store::Registration line;
    line.mon_name = host.mon_name;
    line.my_id = store::MyId{my_name, kNlmProgram, kNlmVersion, kNlmStatusProcedure};
    line.source_address = "127.0.0.1";
    to_notify.push_back(std::move(line));
  }
  const auto [owner, group] = OwnerOf(directory_ / "sm");
  WriteStatdRecords(directory_ / "sm", monitored, owner, group);
  const auto [bak_owner, bak_group] = OwnerOf(directory_ / "sm.bak");
  WriteStatdRecords(directory_ / "sm.bak", to_notify, bak_owner, bak_group);
  if (state) WriteState(StatdStateAsUp(*state));
  std::error_code error;
  fs::remove(marker(), error);
  if (error) {
    throw Error(ErrorKind::kFailed,
                fmt::format("cannot remove {}: {}", marker().string(), error.message()));
  }
}

std::string ExportStatdFiles(const nlockd::Options& options) {
  if (options.statd_state_directory.empty()) {
    throw Error(ErrorKind::kFailed, "statd.state_directory is not set: nothing to export to");
  }
  store::StoreOptions store_options;
  if (store::IsSharedStoreUri(options.store)) store_options.node_id = options.name;
  std::unique_ptr<store::Store> store = store::OpenStore(options.store, store_options);
  store::LoadedState loaded = store->LoadAll();
  // The state the last run served: odd while it ran, one more (even) after a clean stop.
  std::optional<int32_t> state;
  if (loaded.state != 0) {
    state = loaded.state % 2 != 0 ? loaded.state
                                  : static_cast<int32_t>(static_cast<uint32_t>(loaded.state) - 1U);
  }
  StatdDirectory(options.statd_state_directory, "/run")
      .Export(loaded.registrations, loaded.notify_owed, options.name, state);
  return fmt::format("exported to {}: {} registrations, {} hosts owed a notification, state {}",
                     options.statd_state_directory, loaded.registrations.size(),
                     loaded.notify_owed.size(), state ? std::to_string(*state) : "unchanged");
}

}  // namespace nlockd::server
