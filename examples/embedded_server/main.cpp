// SPDX-License-Identifier: Apache-2.0
// embedded_server: a small RPC server that embeds libnlockd, as a user-space NFS server would.
// It owns the transport (TCP with record marking and UDP, one port), serves its own program (a
// toy file service, toy_file_service.hpp) and routes NLM (100021) and NSM (100024) calls to an
// nlockd::LockService running on the same io_context. libnlockd registers NLM and NSM with
// rpcbind at this port; the toy program is not registered (its clients are told the port).
//
//   embedded_server [--listen ADDR:PORT] [--store URI] [--grace SECONDS]
//                   [--granted-callback msg|sync] [--admin-listen off]
//
// Logs msg="embedded nlockd listening" address=A port=P (logfmt) once it serves. SIGTERM or SIGINT
// shut it down cleanly (the store records a clean stop, rpcbind is told).
#include <array>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <asio/awaitable.hpp>
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/dispatch.hpp>
#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/ip/udp.hpp>
#include <asio/post.hpp>
#include <asio/redirect_error.hpp>
#include <asio/signal_set.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/write.hpp>
#include <nlockd/nlockd.hpp>

#include "call_window.hpp"
#include "record_reader.hpp"
#include "toy_file_service.hpp"
#include "xdr_lite.hpp"

namespace example {
namespace {

using asio::ip::tcp;
using asio::ip::udp;

constexpr size_t kMaxRecord = 1 << 20;
constexpr uint32_t kMaxAuth = 400;

struct Flags {
  std::string address = "0.0.0.0";
  uint16_t port = 4045;
  nlockd::Options options;
};

[[noreturn]] void Usage(const std::string& problem) {
  std::cerr << "embedded_server: " << problem << "\n";
  std::exit(2);
}

Flags ParseFlags(int argc, char** argv) {
  Flags flags;
  flags.options.grace = std::chrono::seconds(0);
  flags.options.store = "memory:";
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) Usage(flag + " needs a value");
    const std::string value = argv[++i];
    if (flag == "--listen") {
      const size_t colon = value.rfind(':');
      if (colon == std::string::npos) Usage("--listen takes ADDR:PORT");
      flags.address = value.substr(0, colon);
      flags.port = static_cast<uint16_t>(std::stoul(value.substr(colon + 1)));
    } else if (flag == "--store") {
      flags.options.store = value;
    } else if (flag == "--grace") {
      flags.options.grace = std::chrono::seconds(std::stol(value));
    } else if (flag == "--granted-callback") {
      if (value != "msg" && value != "sync") Usage("--granted-callback takes msg or sync");
      flags.options.nlm_granted_msg = value == "msg";
    } else if (flag == "--admin-listen") {
      // This host has no admin HTTP server; LockService::HandleAdminRequest would serve one.
      if (value != "off") Usage("--admin-listen: only 'off' (no admin HTTP server here)");
    } else {
      Usage("unknown flag " + flag);
    }
  }
  return flags;
}

// One call as the transport read it: the header fields libnlockd wants, and the arguments.
struct Call {
  nlockd::RpcCall rpc;
  uint32_t rpc_version = 0;
};

// Reads an RPC call header (RFC 5531 section 9). nullopt: not a call, or malformed; dropped.
std::optional<Call> ParseCall(std::span<const uint8_t> message) {
  XdrReader in(message);
  Call call;
  auto xid = in.U32();
  auto type = in.U32();
  auto rpcvers = in.U32();
  auto program = in.U32();
  auto version = in.U32();
  auto procedure = in.U32();
  auto cred_flavor = in.U32();
  if (!cred_flavor || *type != 0) return std::nullopt;
  auto cred_body = in.Opaque(kMaxAuth);
  auto verf_flavor = in.U32();
  auto verf_body = verf_flavor ? in.Opaque(kMaxAuth) : std::nullopt;
  if (!cred_body || !verf_body) return std::nullopt;
  call.rpc.xid = *xid;
  call.rpc_version = *rpcvers;
  call.rpc.program = *program;
  call.rpc.version = *version;
  call.rpc.procedure = *procedure;
  call.rpc.cred_flavor = *cred_flavor;
  call.rpc.cred_body = *cred_body;
  call.rpc.args = in.Rest();
  return call;
}

