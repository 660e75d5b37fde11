// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <optional>
#include <vector>

#include <asio/any_io_executor.hpp>
#include <asio/awaitable.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/ip/udp.hpp>

#include "rpc/dispatcher.hpp"
#include "rpc/task_gate.hpp"

namespace nlockd::rpc {

struct ServerOptions {
  // A TCP record larger than this closes the connection before anything is allocated for it.
  // NLM and NSM calls are a few KiB at most: every string and opaque in them is bounded to 1 KiB.
  size_t max_record_size = 1 << 20;
  // Connections past this are accepted and closed at once, so a flood of idle sockets cannot
  // exhaust file descriptors.
  size_t max_connections = 1024;
  // Calls one connection may have in flight before we stop reading from it (back-pressure
  // against a client that pipelines without reading replies).
  size_t max_calls_per_connection = 128;
  // UDP calls in flight past which datagrams are dropped (the client retransmits).
  size_t max_udp_calls = 4096;
  // A connection with nothing in flight and no bytes for this long is closed.
  std::chrono::steady_clock::duration idle_timeout = std::chrono::minutes(5);
  // How long Shutdown waits for calls in flight.
  std::chrono::steady_clock::duration drain_timeout = std::chrono::seconds(10);
  // The dispatcher's programs this listener serves; empty: all of them. Others get
  // PROG_UNAVAIL here.
  std::vector<uint32_t> programs;
};

struct ServerStats {
  uint64_t connections_accepted = 0;
  uint64_t connections_refused = 0;  // Over max_connections.
  uint64_t records_too_large = 0;
  uint64_t udp_dropped = 0;  // Over max_udp_calls.
  uint64_t bytes_received = 0;
  uint64_t bytes_sent = 0;
  size_t open_connections = 0;
};

// Serves the Dispatcher's programs over TCP (record marking) and UDP on one port. Calls on one
// connection are pipelined and answered as they complete. Runs on one executor (strand or
// single-threaded io_context); the dispatcher must outlive the server.
class Server {
 public:
  Server(asio::any_io_executor executor, const Dispatcher& dispatcher, ServerOptions options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds TCP and UDP to the same address and port; port 0 picks one free for both.
  // Throws Error on failure.
  void Listen(const asio::ip::address& address, uint16_t port);
  // Serves on sockets made elsewhere (an embedding program's): a bound, listening TCP socket
  // and a bound UDP socket, IPv4 or IPv6. The server owns and closes them. Throws Error.
  void Adopt(int tcp_listen_fd, int udp_fd);
  uint16_t port() const { return port_; }
  const std::vector<uint32_t>& programs() const { return options_.programs; }
  asio::ip::address address() const { return address_; }

  // Starts accepting and receiving. REQUIRES: Listen succeeded.
  void Start();

  // Stops taking new calls, lets the calls in flight finish and send their replies (up to
  // drain_timeout), then closes every socket.
  asio::awaitable<void> Shutdown();

  const ServerStats& stats() const { return stats_; }

 private:
  class Connection;
  friend class Connection;

  asio::awaitable<void> AcceptLoop();
  asio::awaitable<void> UdpLoop();
  asio::awaitable<void> HandleDatagram(std::vector<uint8_t> datagram,
                                       asio::ip::udp::endpoint sender,
                                       std::optional<asio::ip::address> destination,
                                       TaskGate::Pass pass);
  // Asks the kernel where each datagram was sent, so that replies go from there.
  void AskForDestinations();

  asio::any_io_executor executor_;
  const Dispatcher& dispatcher_;
  ServerOptions options_;
  asio::ip::tcp::acceptor acceptor_;
  asio::ip::udp::socket udp_;
  asio::ip::address address_;
  uint16_t port_ = 0;
  TaskGate gate_;
  size_t udp_in_flight_ = 0;
  std::list<std::weak_ptr<Connection>> connections_;
  ServerStats stats_;
};

}  // namespace nlockd::rpc
