// SPDX-License-Identifier: Apache-2.0
// The public API from inside the tree: what the examples and the out-of-tree consumer do not
// reach (sockets given by the host, several services in one process, the host's io_context
// run by several threads, calls refused before Start and after Shutdown, bad input).
#include "nlockd/lock_service.hpp"

#include <filesystem>
#include <fstream>
#include <future>
#include <stdexcept>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <asio/co_spawn.hpp>
#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>
#include <asio/use_awaitable.hpp>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "nlockd/asio.hpp"
#include "rpc/message.hpp"
#include "store/open_store.hpp"
#include "testutil/temp_dir.hpp"
#include "xdr/encoder.hpp"

namespace nlockd {
namespace {

Options MemoryOptions() {
  Options options;
  options.store = "memory:";
  options.grace = std::chrono::seconds(0);
  options.rpcbind_register = false;
  return options;
}

RpcCall NullCall(uint32_t program, uint32_t version) {
  RpcCall call;
  call.xid = 7;
  call.program = program;
  call.version = version;
  call.transport = Transport::kUdp;
  call.peer_address = "127.0.0.1";
  call.peer_port = 900;
  return call;
}

RpcReply Handle(LockService& service, const RpcCall& call) {
  std::promise<RpcReply> reply;
  service.HandleCall(call, [&reply](RpcReply r) { reply.set_value(std::move(r)); });
  return reply.get_future().get();
}

LockAnswer LockFor(LockService& service, const std::string& host) {
  std::promise<LockAnswer> answer;
  service.Lock({"fh", {host, 1, "oh"}, {0, 0}, true, false},
               [&answer](LockAnswer a) { answer.set_value(std::move(a)); });
  return answer.get_future().get();
}

// NLM4 LOCK (procedure 2) of the whole of file "fh" by svid 1, non-blocking, as its arguments.
std::vector<uint8_t> Nlm4LockArgs() {
  std::vector<uint8_t> args;
  xdr::Encoder enc(args);
  enc.Opaque(std::string_view("cookie"));
  enc.Bool(false);  // block
  enc.Bool(true);   // exclusive
  enc.String("client");
  enc.Opaque(std::string_view("fh"));
  enc.Opaque(std::string_view("oh"));
  enc.I32(1);       // svid
  enc.U64(0);       // l_offset
  enc.U64(0);       // l_len: to the end
  enc.Bool(false);  // reclaim
  enc.I32(1);       // state
  return args;
}

// The nlm4_stat of an nlm4_res reply (after the cookie "cookie"), or -1.
int64_t Nlm4Stat(const RpcReply& reply) {
  if (!reply.send || reply.accept_stat != 0u) return -1;
  // Cookie: length word and 6 bytes padded to 8.
  const size_t at = reply.results_offset + 4 + 8;
  if (reply.message.size() < at + 4) return -1;
  const uint8_t* p = reply.message.data() + at;
  return (int64_t{p[0]} << 24) | (int64_t{p[1]} << 16) | (int64_t{p[2]} << 8) | p[3];
}

std::vector<HeldLock> ConflictsOnFh(LockService& service) {
  std::promise<std::vector<HeldLock>> held;
  service.FindConflicts({"fh", {0, 0}, true, std::nullopt},
                        [&held](std::vector<HeldLock> h) { held.set_value(std::move(h)); });
  return held.get_future().get();
}

TEST(LockService, HandleCallCopiesTheCallBeforeItReturns) {
  LockService service(MemoryOptions());
  service.Start();
  rpc::AuthSys auth{1, "client", 1000, 100, {100, 4}};
  std::vector<uint8_t> cred;
  xdr::Encoder enc(cred);
  rpc::EncodeAuthSys(enc, auth);
  std::vector<uint8_t> args = Nlm4LockArgs();
  std::string peer = "192.0.2.7";
  RpcCall call = NullCall(kNlmProgram, 4);
  call.procedure = 2;  // LOCK
  call.cred_flavor = 1;
  call.cred_body = cred;
  call.args = args;
  call.peer_address = peer;
  std::promise<RpcReply> reply;
  service.HandleCall(call, [&reply](RpcReply r) { reply.set_value(std::move(r)); });
  // The host reuses its buffers at once.
  std::fill(cred.begin(), cred.end(), 0xff);
  std::fill(args.begin(), args.end(), 0xff);
  peer.assign(peer.size(), 'x');
  RpcReply answer = reply.get_future().get();
  EXPECT_EQ(Nlm4Stat(answer), 0) << "granted";
  EXPECT_EQ(answer.message.size() - answer.results_offset, 16u);  // cookie, stat
  std::vector<HeldLock> held = ConflictsOnFh(service);
  ASSERT_EQ(held.size(), 1u);
  EXPECT_EQ(held[0].owner.host, "192.0.2.7");
  EXPECT_EQ(held[0].owner.svid, 1);
  service.Shutdown();
}

TEST(LockService, CallersAreKnownByTheirNormalisedAddress) {
  for (auto [given, known] :
       {std::pair{"::ffff:192.0.2.9", "192.0.2.9"}, std::pair{"2001:DB8:0:0::7", "2001:db8::7"},
        std::pair{"10.1.2.3", "10.1.2.3"}}) {
    LockService service(MemoryOptions());
    service.Start();
    const std::vector<uint8_t> args = Nlm4LockArgs();
    RpcCall call = NullCall(kNlmProgram, 4);
    call.procedure = 2;
    call.args = args;
    call.peer_address = given;
    EXPECT_EQ(Nlm4Stat(Handle(service, call)), 0) << given;
    std::vector<HeldLock> held = ConflictsOnFh(service);
    ASSERT_EQ(held.size(), 1u) << given;
    EXPECT_EQ(held[0].owner.host, known);
    service.Shutdown();
  }
}

// Locks "fh" through AsyncHandleCall, records the reply and the thread it resumed on, then
// shuts the service down and stops `io`.
asio::awaitable<void> LockThroughAsio(asio::io_context& io, LockService& service,
                                      std::optional<RpcReply>& reply, std::thread::id& thread) {
  const std::vector<uint8_t> args = Nlm4LockArgs();
  RpcCall call = NullCall(kNlmProgram, 4);
  call.procedure = 2;
  call.args = args;
  reply = co_await AsyncHandleCall(service, call, asio::use_awaitable);
  thread = std::this_thread::get_id();
  service.AsyncShutdown([&io] { io.stop(); });
}

// On a host io_context made for one thread (no strand in between), the awaiting coroutine
// resumes on that thread with the reply.
TEST(LockService, AsyncHandleCallResumesTheAwaitingCoroutine) {
  asio::io_context io(1);
  LockService service(MemoryOptions(), io);
  service.Start();
  std::optional<RpcReply> reply;
  std::thread::id resumed_on;
  asio::co_spawn(io, LockThroughAsio(io, service, reply, resumed_on), [](std::exception_ptr error) {
    if (error) std::rethrow_exception(error);
  });
  io.run();
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(Nlm4Stat(*reply), 0);
  EXPECT_EQ(resumed_on, std::this_thread::get_id());
}

TEST(LockService, ServesNlmNullOnSocketsTheHostBound) {
  const int tcp = socket(AF_INET, SOCK_STREAM, 0);
  const int udp = socket(AF_INET, SOCK_DGRAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(tcp, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  socklen_t length = sizeof address;
  ASSERT_EQ(getsockname(tcp, reinterpret_cast<sockaddr*>(&address), &length), 0);
  ASSERT_EQ(listen(tcp, 16), 0);
  ASSERT_EQ(bind(udp, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);

  LockService service(MemoryOptions());
  EXPECT_EQ(service.ListenOnSockets(tcp, udp), ntohs(address.sin_port));
  service.Start();
  EXPECT_EQ(service.port(), ntohs(address.sin_port));

  // NLM4 NULL over UDP: xid, CALL, rpcvers 2, prog, vers, proc 0, AUTH_NONE cred and verifier.
  std::vector<uint32_t> words{99, 0, 2, kNlmProgram, 4, 0, 0, 0, 0, 0};
  for (uint32_t& word : words) word = htonl(word);
  const int client = socket(AF_INET, SOCK_DGRAM, 0);
  timeval timeout{10, 0};
  setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  ASSERT_EQ(sendto(client, words.data(), words.size() * 4, 0, reinterpret_cast<sockaddr*>(&address),
                   sizeof address),
            static_cast<ssize_t>(words.size() * 4));
  uint32_t reply[8] = {};
  ASSERT_EQ(recv(client, reply, sizeof reply, 0), 24);
  EXPECT_EQ(ntohl(reply[0]), 99u);  // xid
  EXPECT_EQ(ntohl(reply[5]), 0u);   // SUCCESS
  close(client);
  service.Shutdown();
}

TEST(LockService, ReleaseHostFindsTheHostWhateverTheCaseOfItsName) {
  LockService service(MemoryOptions());
  service.Start();
  ASSERT_EQ(LockFor(service, "Client-A.example").result, LockResult::kGranted);
  std::promise<size_t> released;
  service.ReleaseHost("CLIENT-a.EXAMPLE", [&released](size_t locks) { released.set_value(locks); });
  EXPECT_EQ(released.get_future().get(), 1u);
  EXPECT_EQ(LockFor(service, "someone-else").result, LockResult::kGranted) << "the lock is gone";
  service.Shutdown();
}

TEST(LockService, TwoServicesInOneProcessKeepTheirOwnLocks) {
  LockService a(MemoryOptions());
  LockService b(MemoryOptions());
  a.Start();
  b.Start();
  EXPECT_EQ(LockFor(a, "host-1").result, LockResult::kGranted);
  EXPECT_EQ(LockFor(b, "host-2").result, LockResult::kGranted);
  EXPECT_EQ(LockFor(a, "host-2").result, LockResult::kDenied);
  EXPECT_EQ(a.GetStatus().locks, 1u);
  EXPECT_EQ(b.GetStatus().locks, 1u);
}

TEST(LockService, RunsOnTheHostsIoContextWithSeveralThreads) {
  asio::io_context io;
  auto work = asio::make_work_guard(io);
  std::vector<std::thread> threads;
  for (int i = 0; i < 3; ++i) threads.emplace_back([&io] { io.run(); });
  {
    LockService service(MemoryOptions(), io);
    service.Start();
    std::vector<std::future<RpcReply>> replies;
    for (int i = 0; i < 32; ++i) {
      replies.push_back(std::async(
          std::launch::async, [&service] { return Handle(service, NullCall(kNsmProgram, 1)); }));
    }
    for (auto& reply : replies) {
      RpcReply r = reply.get();
      EXPECT_TRUE(r.send);
      EXPECT_EQ(r.accept_stat, 0u);
    }
    service.Shutdown();
  }
  work.reset();
  for (auto& thread : threads) thread.join();
}

TEST(LockService, RefusesCallsItCannotServe) {
  LockService service(MemoryOptions());
  // Not started: nothing is answered (the client retransmits).
  EXPECT_FALSE(Handle(service, NullCall(kNlmProgram, 4)).send);
  service.Start();
  RpcCall bad_peer = NullCall(kNlmProgram, 4);
  bad_peer.peer_address = "not an address";
  EXPECT_FALSE(Handle(service, bad_peer).send);
  RpcReply mismatch = Handle(service, NullCall(kNlmProgram, 2));
  EXPECT_TRUE(mismatch.send);
  EXPECT_EQ(mismatch.accept_stat, 2u);  // PROG_MISMATCH
  RpcCall bad_cred = NullCall(kNsmProgram, 1);
  bad_cred.cred_flavor = 1;  // AUTH_SYS with an empty body
  RpcReply denied = Handle(service, bad_cred);
  EXPECT_TRUE(denied.send);
  EXPECT_FALSE(denied.accept_stat.has_value());  // MSG_DENIED, AUTH_ERROR
  service.Shutdown();
  service.Shutdown();  // idempotent
  EXPECT_FALSE(Handle(service, NullCall(kNlmProgram, 4)).send);
  EXPECT_EQ(LockFor(service, "host").result, LockResult::kUnavailable);
}

TEST(LockService, ReportsGraceAndTheAdminApiWithoutHttp) {
  Options options = MemoryOptions();
  options.grace = std::chrono::seconds(60);
  LockService service(options);
  std::promise<GraceStarted> started;
  std::promise<GraceEnded> ended_event;
  service.SetEventHandlers({nullptr, [&started](const GraceStarted& e) { started.set_value(e); },
                            [&ended_event](const GraceEnded& e) { ended_event.set_value(e); }});
  service.Start();
  // A memory store proves nothing about earlier locks: classic grace.
  EXPECT_EQ(started.get_future().get().mode, GraceMode::kClassic);
  EXPECT_EQ(LockFor(service, "host").result, LockResult::kDeniedGrace);
  AdminResponse ended = service.HandleAdminRequest({"POST", "/api/v1/grace/end", "", ""});
  EXPECT_EQ(ended.status, 200) << ended.body;
  auto f = ended_event.get_future();
  EXPECT_EQ(f.wait_for(std::chrono::seconds(0)), std::future_status::ready);
  EXPECT_EQ(f.get().reason, "admin");
  EXPECT_EQ(LockFor(service, "host").result, LockResult::kGranted);
  EXPECT_EQ(service.HandleAdminRequest({"GET", "/api/v1/nothing", "", ""}).status, 404);
}

// A NULL call over UDP to 127.0.0.1:port; the reply's accept_stat, or -1 without a reply.
int UdpNull(uint16_t port, uint32_t program, uint32_t version) {
  std::vector<uint32_t> words{42, 0, 2, program, version, 0, 0, 0, 0, 0};
  for (uint32_t& word : words) word = htonl(word);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(port);
  const int client = socket(AF_INET, SOCK_DGRAM, 0);
  timeval timeout{10, 0};
  setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  sendto(client, words.data(), words.size() * 4, 0, reinterpret_cast<sockaddr*>(&address),
         sizeof address);
  uint32_t reply[8] = {};
  const ssize_t got = recv(client, reply, sizeof reply, 0);
  close(client);
  return got >= 24 ? static_cast<int>(ntohl(reply[5])) : -1;
}

TEST(LockService, ServesOnlyTheProgramsItIsToldTo) {
  Options options = MemoryOptions();
  options.serve_nlm = false;  // In place of rpc.statd beside a kernel lockd.
  options.grace = std::chrono::seconds(60);
  LockService service(options);
  service.Start();
  EXPECT_FALSE(service.GetStatus().grace_active) << "no locks, no grace";
  options.grace = std::chrono::seconds(0);
  std::vector<ProgramVersion> programs = service.Programs();
  ASSERT_EQ(programs.size(), 1u);
  EXPECT_EQ(programs[0].program, kNsmProgram);
  EXPECT_EQ(Handle(service, NullCall(kNlmProgram, 4)).accept_stat, 1u);  // PROG_UNAVAIL
  EXPECT_EQ(Handle(service, NullCall(kNsmProgram, 1)).accept_stat, 0u);
  service.Shutdown();

  options.serve_nlm = true;
  options.serve_nsm = false;
  LockService nlm_only(options);
  nlm_only.Start();
  EXPECT_EQ(Handle(nlm_only, NullCall(kNsmProgram, 1)).accept_stat, 1u);
  EXPECT_EQ(Handle(nlm_only, NullCall(kNlmProgram, 4)).accept_stat, 0u);
  nlm_only.Shutdown();

  options.serve_nlm = false;
  EXPECT_THROW(LockService{options}, std::runtime_error);
}

TEST(LockService, NsmOnAListenerOfItsOwn) {
  LockService service(MemoryOptions());
  const uint16_t nlm_port = service.Listen("127.0.0.1", 0, {kNlmProgram});
  const uint16_t nsm_port = service.Listen("127.0.0.1", 0, {kNsmProgram});
  service.Start();
  ASSERT_NE(nlm_port, nsm_port);
  EXPECT_EQ(service.port(), nlm_port);
  EXPECT_EQ(UdpNull(nlm_port, kNlmProgram, 4), 0);
  EXPECT_EQ(UdpNull(nlm_port, kNsmProgram, 1), 1);  // PROG_UNAVAIL
  EXPECT_EQ(UdpNull(nsm_port, kNsmProgram, 1), 0);
  EXPECT_EQ(UdpNull(nsm_port, kNlmProgram, 4), 1);
  service.Shutdown();

  Options nsm_only = MemoryOptions();
  nsm_only.serve_nlm = false;
  LockService statd(nsm_only);
  EXPECT_THROW(statd.Listen("127.0.0.1", 0, {kNlmProgram}), std::runtime_error);
}

// A new SQLite store (NSM only) on a host where rpc.statd left `statd_state` in its state file
// (NLOCKD_STATD_STATE_FILE), on boot `boot_id` (NLOCKD_BOOT_ID); both variables are unset and
// the files removed at the end.
class NewStoreBesideStatd {
 public:
  // Throws (failing the test at once) when rpc.statd's file cannot be written.
  NewStoreBesideStatd(int32_t statd_state, const char* boot_id) {
    // rpc.statd's file: one host-order int32.
    std::ofstream state(state_file(), std::ios::binary);
    state.write(reinterpret_cast<const char*>(&statd_state), sizeof statd_state);
    state.close();
    if (!state) throw std::runtime_error("cannot write " + state_file());
    setenv("NLOCKD_STATD_STATE_FILE", state_file().c_str(), 1);
    setenv("NLOCKD_BOOT_ID", boot_id, 1);
    options_ = MemoryOptions();
    options_.serve_nlm = false;
    options_.store = "sqlite:" + db();
  }
  ~NewStoreBesideStatd() {
    unsetenv("NLOCKD_BOOT_ID");
    unsetenv("NLOCKD_STATD_STATE_FILE");
  }
  NewStoreBesideStatd(const NewStoreBesideStatd&) = delete;
  NewStoreBesideStatd& operator=(const NewStoreBesideStatd&) = delete;

  const Options& options() const { return options_; }
  std::string db() const { return dir_.path() + "/nlockd.db"; }

 private:
  std::string state_file() const { return dir_.path() + "/statd-state"; }

  testutil::TempDir dir_{"statd-store"};
  Options options_;
};

TEST(LockService, ANewStoreContinuesFromRpcStatdsStateNumber) {
  NewStoreBesideStatd host(41, "statd-state-boot-1");
  {
    LockService service(host.options());
    service.Start();
    // Peers knew the host at 41: our first notification must be newer.
    EXPECT_EQ(service.GetStatus().state_number, 43);
  }
  {
    LockService again(host.options());  // Restarted on the same boot: the number stays.
    again.Start();
    EXPECT_EQ(again.GetStatus().state_number, 43);
  }
  setenv("NLOCKD_BOOT_ID", "statd-state-boot-2", 1);
  {
    LockService rebooted(host.options());  // Not a new store: its own number goes on.
    rebooted.Start();
    EXPECT_EQ(rebooted.GetStatus().state_number, 45);
  }
}

// The SQLite store's state history (one row per state written), read after the service closed
// it.
size_t StateHistoryRows(const std::string& db_path) {
  return store::OpenStore("sqlite:" + db_path, store::StoreOptions{})->StateHistory().size();
}

// A server whose statd has rebooted for years: its state is passed in one synced write, not one
// per odd number on the way (75,001 here).
TEST(LockService, ANewStoreJumpsPastALargeRpcStatdStateInOneWrite) {
  NewStoreBesideStatd host(150'000, "statd-jump-boot-1");  // statd came up with 150,001
  {
    LockService service(host.options());
    service.Start();
    EXPECT_EQ(service.GetStatus().state_number, 150'003);
  }
  // The first bump (1), the jump (150,003), the clean stop (150,004).
  EXPECT_EQ(StateHistoryRows(host.db()), 3U);
}

}  // namespace
}  // namespace nlockd