// An accepted reply with `accept_stat`; the caller appends the results for SUCCESS.
std::vector<uint8_t> AcceptedReply(uint32_t xid, uint32_t accept_stat) {
  std::vector<uint8_t> out;
  XdrWriter w(out);
  w.U32(xid);
  w.U32(1);  // REPLY
  w.U32(0);  // MSG_ACCEPTED
  w.U32(0);  // verifier: AUTH_NONE, empty
  w.U32(0);
  w.U32(accept_stat);
  return out;
}

// Sends one reply message; an empty one means "send nothing".
using ReplyFn = std::function<void(std::vector<uint8_t>)>;

// The host's server: its own program here, NLM and NSM in libnlockd. Runs on the io_context.
class Host {
 public:
  Host(asio::io_context& io, nlockd::LockService& locks) : io_(io), locks_(locks) {}

  // Answers one RPC message through `reply`, on the io_context's thread (perhaps before
  // returning). `message` need only live until this returns: libnlockd copies what it needs.
  void Serve(std::span<const uint8_t> message, nlockd::Transport transport, std::string_view peer,
             uint16_t port, ReplyFn reply) {
    std::optional<Call> call = ParseCall(message);
    if (!call || call->rpc_version != 2) return reply({});
    call->rpc.transport = transport;
    call->rpc.peer_address = peer;
    call->rpc.peer_port = port;
    const uint32_t program = call->rpc.program;
    if (program == nlockd::kNlmProgram || program == nlockd::kNsmProgram) {
      // The reply comes on libnlockd's executor: our io_context itself, made for one thread
      // (or a strand of it, were it run on several). dispatch runs it inline on that thread.
      locks_.HandleCall(
          call->rpc, [this, reply = std::move(reply)](nlockd::RpcReply answer) mutable {
            asio::dispatch(io_, [reply = std::move(reply), answer = std::move(answer)]() mutable {
              reply(answer.send ? std::move(answer.message) : std::vector<uint8_t>());
            });
          });
      return;
    }
    if (program != kFileProgram) return reply(AcceptedReply(call->rpc.xid, 1));  // PROG_UNAVAIL
    if (call->rpc.version != kFileVersion) {
      std::vector<uint8_t> out = AcceptedReply(call->rpc.xid, 2);  // PROG_MISMATCH
      XdrWriter w(out);
      w.U32(kFileVersion);
      w.U32(kFileVersion);
      return reply(std::move(out));
    }
    // Our own program's calls run as coroutines; they own a copy of what they read.
    asio::co_spawn(io_,
                   ServeFileProgram(call->rpc.xid, call->rpc.procedure,
                                    {call->rpc.args.begin(), call->rpc.args.end()}),
                   [reply = std::move(reply)](std::exception_ptr error, std::vector<uint8_t> out) {
                     reply(error ? std::vector<uint8_t>() : std::move(out));
                   });
  }

 private:
  asio::awaitable<std::vector<uint8_t>> ServeFileProgram(uint32_t xid, uint32_t procedure,
                                                         std::vector<uint8_t> args) {
    if (procedure == 0) co_return AcceptedReply(xid, 0);
    if (procedure != kLookup && procedure != kRemove) {
      co_return AcceptedReply(xid, 3);  // PROC_UNAVAIL
    }
    XdrReader in(args);
    auto name_bytes = in.Opaque(255);
    if (!name_bytes) co_return AcceptedReply(xid, 4);  // GARBAGE_ARGS
    const std::string name(name_bytes->begin(), name_bytes->end());
    const std::string fh = FileHandleOf(name);
    std::vector<uint8_t> out = AcceptedReply(xid, 0);
    XdrWriter w(out);
    if (procedure == kLookup) {
      w.String(fh);
      co_return out;
    }
    // The file is gone: so are the locks on it.
    nlockd::FileRelease released = co_await ReleaseFile(fh);
    std::printf("removed %s: released %zu lock owners, %zu shares, %zu waiters\n", name.c_str(),
                released.locks, released.shares, released.waiters);
    std::fflush(stdout);
    w.U32(static_cast<uint32_t>(released.locks));
    co_return out;
  }

  // LockService::ReleaseFile as an awaitable whose completion comes back to our io_context. A
  // plain function: the initiation lambda is not a temporary inside a co_await expression.
  asio::awaitable<nlockd::FileRelease> ReleaseFile(std::string fh) {
    return asio::async_initiate<decltype(asio::use_awaitable), void(nlockd::FileRelease)>(
        [this, fh = std::move(fh)](auto handler) {
          auto shared = std::make_shared<decltype(handler)>(std::move(handler));
          locks_.ReleaseFile(fh, [this, shared](nlockd::FileRelease release) {
            asio::post(io_, [shared, release] { std::move (*shared)(release); });
          });
        },
        asio::use_awaitable);
  }

