// SPDX-License-Identifier: Apache-2.0
#pragma once

// A TCP proxy between an nlockd node and PostgreSQL that can cut the node off in the middle of a
// transaction: it reads the frontend's protocol messages and, once armed, goes silent at the
// first statement that matches, forwarding nothing more in either direction on any of its
// connections and keeping every socket open, as a network path that drops packets does (the
// server keeps the node's sessions, and their open transactions, alive).

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

namespace nlockd::integration::hafault {

class PgProxy {
 public:
  using Clock = std::chrono::steady_clock;

  // Where the cut lands relative to the statement that matches.
  enum class Cut {
    kBeforeStatement,  // the statement and all after it are withheld (a COMMIT never arrives)
    kAfterExecute,     // the statement runs, its Sync (its commit) is withheld
  };

  // Listens on listen_address (an IPv4 address of this namespace), on a port of its choosing;
  // forwards each connection to upstream_host:upstream_port. Throws std::runtime_error.
  PgProxy(const std::string& listen_address, const std::string& upstream_host,
          uint16_t upstream_port);
  ~PgProxy();
  PgProxy(const PgProxy&) = delete;
  PgProxy& operator=(const PgProxy&) = delete;

  uint16_t port() const { return port_; }

  // Arms the cut at the first statement (a Parse or simple Query message) whose SQL starts with
  // `sql_prefix`, on any connection.
  void Arm(const std::string& sql_prefix, Cut where);
  // Waits until the cut happened; whether it did.
  bool WaitCut(std::chrono::milliseconds timeout);
  Clock::time_point cut_at();

 private:
  struct Connection;
  void Run();

  int listen_fd_ = -1;
  int wake_fd_ = -1;  // an eventfd: stops Run()
  uint16_t port_ = 0;
  std::string upstream_host_;
  uint16_t upstream_port_ = 0;

  std::mutex mutex_;
  std::condition_variable cut_changed_;
  std::string prefix_;  // guarded by mutex_; "" while not armed
  Cut where_ = Cut::kBeforeStatement;
  bool silent_ = false;  // guarded by mutex_
  Clock::time_point cut_at_;
  std::thread thread_;  // last: starts once everything above exists
};

}  // namespace nlockd::integration::hafault
