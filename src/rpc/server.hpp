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
#include "rpc/wait_bounds.hpp"

namespace nlockd::rpc {

struct ServerOptions {
  // A TCP record larger than this closes the connection before anything is allocated for it.
  // NLM and NSM calls are a few KiB at most: every string and opaque in them is bounded to 1 KiB.
  size_t max_record_size = 1 << 20;
  // A TCP record in more fragments than this closes the connection: 1-byte fragments cost a
  // header parse per byte. Clients send one fragment, or split at their buffer size (libtirpc's
  // is 4 KiB and up: 256 fragments for a 1 MiB record).
  size_t max_fragments_per_record = 1024;
  // Past this many open connections a new one takes the place of the connection idle longest
  // (no call in flight; the oldest last call or reply), as Linux's RPC server does; with no
  // such connection the new one is closed at once. Bounds file descriptors and per-connection
  // memory against a flood of idle sockets without locking out the clients that are working.
  size_t max_connections = 1024;
  // Connections one client address may hold; past it the address's own longest-idle connection
  // makes room (or the new one is closed). A client host needs one or two (its lock manager's
  // and its status monitor's); 64 leaves room for a NAT gateway in front of many hosts, while
  // one address alone can take only a sixteenth of max_connections.
  size_t max_connections_per_address = 64;
  // Calls one connection may have in flight or answered-but-unsent before we stop reading from
  // it: a client that pipelines without reading its replies holds at most this many.
  size_t max_calls_per_connection = 128;
  // Reply bytes one connection may have queued before we stop reading from it, so that large
  // replies to a client that does not read are bounded too. NLM replies are ~100 bytes plus the
  // client's cookie (at most 1 KiB): 128 of them fit.
  size_t max_queued_reply_bytes = 256 << 10;
  // Bytes all connections together may hold in records not yet complete. Past it the
  // connection holding the largest unfinished record is closed, so that many connections each
  // sending most of a max_record_size record cannot take max_connections * max_record_size.
  // NLM and NSM calls are a few KiB: this is thousands of legitimate calls arriving at once.
  size_t max_unfinished_record_bytes = 32 << 20;
  // UDP calls in flight past which datagrams are dropped (the client retransmits).
  size_t max_udp_calls = 4096;
  // A connection that completes no call and sends no reply for this long, with nothing in
  // flight, is closed. Bytes alone do not count: a trickle that never finishes a record is idle.
  std::chrono::steady_clock::duration idle_timeout = std::chrono::minutes(5);
  // A record begun must be complete within this, whatever else the connection does, so that a
  // slow sender cannot hold a record's memory for long. A 1 MiB record takes a second at 8 Mbit/s.
  std::chrono::steady_clock::duration record_timeout = std::chrono::seconds(30);
  // How long Shutdown waits for calls in flight before it closes their connections.
  std::chrono::steady_clock::duration drain_timeout = kRpcDrainBound;
  // The dispatcher's programs this listener serves; empty: all of them. Others get
  // PROG_UNAVAIL here.
  std::vector<uint32_t> programs;
};

struct ServerStats {
  uint64_t connections_accepted = 0;
  uint64_t connections_refused = 0;  // Over a connection limit with no idle one to close.
  uint64_t connections_evicted = 0;  // Idle connections closed to make room for a new one.
  uint64_t records_too_large = 0;
  uint64_t records_too_fragmented = 0;
  uint64_t records_timed_out = 0;            // Unfinished after record_timeout.
  uint64_t unfinished_record_evictions = 0;  // Closed over max_unfinished_record_bytes.
  uint64_t udp_dropped = 0;                  // Over max_udp_calls.
  uint64_t bytes_received = 0;
  uint64_t bytes_sent = 0;
  size_t open_connections = 0;
  size_t unfinished_record_bytes = 0;  // Held now in records not yet complete.
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

  // Cancel, then wait: stops taking new calls (the accept and UDP loops end, connections stop
  // reading), lets the calls in flight finish and send their replies (up to drain_timeout;
  // past it, one warning naming what still runs, and their connections are closed), then
  // closes every socket.
  asio::awaitable<void> Shutdown();

  const ServerStats& stats() const { return stats_; }

 private:
  class Connection;
  friend class Connection;

  asio::awaitable<void> AcceptLoop();
  // Whether a connection from `peer` may be served now, closing an idle one to make room.
  bool MakeRoomFor(const asio::ip::address& peer);
  // Records that `connection` holds `held` bytes in its unfinished record; past the limit,
  // closes the connections holding the largest ones.
  void NoteUnfinished(Connection& connection, size_t held);
  // Whether a warning about a flood may be logged now (one a second; the rest are counted).
  bool FloodWarningDue();
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
  // Every connection reads into this: after the socket is readable, and fed to the connection's
  // assembler before anything else runs, so that an idle connection holds no read buffer.
  std::vector<uint8_t> read_buffer_;
  ServerStats stats_;
  // When a flood of refusals, evictions or closed connections may log its next warning.
  std::chrono::steady_clock::time_point next_flood_warning_{};
  uint64_t warnings_suppressed_ = 0;
  // Connections were closed over max_unfinished_record_bytes since the count was last 0.
  bool unfinished_evictions_logged_ = false;
};

}  // namespace nlockd::rpc
