// SPDX-License-Identifier: Apache-2.0
#include "bench/load/load_generator.hpp"

#include <algorithm>
#include <deque>
#include <unordered_map>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/steady_timer.hpp>
#include <asio/write.hpp>
#include <fmt/format.h>

#include "rpc/message.hpp"
#include "rpc/record_marking.hpp"
#include "rpc/use_tuple.hpp"

namespace nlockd::bench {

namespace {

using Clock = std::chrono::steady_clock;
using rpc::kUseTuple;

// Latencies of the calls that completed in the measured window, counted per microsecond up to
// 100 ms (above that each is kept). No memory is allocated while the load runs: a vector of
// every sample, growing by doubling, once copied 64 MB in the middle of a minute's run and
// showed the copy as a 10-50 ms stall of the server.
class LatencyCounts {
 public:
  LatencyCounts() : counts_(kBuckets, 0) { over_.reserve(4096); }
  void Add(uint32_t us) {
    ++total_;
    if (us < kBuckets) {
      ++counts_[us];
    } else {
      over_.push_back(us);
    }
  }
  uint64_t total() const { return total_; }
  // The latency at rank p * total (as a sorted list of every sample would give).
  double Percentile(double p) {
    if (total_ == 0) return 0;
    const uint64_t rank =
        std::min(total_ - 1, static_cast<uint64_t>(p * static_cast<double>(total_)));
    uint64_t seen = 0;
    for (uint32_t us = 0; us < kBuckets; ++us) {
      seen += counts_[us];
      if (seen > rank) return us;
    }
    std::sort(over_.begin(), over_.end());
    return over_[rank - seen];
  }
  double Max() {
    if (!over_.empty()) return *std::max_element(over_.begin(), over_.end());
    for (uint32_t us = kBuckets; us > 0; --us) {
      if (counts_[us - 1] > 0) return us - 1;
    }
    return 0;
  }

 private:
  static constexpr uint32_t kBuckets = 100'000;
  std::vector<uint64_t> counts_;
  std::vector<uint32_t> over_;
  uint64_t total_ = 0;
};

struct Shared {
  Workload& workload;
  const LoadOptions& options;
  Clock::time_point measure_from;
  Clock::time_point stop_at;
  LatencyCounts latencies_us;
  uint64_t errors = 0;
  uint64_t timeouts = 0;
  size_t live_connections = 0;
  uint64_t sent = 0;
};

// One connection: lanes queue calls, one writer sends them, one reader hands replies back.
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(asio::io_context& io, Shared& shared, size_t index)
      : socket_(io), shared_(shared), index_(index), writer_signal_(io) {}

  asio::awaitable<void> Run(std::shared_ptr<Connection> self);

 private:
  struct Pending {
    std::unique_ptr<asio::steady_timer> signal;
    std::vector<uint8_t> reply;
    bool done = false;
  };

  asio::awaitable<void> Lane(std::shared_ptr<Connection> self, size_t lane);
  asio::awaitable<void> Reader(std::shared_ptr<Connection> self);
  asio::awaitable<void> Writer(std::shared_ptr<Connection> self);
  // Ends the connection (once): counts an error, wakes every lane, closes the socket.
  void Break();

