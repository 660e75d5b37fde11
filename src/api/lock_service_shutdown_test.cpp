// SPDX-License-Identifier: Apache-2.0
// Shutdown under load, through the public API: NLM calls in flight on several connections, a
// notification round in flight to a peer that never answers, and a store that hangs (its SQLite
// file locked by another connection), all at once. Shutdown must end within its bounds, and
// nothing answered may be lost: the next start has every lock whose LOCK was answered and none
// whose UNLOCK was. Run under ASan in the suite and under TSan for the threads.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <future>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sqlite3.h>
#include <sys/socket.h>
#include <unistd.h>

#include "nlockd/lock_service.hpp"
#include "rpc/wait_bounds.hpp"
#include "testutil/captured_log.hpp"
#include "testutil/loopback_socket.hpp"
#include "testutil/raw_tcp_connection.hpp"
#include "testutil/temp_dir.hpp"
#include "xdr/encoder.hpp"

namespace nlockd {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

constexpr uint32_t kLock = 2;
constexpr uint32_t kUnlock = 4;
constexpr uint32_t kGranted = 0;

// A UDP socket on loopback that reads what it is sent and never answers: the peers'
// portmapper for the notification round. Counts the datagrams, so a test can wait for an
// attempt to be in flight.
class SilentPeer {
 public:
  SilentPeer() {
    const testutil::LoopbackSocket bound = testutil::BindLoopback(SOCK_DGRAM);
    fd_ = bound.fd;
    port_ = bound.port;
    reader_ = std::thread([this] {
      char buffer[2048];
      while (!stop_) {
        pollfd ready{fd_, POLLIN, 0};
        if (poll(&ready, 1, 50) <= 0) continue;
        if (recv(fd_, buffer, sizeof buffer, 0) > 0) {
          std::lock_guard lock(mu_);
          ++received_;
          cv_.notify_all();
        }
      }
    });
  }
  ~SilentPeer() {
    stop_ = true;
    reader_.join();
    close(fd_);
  }
  uint16_t port() const { return port_; }
  // Waits until more than `seen` datagrams have come; returns the count.
  int WaitBeyond(int seen, std::chrono::seconds bound) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, bound, [&] { return received_ > seen; });
    return received_;
  }

 private:
  int fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  int received_ = 0;  // guarded by mu_
  std::thread reader_;
};

// The answers the load's connections got, counted together, for a test to wait on.
class AnswerCount {
 public:
  void Add() {
    std::lock_guard lock(mu_);
    ++count_;
    cv_.notify_all();
  }
  uint64_t value() {
    std::lock_guard lock(mu_);
    return count_;
  }
  // Waits until at least `count` answers came, at most `bound`; true if they did.
  bool WaitFor(uint64_t count, std::chrono::seconds bound) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, bound, [&] { return count_ >= count; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t count_ = 0;  // guarded by mu_
};

// What a lane of the load knows of its range once the load ends.
enum class LaneState { kFree, kHeld, kUnknown };

// One TCP connection to the service's NLM listener with `lanes` calls in flight, each lane
// taking and releasing its own one-byte range of file "fh" (NLM4 LOCK, UNLOCK, caller
// 127.0.0.1, so that the host is monitored by its address). Runs until the connection closes.
class LoadConnection {
 public:
  LoadConnection(uint16_t port, size_t first_lane, size_t lanes, AnswerCount& answers)
      : connection_(port),
        first_lane_(first_lane),
        held_(lanes, false),
        in_flight_(lanes, false),
        answers_(answers) {
    EXPECT_TRUE(connection_.connected());
    thread_ = std::thread([this] { Run(); });
  }
  ~LoadConnection() {
    if (thread_.joinable()) thread_.join();
  }
  LoadConnection(const LoadConnection&) = delete;
  LoadConnection& operator=(const LoadConnection&) = delete;

  void Join() { thread_.join(); }
  // After Join: each lane's range as the answers it got say it must be after a restart.
  LaneState state(size_t lane) const {
    if (in_flight_[lane]) return LaneState::kUnknown;
    return held_[lane] ? LaneState::kHeld : LaneState::kFree;
  }