  asio::io_context& io_;
  nlockd::LockService& locks_;
};

// One TCP connection: one read takes whatever the client sent (often several pipelined calls),
// each record in it is handed on from the read buffer, and the replies that are ready go out
// together in one write, in completion order. At kMaxCallsPerConnection calls whose replies are
// not yet written it stops handing on records and reading, until a write drains some
// (CallWindow).
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(tcp::socket socket, Host& host)
      : socket_(std::move(socket)),
        host_(host),
        room_(socket_.get_executor(), asio::steady_timer::time_point::max()),
        replies_ready_(socket_.get_executor(), asio::steady_timer::time_point::max()) {}

  asio::awaitable<void> Read() {
    auto self = shared_from_this();
    asio::error_code ec;
    const tcp::endpoint peer = socket_.remote_endpoint(ec);
    if (ec) co_return;
    const std::string peer_address = peer.address().to_string();
    asio::co_spawn(socket_.get_executor(), Write(self), asio::detached);
    RecordReader reader(kMaxRecord);
    for (;;) {
      const std::span<uint8_t> space = reader.Space();
      const size_t n = co_await socket_.async_read_some(
          asio::buffer(space.data(), space.size()), asio::redirect_error(asio::use_awaitable, ec));
      if (ec) break;
      reader.Filled(n);
      std::span<const uint8_t> record;
      RecordReader::Status status = RecordReader::Status::kNeedMore;
      while (socket_.is_open()) {
        if (window_.Full()) {
          // One thread: nothing answers between the check and the wait. A write that drains
          // the window, or one that fails, cancels the wait.
          co_await room_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
          continue;
        }
        status = reader.Next(record);
        if (status != RecordReader::Status::kRecord) break;
        window_.Opened();
        host_.Serve(record, nlockd::Transport::kTcp, peer_address, peer.port(),
                    [self](std::vector<uint8_t> reply) { self->Send(std::move(reply)); });
      }
      if (status == RecordReader::Status::kTooLarge || !socket_.is_open()) break;
    }
    socket_.close(ec);
    replies_ready_.cancel();  // the writer ends
  }

 private:
  // A reply with its record mark, written as two buffers.
  struct Outgoing {
    std::array<uint8_t, 4> mark;
    std::vector<uint8_t> message;
  };

  void Send(std::vector<uint8_t> reply) {
    if (reply.empty() || !socket_.is_open()) return Answered(1);
    const uint32_t mark = 0x80000000U | static_cast<uint32_t>(reply.size());
    outbox_.push_back({{static_cast<uint8_t>(mark >> 24), static_cast<uint8_t>(mark >> 16),
                        static_cast<uint8_t>(mark >> 8), static_cast<uint8_t>(mark)},
                       std::move(reply)});
    // The writer runs once the handlers ready now have run, so that the replies they finish
    // (the other calls of one read, say) go out in the same write.
    if (outbox_.size() == 1) replies_ready_.cancel();
  }

  // `n` calls are done with: wakes the reader if it waits for room.
  void Answered(size_t n) {
    if (window_.Answered(n)) room_.cancel();
  }

  // The connection's one writer, for its whole life: a coroutine per reply would cost a
  // co_spawn, a frame and a trip through the scheduler for every call. Writes whatever is
  // queued in one gathered write; ends when the socket closes.
  asio::awaitable<void> Write(std::shared_ptr<Connection> /*keep_alive*/) {
    std::vector<Outgoing> batch;
    std::vector<asio::const_buffer> buffers;
    asio::error_code ec;
    while (socket_.is_open()) {
      if (outbox_.empty()) {
        // Never expires: Send() cancels it when a reply is queued, Close() when the reader ends.
        co_await replies_ready_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
        continue;
      }
      batch.swap(outbox_);
      buffers.clear();
      for (const Outgoing& out : batch) {
        buffers.push_back(asio::buffer(out.mark));
        buffers.push_back(asio::buffer(out.message));
      }
      co_await asio::async_write(socket_, buffers, asio::redirect_error(asio::use_awaitable, ec));
      Answered(batch.size());
      batch.clear();
      if (ec) {
        // The client is gone: stop the reader, even if it waits for room.
        socket_.close(ec);
        room_.cancel();
        break;
      }
    }
    // Replies still queued, and those of calls still in flight (Send() sees the socket closed),
    // are counted as answered and dropped.
    Answered(std::exchange(outbox_, {}).size());
  }

  // Calls in flight per connection past which it is no longer read (as the daemon's rpc
  // server): bounds what a client that pipelines without reading its replies makes us hold.
  static constexpr size_t kMaxCallsPerConnection = 128;

  tcp::socket socket_;
  Host& host_;
  std::vector<Outgoing> outbox_;
  CallWindow window_{kMaxCallsPerConnection};
  // Never expires: the reader waits on it while the window is full; Answered() cancels it.
  asio::steady_timer room_;
  // Never expires: the writer waits on it while nothing is queued; Send() cancels it.
  asio::steady_timer replies_ready_;
};

