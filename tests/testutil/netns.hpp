#pragma once

#include <string>
#include <vector>

namespace nlockd::testutil {

// A test host: its own network namespace (loopback up), created by the test and removed when
// the object goes. Processes started through Wrap() run inside it; with a private /run, so
// that this host's rpcbind, rpc.statd and sm-notify do not meet another host's sockets and
// pid files. Needs root and `ip` from iproute2.
class NetNamespace {
 public:
  explicit NetNamespace(const std::string& label);
  ~NetNamespace();
  NetNamespace(const NetNamespace&) = delete;
  NetNamespace& operator=(const NetNamespace&) = delete;

  const std::string& name() const { return name_; }
  // argv that runs `argv` inside the namespace, with a private tmpfs on /run.
  std::vector<std::string> Wrap(const std::vector<std::string>& argv) const;

  // Whether this machine lets us create namespaces (root, iproute2 present).
  static bool Available();

 private:
  std::string name_;
};

}  // namespace nlockd::testutil