 private:
  static std::vector<uint8_t> Call(uint32_t xid, uint32_t procedure, uint64_t offset) {
    std::vector<uint8_t> out;
    xdr::Encoder enc(out);
    enc.U32(0);  // record mark, filled in below
    enc.U32(xid);
    enc.U32(0);  // CALL
    enc.U32(2);
    enc.U32(kNlmProgram);
    enc.U32(4);
    enc.U32(procedure);
    enc.U32(0);  // AUTH_NONE credential
    enc.U32(0);
    enc.U32(0);  // and verifier
    enc.U32(0);
    enc.Opaque(std::string_view("ck"));
    if (procedure == kLock) {
      enc.Bool(false);  // block
      enc.Bool(true);   // exclusive
    }
    enc.String("127.0.0.1");
    enc.Opaque(std::string_view("fh"));
    enc.Opaque(std::string_view("oh"));
    enc.I32(static_cast<int32_t>(offset));  // svid: an owner per lane
    enc.U64(offset);
    enc.U64(1);
    if (procedure == kLock) {
      enc.Bool(false);  // reclaim
      enc.I32(1);       // state
    }
    const uint32_t mark = htonl(0x80000000u | static_cast<uint32_t>(out.size() - 4));
    std::memcpy(out.data(), &mark, 4);
    return out;
  }

  bool Send(size_t lane) {
    const uint32_t xid = next_xid_++;
    xid_lane_[xid] = lane;
    in_flight_[lane] = true;
    const std::vector<uint8_t> call = Call(xid, held_[lane] ? kUnlock : kLock, first_lane_ + lane);
    return connection_.Send(
        std::string_view(reinterpret_cast<const char*>(call.data()), call.size()));
  }

  static uint32_t Word(const uint8_t* p) {
    uint32_t word;
    std::memcpy(&word, p, 4);
    return ntohl(word);
  }

  void Run() {
    for (size_t lane = 0; lane < held_.size(); ++lane) {
      if (!Send(lane)) return;
    }
    for (;;) {
      uint8_t mark[4];
      if (!connection_.ReadExactly(mark, 4)) return;
      std::vector<uint8_t> reply(Word(mark) & 0x7fffffffu);
      if (reply.size() < 36 || !connection_.ReadExactly(reply.data(), reply.size())) return;
      // xid, REPLY, MSG_ACCEPTED, verifier (AUTH_NONE), SUCCESS, cookie "ck" (4 + 4), stat.
      const auto found = xid_lane_.find(Word(reply.data()));
      if (found == xid_lane_.end() || Word(reply.data() + 20) != 0) return;
      const size_t lane = found->second;
      xid_lane_.erase(found);
      in_flight_[lane] = false;
      if (Word(reply.data() + 32) == kGranted) held_[lane] = !held_[lane];
      answers_.Add();
      if (!Send(lane)) return;
    }
  }