asio::awaitable<void> AcceptLoop(tcp::acceptor& acceptor, Host& host) {
  for (;;) {
    asio::error_code ec;
    tcp::socket socket =
        co_await acceptor.async_accept(asio::redirect_error(asio::use_awaitable, ec));
    if (ec == asio::error::operation_aborted || !acceptor.is_open()) co_return;
    if (ec) continue;
    socket.set_option(tcp::no_delay(true), ec);
    auto connection = std::make_shared<Connection>(std::move(socket), host);
    asio::co_spawn(acceptor.get_executor(), connection->Read(), asio::detached);
  }
}

asio::awaitable<void> UdpLoop(udp::socket& socket, Host& host) {
  std::vector<uint8_t> buffer(65536);
  for (;;) {
    udp::endpoint sender;
    asio::error_code ec;
    size_t n = co_await socket.async_receive_from(asio::buffer(buffer), sender,
                                                  asio::redirect_error(asio::use_awaitable, ec));
    if (ec == asio::error::operation_aborted || !socket.is_open()) co_return;
    if (ec) continue;
    host.Serve(std::span(buffer.data(), n), nlockd::Transport::kUdp, sender.address().to_string(),
               sender.port(), [&socket, sender](std::vector<uint8_t> reply) {
                 if (reply.empty() || !socket.is_open()) return;
                 auto out = std::make_shared<std::vector<uint8_t>>(std::move(reply));
                 socket.async_send_to(asio::buffer(*out), sender,
                                      [out](const asio::error_code&, size_t) {});
               });
  }
}

int Run(int argc, char** argv) {
  Flags flags = ParseFlags(argc, argv);
  asio::io_context io(1);

  // The host's port: TCP and UDP on the same number.
  const auto address = asio::ip::make_address(flags.address);
  tcp::acceptor acceptor(io, tcp::endpoint(address, flags.port));
  const uint16_t port = acceptor.local_endpoint().port();
  udp::socket udp_socket(io, udp::endpoint(address, port));

  // libnlockd on the same io_context; it registers NLM and NSM with rpcbind at our port.
  flags.options.advertised_port = port;
  nlockd::LockService locks(flags.options, io);
  locks.SetEventHandlers(nlockd::EventHandlers{
      [](const nlockd::HostRebooted& event) {
        std::printf("event: host %s rebooted (state %d), %zu locks released\n", event.host.c_str(),
                    event.state, event.locks_released);
        std::fflush(stdout);
      },
      [](const nlockd::GraceStarted& event) {
        std::printf("event: grace started (%s) for %llds: %s\n",
                    event.mode == nlockd::GraceMode::kClassic ? "classic" : "fine-grained",
                    static_cast<long long>(event.duration.count()), event.reason.c_str());
        std::fflush(stdout);
      },
      [](const nlockd::GraceEnded& event) {
        std::printf("event: grace ended (%s)\n", event.reason.c_str());
        std::fflush(stdout);
      }});
  locks.Start();

  Host host(io, locks);
  asio::co_spawn(io, AcceptLoop(acceptor, host), asio::detached);
  asio::co_spawn(io, UdpLoop(udp_socket, host), asio::detached);
  std::printf("msg=\"embedded nlockd listening\" address=%s port=%u\n", flags.address.c_str(),
              port);
  std::fflush(stdout);

  asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](const asio::error_code& error, int) {
    if (error) return;
    // Stop taking calls, then let libnlockd finish its own and record a clean stop; the
    // io_context must keep running until it has.
    asio::error_code ignored;
    acceptor.close(ignored);
    udp_socket.close(ignored);
    locks.AsyncShutdown([&io] { io.stop(); });
  });
  io.run();
  std::printf("embedded nlockd stopped\n");
  return 0;
}

}  // namespace
}  // namespace example

int main(int argc, char** argv) {
  try {
    return example::Run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "embedded_server: %s\n", e.what());
    return 1;
  }
}