  asio::ip::tcp::socket socket_;
  Shared& shared_;
  size_t index_;
  uint32_t next_xid_ = 1;
  std::unordered_map<uint32_t, Pending*> pending_;
  std::deque<std::vector<uint8_t>> outbox_;
  asio::steady_timer writer_signal_;
  bool broken_ = false;
  size_t lanes_running_ = 0;
};

asio::awaitable<void> Connection::Run(std::shared_ptr<Connection> self) {
  asio::ip::tcp::endpoint target(shared_.options.target, shared_.options.port);
  asio::error_code ec;
  socket_.open(target.protocol(), ec);
  if (shared_.options.distinct_sources) {
    auto source =
        asio::ip::make_address_v4(0x7f010000u + static_cast<uint32_t>((index_ / 250) << 8) +
                                  static_cast<uint32_t>(index_ % 250 + 1));
    socket_.bind({source, 0}, ec);
  }
  // A server that never completes the handshake (its SYNs dropped) would hold the run for the
  // kernel's connect timeout, minutes.
  asio::steady_timer connect_deadline(socket_.get_executor());
  connect_deadline.expires_after(shared_.options.call_timeout);
  connect_deadline.async_wait([this, self](asio::error_code timer_ec) {
    if (timer_ec) return;  // connected (or failed) first
    ++shared_.timeouts;
    asio::error_code ignored;
    socket_.close(ignored);
  });
  auto [connect_ec] = co_await socket_.async_connect(target, kUseTuple);
  connect_deadline.cancel();
  if (connect_ec || ec) {
    ++shared_.errors;
    co_return;
  }
  socket_.set_option(asio::ip::tcp::no_delay(true));
  ++shared_.live_connections;
  asio::co_spawn(socket_.get_executor(), Reader(self), asio::detached);
  asio::co_spawn(socket_.get_executor(), Writer(self), asio::detached);
  lanes_running_ = shared_.options.pipeline;
  for (size_t lane = 0; lane < shared_.options.pipeline; ++lane) {
    asio::co_spawn(socket_.get_executor(), Lane(self, lane), asio::detached);
  }
}

asio::awaitable<void> Connection::Lane(std::shared_ptr<Connection> /*keep_alive*/, size_t lane) {
  Pending pending;
  pending.signal = std::make_unique<asio::steady_timer>(socket_.get_executor());
  for (uint64_t seq = 0; !broken_ && Clock::now() < shared_.stop_at; ++seq) {
    if (shared_.options.max_calls != 0 && shared_.sent >= shared_.options.max_calls) break;
    ++shared_.sent;
    CallSpec call = shared_.workload.Next(index_, lane, seq);
    uint32_t xid = next_xid_++;
    std::vector<uint8_t> request;
    size_t mark = rpc::BeginRecord(request);
    xdr::Encoder enc(request);
    rpc::EncodeCallHeader(enc, xid, call.program, call.version, call.procedure);
    request.insert(request.end(), call.args.begin(), call.args.end());
    rpc::FinishRecord(request, mark);

    pending.done = false;
    pending_[xid] = &pending;
    auto sent = Clock::now();
    outbox_.push_back(std::move(request));
    writer_signal_.cancel();
    const auto deadline = sent + shared_.options.call_timeout;
    while (!pending.done && !broken_) {
      if (Clock::now() >= deadline) {
        ++shared_.timeouts;
        Break();
        break;
      }
      pending.signal->expires_at(deadline);
      co_await pending.signal->async_wait(kUseTuple);
    }
    pending_.erase(xid);
    if (broken_) break;
    auto now = Clock::now();
    rpc::DecodedReply reply = rpc::DecodeReply(pending.reply);
    bool ok = reply.ok && reply.reply_stat == rpc::ReplyStat::kMsgAccepted &&
              reply.accept_stat == rpc::AcceptStat::kSuccess &&
              shared_.workload.Check(call, reply.body);
    if (sent >= shared_.measure_from && now <= shared_.stop_at) {
      if (ok) {
        shared_.latencies_us.Add(static_cast<uint32_t>(
            std::chrono::duration_cast<std::chrono::microseconds>(now - sent).count()));
      } else {
        ++shared_.errors;
      }
    }
  }
  if (--lanes_running_ == 0) {
    asio::error_code ignored;
    socket_.close(ignored);
    writer_signal_.cancel();
  }
}

asio::awaitable<void> Connection::Writer(std::shared_ptr<Connection> /*keep_alive*/) {
  std::vector<std::vector<uint8_t>> batch;
  std::vector<asio::const_buffer> buffers;
  while (socket_.is_open()) {
    if (outbox_.empty()) {
      writer_signal_.expires_at(Clock::time_point::max());
      co_await writer_signal_.async_wait(kUseTuple);
      continue;
    }
    batch.clear();
    buffers.clear();
    while (!outbox_.empty()) {
      batch.push_back(std::move(outbox_.front()));
      outbox_.pop_front();
      buffers.push_back(asio::buffer(batch.back()));
    }
    auto [ec, n] = co_await asio::async_write(socket_, buffers, kUseTuple);
    if (ec) break;
  }
}

asio::awaitable<void> Connection::Reader(std::shared_ptr<Connection> /*keep_alive*/) {
  rpc::RecordAssembler assembler(1 << 20);
  std::vector<std::vector<uint8_t>> records;
  std::vector<uint8_t> buffer(64 * 1024);
  for (;;) {
    auto [ec, n] = co_await socket_.async_read_some(asio::buffer(buffer), kUseTuple);
    if (ec) break;
    if (assembler.Feed(std::span(buffer.data(), n), records) != rpc::RecordAssembler::Status::kOk) {
      break;
    }
    for (auto& record : records) {
      rpc::DecodedReply header = rpc::DecodeReply(record);
      auto it = pending_.find(header.xid);
      if (it == pending_.end()) continue;
      it->second->reply = std::move(record);
      it->second->done = true;
      it->second->signal->cancel();
    }
    records.clear();
  }
  if (lanes_running_ > 0) Break();
  --shared_.live_connections;
}

void Connection::Break() {
  if (broken_) return;
  broken_ = true;
  ++shared_.errors;
  for (auto& [xid, pending] : pending_) pending->signal->cancel();
  asio::error_code ignored;
  socket_.close(ignored);
  writer_signal_.cancel();
}

}  // namespace