  testutil::RawTcpConnection connection_;
  const size_t first_lane_;
  uint32_t next_xid_ = 1;
  std::map<uint32_t, size_t> xid_lane_;
  std::vector<bool> held_;  // The last answer granted a LOCK (not undone by an UNLOCK).
  std::vector<bool> in_flight_;
  AnswerCount& answers_;
  std::thread thread_;
};

// An SQLite connection that holds the store's file locked (BEGIN EXCLUSIVE) until Release:
// nlockd's writes wait for it, as on a disk that stopped answering.
class StoreLocker {
 public:
  explicit StoreLocker(const std::string& path) {
    EXPECT_EQ(sqlite3_open(path.c_str(), &db_), SQLITE_OK);
    sqlite3_busy_timeout(db_, 10'000);
    EXPECT_EQ(sqlite3_exec(db_, "BEGIN EXCLUSIVE", nullptr, nullptr, nullptr), SQLITE_OK)
        << sqlite3_errmsg(db_);
  }
  ~StoreLocker() { Release(); }
  void Release() {
    if (db_ == nullptr) return;
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    sqlite3_close(db_);
    db_ = nullptr;
  }

 private:
  sqlite3* db_ = nullptr;
};

bool Holds(LockService& service, uint64_t offset) {
  std::promise<std::vector<HeldLock>> held;
  service.FindConflicts({"fh", {offset, 1}, true, std::nullopt},
                        [&held](std::vector<HeldLock> h) { held.set_value(std::move(h)); });
  return !held.get_future().get().empty();
}

TEST(LockServiceShutdown, UnderLoadWithNotificationsInFlightAndAHungStoreLosesNothing) {
  testutil::TempDir dir("shutdown-load");
  const std::string db = dir.path() + "/nlockd.db";
  SilentPeer peer;
  Options options;
  options.store = "sqlite:" + db;
  options.grace = std::chrono::seconds(60);
  options.rpcbind_register = false;
  options.notify_rpcbind_port = peer.port();
  setenv("NLOCKD_BOOT_ID", "shutdown-load-boot", 1);

  // A first run monitors 127.0.0.1 (the load's caller), so that every later start owes it a
  // notification.
  {
    LockService first(options);
    const uint16_t port = first.Listen("127.0.0.1", 0);
    first.Start();
    AnswerCount answers;
    LoadConnection one(port, 1'000, 1, answers);
    ASSERT_TRUE(answers.WaitFor(1, std::chrono::seconds(30)));
    first.Shutdown();
  }

  constexpr size_t kConnections = 6;
  constexpr size_t kLanes = 8;
  AnswerCount answers;
  std::vector<std::unique_ptr<LoadConnection>> load;
  std::chrono::milliseconds shutdown_took{};
  testutil::CapturedLog log;
  const auto hung_from = Clock::now();
  {
    LockService service(options);
    const uint16_t port = service.Listen("127.0.0.1", 0);
    service.Start();
    // The restart round's first attempt is out and will not be answered.
    ASSERT_GT(peer.WaitBeyond(0, std::chrono::seconds(20)), 0) << "no notification in flight";
    for (size_t c = 0; c < kConnections; ++c) {
      load.push_back(std::make_unique<LoadConnection>(port, c * kLanes, kLanes, answers));
    }
    ASSERT_TRUE(answers.WaitFor(2'000, std::chrono::seconds(30))) << "the load did not get going";
    // The store stops answering; calls go on being answered from the lock log meanwhile.
    StoreLocker hung(db);
    ASSERT_TRUE(answers.WaitFor(answers.value() + 2'000, std::chrono::seconds(30)))
        << "calls stopped being answered while the store hung";
    const auto began = Clock::now();
    service.Shutdown();
    shutdown_took = std::chrono::duration_cast<milliseconds>(Clock::now() - began);
    for (auto& connection : load) connection->Join();
    hung.Release();
  }
  // A store that fails at the end marks the run as cut short and the shutdown goes on.
  EXPECT_EQ(log.Count("shutdown failed"), 0u);
  EXPECT_EQ(log.Count("cannot mark the shutdown clean"), 1u);
  // The failed writes are logged at the limiter's rate (a burst of 10, then 1 a second), not
  // once each.
  const auto hung_for = std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - hung_from);
  EXPECT_LE(log.Count("applying a logged lock-table write failed"),
            10u + static_cast<size_t>(hung_for.count()) + 1u);
  // Every bound of the shutdown together, and two of the store's busy waits (5 s each: the
  // transaction in flight, whose failure fails the writes queued behind it untried, then the
  // clean-shutdown mark): a shutdown past that hung on something unbounded.
  EXPECT_LT(shutdown_took, rpc::kCoreTasksBound + rpc::kRpcDrainBound + rpc::kHostCallsBound +
                               rpc::kGraceTasksBound + options.nsm_callback_timeout +
                               rpc::kShutdownMargin + std::chrono::seconds(10))
      << "shutdown took " << shutdown_took.count() << " ms";

  // Nothing answered is lost: the next start restores exactly what the answers said.
  {
    LockService again(options);
    again.Start();
    int held = 0;
    for (size_t c = 0; c < load.size(); ++c) {
      for (size_t lane = 0; lane < kLanes; ++lane) {
        const LaneState expected = load[c]->state(lane);
        if (expected == LaneState::kUnknown) continue;
        const uint64_t offset = c * kLanes + lane;
        EXPECT_EQ(Holds(again, offset), expected == LaneState::kHeld)
            << "connection " << c << " lane " << lane;
        if (expected == LaneState::kHeld) ++held;
      }
    }
    RecordProperty("locks_restored", held);
    again.Shutdown();
  }
  unsetenv("NLOCKD_BOOT_ID");
}

}  // namespace
}  // namespace nlockd
