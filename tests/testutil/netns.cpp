#include "testutil/netns.hpp"

#include <unistd.h>

#include <atomic>
#include <stdexcept>

#include "testutil/subprocess.hpp"

namespace nlockd::testutil {

namespace {
std::atomic<int> next_id{0};
}

bool NetNamespace::Available() {
  if (geteuid() != 0) return false;
  return RunCommand({"ip", "netns", "list"}).first == 0;
}

NetNamespace::NetNamespace(const std::string& label)
    : name_("nlk-" + label + "-" + std::to_string(getpid()) + "-" + std::to_string(next_id++)) {
  auto [rc, out] = RunCommand({"ip", "netns", "add", name_});
  if (rc != 0) throw std::runtime_error("ip netns add " + name_ + " failed: " + out);
  auto [rc2, out2] = RunCommand({"ip", "-n", name_, "link", "set", "lo", "up"});
  if (rc2 != 0) throw std::runtime_error("cannot bring up lo in " + name_ + ": " + out2);
}

NetNamespace::~NetNamespace() { RunCommand({"ip", "netns", "del", name_}); }

std::vector<std::string> NetNamespace::Wrap(const std::vector<std::string>& argv) const {
  std::vector<std::string> out{"ip",      "netns", "exec", name_, "unshare", "--mount",
                               "--propagation", "private", "sh", "-c",
                               "mount -t tmpfs tmpfs /run && exec \"$@\"", "sh"};
  out.insert(out.end(), argv.begin(), argv.end());
  return out;
}

}  // namespace nlockd::testutil