std::string FixedWorkload::name() const {
  return fmt::format("prog {} vers {} proc {}", spec_.program, spec_.version, spec_.procedure);
}

LoadResult RunLoad(const LoadOptions& options, Workload& workload) {
  asio::io_context io(1);
  Shared shared{workload, options, {}, {}, {}, 0, 0, 0, 0};
  auto start = Clock::now();
  shared.measure_from = start + options.warmup;
  shared.stop_at = shared.measure_from + options.duration;
  for (size_t i = 0; i < options.connections; ++i) {
    auto connection = std::make_shared<Connection>(io, shared, i);
    asio::co_spawn(io, connection->Run(connection), asio::detached);
  }
  io.run();
  LoadResult result;
  result.calls = shared.latencies_us.total();
  result.errors = shared.errors;
  result.timeouts = shared.timeouts;
  result.seconds = std::chrono::duration<double>(options.duration).count();
  result.calls_per_second = static_cast<double>(result.calls) / result.seconds;
  result.p50_us = shared.latencies_us.Percentile(0.50);
  result.p90_us = shared.latencies_us.Percentile(0.90);
  result.p99_us = shared.latencies_us.Percentile(0.99);
  result.p999_us = shared.latencies_us.Percentile(0.999);
  result.max_us = shared.latencies_us.Max();
  return result;
}

std::string FormatResult(const LoadOptions& options, const std::string& workload,
                         const LoadResult& result) {
  return fmt::format(
      "{:<28} C={:<3} P={:<3} {:>10.0f} calls/s  p50 {:>6.0f} us  p99 {:>6.0f} us  "
      "p99.9 {:>6.0f} us  errors {}{}{}",
      workload, options.connections, options.pipeline, result.calls_per_second, result.p50_us,
      result.p99_us, result.p999_us, result.errors,
      result.timeouts > 0 ? fmt::format(" ({} connections timed out)", result.timeouts) : "",
      options.distinct_sources ? "  (one host per connection)" : "");
}

std::string ResultJson(const LoadOptions& options, const std::string& workload,
                       const LoadResult& result) {
  return fmt::format(
      R"({{"workload":"{}","connections":{},"pipeline":{},"distinct_sources":{},)"
      R"("calls":{},"errors":{},"timeouts":{},"seconds":{:.3f},"calls_per_second":{:.1f},)"
      R"("p50_us":{:.0f},"p90_us":{:.0f},"p99_us":{:.0f},"p999_us":{:.0f},"max_us":{:.0f}}})",
      workload, options.connections, options.pipeline, options.distinct_sources, result.calls,
      result.errors, result.timeouts, result.seconds, result.calls_per_second, result.p50_us,
      result.p90_us, result.p99_us, result.p999_us, result.max_us);
}

}  // namespace nlockd::bench
