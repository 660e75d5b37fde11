// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
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

  // argv that runs `argv` inside the namespace with this host's own /run: a directory that
  // every process started through WrapHost() shares (so that this host's rpcbind socket is
  // seen by this host's RPC servers and by no other host), removed with the namespace.
  std::vector<std::string> WrapHost(const std::vector<std::string>& argv) const;

  // Asks the rpcbind listening on this namespace's loopback until it answers (it prints nothing
  // when ready); false if it has not within `timeout`.
  bool WaitForRpcbind(std::chrono::milliseconds timeout = std::chrono::seconds(10)) const;

  // Joins this namespace and `peer` by a veth pair, `address` here and `peer_address` there
  // (CIDR, e.g. "10.199.1.1/24"), both ends up. The pair is created inside the namespaces and
  // goes away with them; nothing is added to the namespace the test runs in.
  void LinkTo(NetNamespace& peer, const std::string& address, const std::string& peer_address);

  // Whether this machine lets us create namespaces (root, iproute2 present).
  static bool Available();

  // Removes namespaces (with the processes still in them, and their /run directories) that
  // this class made for test processes that are gone, e.g. one that crashed before its
  // destructors ran.
  static void RemoveStale();

 private:
  // argv that runs `argv` inside the namespace in a mount namespace of its own, where `script`
  // (sh -c, with `arg0` as $0) prepares /run and then execs "$@".
  std::vector<std::string> Unshared(const std::string& script, const std::string& arg0,
                                    const std::vector<std::string>& argv) const;

  std::string name_;
  std::string run_dir_;  // This host's /run for WrapHost().
  int links_ = 0;
};

}  // namespace nlockd::testutil
