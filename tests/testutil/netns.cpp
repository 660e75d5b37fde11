// SPDX-License-Identifier: Apache-2.0
#include "testutil/netns.hpp"

#include <atomic>
#include <cerrno>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <thread>

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil/subprocess.hpp"

namespace nlockd::testutil {

namespace {

std::atomic<int> next_id{0};

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    lines.push_back(text.substr(at, end - at));
    at = end + 1;
  }
  return lines;
}

std::optional<pid_t> ParsePid(const std::string& text) {
  if (text.empty() || text.size() > 9 ||
      text.find_first_not_of("0123456789") != std::string::npos) {
    return std::nullopt;
  }
  return static_cast<pid_t>(std::stol(text));
}

}  // namespace

bool NetNamespace::Available() {
  if (geteuid() != 0) return false;
  return RunCommand({"ip", "netns", "list"}).first == 0;
}

NetNamespace::NetNamespace(const std::string& label)
    : name_("nlk-" + label + "-" + std::to_string(getpid()) + "-" + std::to_string(next_id++)) {
  auto [rc, out] = RunCommand({"ip", "netns", "add", name_});
  if (rc != 0) throw std::runtime_error("ip netns add " + name_ + " failed: " + out);
  auto [rc2, out2] = RunCommand({"ip", "-n", name_, "link", "set", "lo", "up"});
  if (rc2 != 0) {
    RunCommand({"ip", "netns", "del", name_});
    throw std::runtime_error("cannot bring up lo in " + name_ + ": " + out2);
  }
  std::string run_template = "/tmp/" + name_ + "-run-XXXXXX";
  if (mkdtemp(run_template.data()) == nullptr) {
    RunCommand({"ip", "netns", "del", name_});
    throw std::runtime_error("cannot create a /run directory for " + name_);
  }
  run_dir_ = run_template;
  chmod(run_dir_.c_str(), 0755);  // rpcbind drops to its own user after start-up.
}

NetNamespace::~NetNamespace() {
  RunCommand({"ip", "netns", "del", name_});
  std::error_code ignored;
  if (!run_dir_.empty()) std::filesystem::remove_all(run_dir_, ignored);
}

std::vector<std::string> NetNamespace::Unshared(const std::string& script, const std::string& arg0,
                                                const std::vector<std::string>& argv) const {
  std::vector<std::string> out{"ip",      "netns",   "exec",          name_,
                               "unshare", "--mount", "--propagation", "private",
                               "sh",      "-c",      script,          arg0};
  out.insert(out.end(), argv.begin(), argv.end());
  return out;
}

std::vector<std::string> NetNamespace::Wrap(const std::vector<std::string>& argv) const {
  return Unshared("mount -t tmpfs tmpfs /run && exec \"$@\"", "sh", argv);
}

void NetNamespace::RemoveStale() {
  auto [rc, listing] = RunCommand({"ip", "netns", "list"});
  if (rc != 0) return;
  for (const std::string& line : Lines(listing)) {
    // Our names are nlk-LABEL-PID-N: the PID is the field before the last.
    std::string name = line.substr(0, line.find(' '));
    if (name.rfind("nlk-", 0) != 0) continue;
    size_t last = name.rfind('-');
    size_t before =
        last == std::string::npos || last == 0 ? std::string::npos : name.rfind('-', last - 1);
    if (before == std::string::npos) continue;
    std::optional<pid_t> pid = ParsePid(name.substr(before + 1, last - before - 1));
    if (!pid || *pid == getpid() || kill(*pid, 0) == 0 || errno != ESRCH) continue;
    // What that test left running there (its rpcbind, say) goes with it.
    auto [pids_rc, pids] = RunCommand({"ip", "netns", "pids", name});
    if (pids_rc == 0) {
      for (const std::string& text : Lines(pids)) {
        if (auto left = ParsePid(text)) kill(*left, SIGKILL);
      }
    }
    RunCommand({"ip", "netns", "del", name});
    std::error_code ignored;
    for (const auto& entry : std::filesystem::directory_iterator("/tmp", ignored)) {
      if (entry.path().filename().string().rfind(name + "-run-", 0) == 0) {
        std::filesystem::remove_all(entry.path(), ignored);
      }
    }
  }
}

std::vector<std::string> NetNamespace::WrapHost(const std::vector<std::string>& argv) const {
  return Unshared("mount --bind \"$0\" /run && exec \"$@\"", run_dir_, argv);
}

bool NetNamespace::WaitForRpcbind(std::chrono::milliseconds timeout) const {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  // A private /run: rpcinfo reaches rpcbind over the loopback, as a client would.
  while (RunCommand(Wrap({"rpcinfo", "-p", "127.0.0.1"})).first != 0) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

void NetNamespace::LinkTo(NetNamespace& peer, const std::string& address,
                          const std::string& peer_address) {
  std::string here = "veth" + std::to_string(links_++);
  std::string there = "veth" + std::to_string(peer.links_++);
  const std::vector<std::vector<std::string>> steps{
      {"ip", "-n", name_, "link", "add", here, "type", "veth", "peer", "name", there, "netns",
       peer.name_},
      {"ip", "-n", name_, "addr", "add", address, "dev", here},
      {"ip", "-n", peer.name_, "addr", "add", peer_address, "dev", there},
      {"ip", "-n", name_, "link", "set", here, "up"},
      {"ip", "-n", peer.name_, "link", "set", there, "up"},
  };
  for (const auto& step : steps) {
    auto [rc, out] = RunCommand(step);
    if (rc != 0) throw std::runtime_error("linking " + name_ + " to " + peer.name_ + ": " + out);
  }
}

}  // namespace nlockd::testutil
