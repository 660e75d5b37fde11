// SPDX-License-Identifier: Apache-2.0
// The public nlockd::LockService over server::Core: threads, executors and the conversions
// between the public plain types and the internal ones.
#include "nlockd/lock_service.hpp"

#include <atomic>
#include <chrono>
#include <exception>
#include <future>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include <asio/co_spawn.hpp>
#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/strand.hpp>
#include <spdlog/spdlog.h>

#include "admin/metrics.hpp"
#include "admin/router.hpp"
#include "base/describe.hpp"
#include "rpc/address.hpp"
#include "rpc/message.hpp"
#include "server/server.hpp"

namespace nlockd {

namespace {

// The reply header's fields a host needs besides the bytes.
void DescribeReply(RpcReply& reply) {
  rpc::DecodedReply decoded = rpc::DecodeReply(reply.message);
  if (!decoded.ok || decoded.reply_stat != rpc::ReplyStat::kMsgAccepted) return;
  reply.accept_stat = static_cast<uint32_t>(decoded.accept_stat);
  reply.results_offset = reply.message.size() - decoded.body.size();
}

// One call on the service's executor. `bytes` holds the credential body and then the
// arguments, copied out of the host's buffers; the header's fields are the call's own.
asio::awaitable<RpcReply> Serve(server::Core& core, rpc::CallContext context,
                                rpc::CallHeader header, std::vector<uint8_t> bytes,
                                size_t cred_size) {
  const std::span<const uint8_t> all(bytes);
  header.cred.body = all.first(cred_size);
  RpcReply reply;
  std::optional<rpc::TaskGate::Pass> pass = core.AdmitHostCall();
  if (!pass) co_return reply;
  reply.message.reserve(128);
  reply.send = co_await core.dispatcher().Dispatch(std::move(context), header,
                                                   all.subspan(cred_size), reply.message);
  if (reply.send) DescribeReply(reply);
  co_return reply;
}

// The caller's address, normalised, and its text as NLM keys hosts by. An IPv4 address that
// parsed is already in the canonical form (inet_pton takes no other), so its text is kept
// rather than printed again; others are printed. False if it is not an address. A host's calls
// mostly come from the few peers its connections serve, so the last text parsed on this thread
// is kept with its result: parsing cost a tenth of what the embedding adds to a call.
bool SetPeer(std::string_view text, rpc::CallContext& context) {
  struct ParsedPeer {
    std::string text;
    asio::ip::address address;  // Normalised.
    std::string peer;
  };
  thread_local ParsedPeer last;
  if (text.empty() || text != last.text) {
    asio::error_code ec;
    const asio::ip::address address = asio::ip::make_address(text, ec);
    if (ec) return false;
    last.text.assign(text);
    last.address = rpc::NormalizeAddress(address);
    if (address.is_v4()) {
      last.peer.assign(text);
    } else {
      last.peer = rpc::AddressToString(last.address);
    }
  }
  context.peer_address = last.address;
  context.peer = last.peer;
  return true;
}

// Whether the host made its io_context for one thread (`asio::io_context io(1)`): Asio's
// contract for that concurrency hint is that only one thread runs it, so its handlers never
// run at once and a strand would only add a queue to every hop.
bool RunsOnOneThread(asio::io_context& io) {
  return asio::use_service<asio::detail::scheduler>(io).concurrency_hint() ==
         ASIO_CONCURRENCY_HINT_1;
}

}  // namespace

std::string_view ToString(LockResult result) {
  switch (result) {
    case LockResult::kGranted:
      return "granted";
    case LockResult::kDenied:
      return "denied";
    case LockResult::kDeniedGrace:
      return "denied_grace";
    case LockResult::kNoResources:
      return "no_resources";
    case LockResult::kInvalidRange:
      return "invalid_range";
    case LockResult::kUnavailable:
      return "unavailable";
  }
  return "unknown";
}

class HaStatus::Impl {
 public:
  explicit Impl(std::string admin_token) : token_(std::move(admin_token)) {}

  void Set(const server::HaReport& report, std::chrono::seconds lease) {
    std::lock_guard lock(mutex_);
    state_.role = report.active ? HaRole::kActive : HaRole::kStandby;
    state_.holder = report.holder;
    state_.epoch = report.epoch;
    state_.lease = lease;
  }
  HaState Get() const {
    std::lock_guard lock(mutex_);
    return state_;
  }
  void SetReleaseHandler(std::function<void()> handler) {
    std::lock_guard lock(mutex_);
    release_handler_ = std::move(handler);
  }
  bool RequestRelease() {
    std::function<void()> handler;
    {
      std::lock_guard lock(mutex_);
      handler = release_handler_;
    }
    if (!handler) return false;
    handler();
    return true;
  }
  void HoldOffNextTakeover(std::chrono::milliseconds hold_off) {
    std::lock_guard lock(mutex_);
    hold_off_ = hold_off;
  }
  // What the next LockService built with this status links to its core: role reports, the
  // release handler and the hold-off (used once).
  server::HaLink Link(std::shared_ptr<HaStatus> owner, std::chrono::seconds lease) {
    server::HaLink link;
    link.on_report = [owner, lease](const server::HaReport& report) {
      owner->impl_->Set(report, lease);
    };
    link.request_release = [owner] { return owner->impl_->RequestRelease(); };
    std::lock_guard lock(mutex_);
    link.hold_off = std::exchange(hold_off_, std::chrono::milliseconds(0));
    return link;
  }
  AdminResponse Handle(const AdminRequest& request) const {
    const HaState state = Get();
    const admin::HaView view{state.role == HaRole::kActive, state.holder, state.epoch,
                             state.lease.count()};
    admin::HttpResponse answer = admin::StandbyResponse(
        {request.method, request.target, request.authorization, request.body}, view, metrics_,
        admin::RouterOptions{token_});
    return AdminResponse{answer.status, std::move(answer.content_type), std::move(answer.body),
                         std::move(answer.headers)};
  }

 private:
  const std::string token_;
  mutable std::mutex mutex_;
  HaState state_;                          // guarded by mutex_
  std::function<void()> release_handler_;  // guarded by mutex_
  std::chrono::milliseconds hold_off_{0};  // guarded by mutex_
  // The standby's own registry (build info and the HA gauges); the service has its own.
  mutable admin::Metrics metrics_;
};

HaStatus::HaStatus(std::string admin_token)
    : impl_(std::make_unique<Impl>(std::move(admin_token))) {}
HaStatus::~HaStatus() = default;
HaState HaStatus::Get() const { return impl_->Get(); }
void HaStatus::SetReleaseHandler(std::function<void()> handler) {
  impl_->SetReleaseHandler(std::move(handler));
}
void HaStatus::HoldOffNextTakeover(std::chrono::milliseconds hold_off) {
  impl_->HoldOffNextTakeover(hold_off);
}
AdminResponse HaStatus::HandleAdminRequest(const AdminRequest& request) const {
  return impl_->Handle(request);
}

class LockService::Impl {
 public:
  Impl(Options options, asio::io_context* host_io, server::HaLink ha_link = {})
      : options_token_(options.admin_token),
        own_io_(host_io == nullptr ? std::make_unique<asio::io_context>(1) : nullptr),
        io_(host_io == nullptr ? *own_io_ : *host_io),
        // Its own io_context runs on one thread: no strand needed. The host's may run on many,
        // unless it was made for one.
        executor_(own_io_ || RunsOnOneThread(io_) ? asio::any_io_executor(io_.get_executor())
                                                  : asio::any_io_executor(asio::make_strand(io_))),
        core_(std::make_unique<server::Core>(executor_, std::move(options), std::move(ha_link))) {
    admin_router_.emplace(core_->admin_backend(), core_->metrics(),
                          admin::RouterOptions{options_token_});
    // Its thread runs from the start, so that calls handed in before Start() are refused on
    // the executor like any other.
    if (own_io_) {
      work_.emplace(io_.get_executor());
      thread_ = std::thread([this] { io_.run(); });
    }
  }

  ~Impl() {
    Shutdown();
    // Its own thread keeps running after Shutdown(), refusing late calls, until now.
    work_.reset();
    if (thread_.joinable()) thread_.join();
    // The router refers into the core; the core is destroyed before the io_context, since what
    // it holds may name the io_context's services.
    admin_router_.reset();
    core_.reset();
  }

  server::Core& core() { return *core_; }
  const asio::any_io_executor& executor() const { return executor_; }

  void Start() {
    core_->Start();
    started_.store(true);
    // The rest of the start-up runs on the executor. With its own thread, Start() returns once
    // that is done (a no-op queued behind it marks the end); the host's io_context may not be
    // running yet, so there it finishes when the host runs it.
    if (own_io_) {
      std::promise<void> serving;
      asio::post(executor_, [&serving] { serving.set_value(); });
      serving.get_future().wait();
    }
  }

  // Waits for the executor unless an AsyncShutdown already finished (the host may have
  // stopped its io_context since).
  void Shutdown() {
    std::lock_guard lock(shutdown_mutex_);
    if (started_.load() && !stopped_.load()) {
      std::promise<void> done;
      AsyncShutdown([&done] { done.set_value(); });
      done.get_future().wait();
    }
  }

  void AsyncShutdown(std::function<void()> done) {
    if (!started_.load() || stopped_.load()) {
      if (done) done();
      return;
    }
    asio::co_spawn(executor_, core_->ShutDown(),
                   [this, done = std::move(done)](std::exception_ptr error) {
                     if (error) spdlog::error("nlockd: shutdown failed: {}", Describe(error));
                     stopped_.store(true);
                     if (done) done();
                   });
  }

  admin::Router& router() { return *admin_router_; }

 private:
  std::string options_token_;
  std::unique_ptr<asio::io_context> own_io_;
  asio::io_context& io_;
  asio::any_io_executor executor_;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work_;
  std::unique_ptr<server::Core> core_;
  std::optional<admin::Router> admin_router_;
  std::thread thread_;
  std::atomic<bool> started_{false};
  std::atomic<bool> stopped_{false};
  std::mutex shutdown_mutex_;
};

LockService::LockService(Options options)
    : impl_(std::make_unique<Impl>(std::move(options), nullptr)) {}

LockService::LockService(Options options, asio::io_context& io)
    : impl_(std::make_unique<Impl>(std::move(options), &io)) {}

LockService::LockService(Options options, std::shared_ptr<HaStatus> ha_status) {
  server::HaLink link = ha_status->impl_->Link(ha_status, options.ha_lease);
  impl_ = std::make_unique<Impl>(std::move(options), nullptr, std::move(link));
}

LockService::LockService(Options options, asio::io_context& io,
                         std::shared_ptr<HaStatus> ha_status) {
  server::HaLink link = ha_status->impl_->Link(ha_status, options.ha_lease);
  impl_ = std::make_unique<Impl>(std::move(options), &io, std::move(link));
}

LockService::~LockService() = default;

void LockService::SetEventHandlers(EventHandlers handlers) {
  impl_->core().set_events(std::move(handlers));
}

uint16_t LockService::Listen(const std::string& address, uint16_t port) {
  return impl_->core().Listen(address, port);
}

uint16_t LockService::Listen(const std::string& address, uint16_t port,
                             std::vector<uint32_t> programs) {
  if (programs.empty()) throw std::runtime_error("Listen: no program named");
  return impl_->core().Listen(address, port, std::move(programs));
}

uint16_t LockService::ListenOnSockets(int tcp_listen_fd, int udp_fd) {
  return impl_->core().ListenOnSockets(tcp_listen_fd, udp_fd);
}

void LockService::Start() { impl_->Start(); }

void LockService::Shutdown() { impl_->Shutdown(); }

bool LockService::WaitForRegistrations() {
  std::promise<bool> registered;
  asio::co_spawn(
      impl_->executor(), impl_->core().WaitForRegistrations(),
      [&registered](std::exception_ptr error, bool done) { registered.set_value(!error && done); });
  return registered.get_future().get();
}

void LockService::AsyncShutdown(std::function<void()> done) {
  impl_->AsyncShutdown(std::move(done));
}

void LockService::Reload(const Options& options) { impl_->core().Reload(options); }

void LockService::ReleaseNotificationHold() { impl_->core().ReleaseNotificationHold(); }

void LockService::HandleCall(const RpcCall& call, std::function<void(RpcReply)> done) {
  rpc::CallContext context;
  context.transport =
      call.transport == Transport::kTcp ? rpc::Transport::kTcp : rpc::Transport::kUdp;
  if (!SetPeer(call.peer_address, context)) {
    // Not an address: nothing can be bound to this caller. Dropped, as a malformed call is.
    asio::post(impl_->executor(), [done = std::move(done)] { done(RpcReply{}); });
    return;
  }
  context.peer_port = call.peer_port;
  if (!call.local_address.empty()) {
    asio::error_code ec;
    auto local = asio::ip::make_address(call.local_address, ec);
    if (!ec) context.local_address = rpc::NormalizeAddress(local);
  }
  context.local_port = call.local_port;
  // The header as the host read it; the dispatcher takes it without a round trip through XDR.
  rpc::CallHeader header;
  header.xid = call.xid;
  header.rpc_version = rpc::kRpcVersion;
  header.program = call.program;
  header.version = call.version;
  header.procedure = call.procedure;
  header.cred.flavor = call.cred_flavor;
  // The host's buffers may be reused once this returns: one copy of what the call points to.
  std::vector<uint8_t> bytes;
  bytes.reserve(call.cred_body.size() + call.args.size());
  bytes.insert(bytes.end(), call.cred_body.begin(), call.cred_body.end());
  bytes.insert(bytes.end(), call.args.begin(), call.args.end());
  asio::co_spawn(
      impl_->executor(),
      Serve(impl_->core(), std::move(context), header, std::move(bytes), call.cred_body.size()),
      [done = std::move(done)](std::exception_ptr error, RpcReply reply) {
        if (error) reply = RpcReply{};
        done(std::move(reply));
      });
}

std::vector<ProgramVersion> LockService::Programs() const {
  std::vector<ProgramVersion> out;
  for (auto [program, version] : impl_->core().ProgramVersions()) out.push_back({program, version});
  return out;
}

uint16_t LockService::port() const { return impl_->core().port(); }

Status LockService::GetStatus() {
  admin::StatusView view = impl_->core().admin_backend().Status();
  Status status;
  status.state_number = view.state_number;
  status.server_name = view.server_name;
  status.grace_active = view.grace.active;
  status.grace_mode = view.grace.mode;
  status.grace_seconds_left = view.grace.seconds_left;
  status.registrations = view.registrations;
  status.monitored_hosts = view.monitored_hosts;
  status.hosts = view.hosts;
  status.locks = view.locks;
  status.shares = view.shares;
  status.waiters = view.waiters;
  status.pending_grants = view.pending_grants;
  return status;
}

AdminResponse LockService::HandleAdminRequest(const AdminRequest& request) {
  admin::HttpRequest routed{request.method, request.target, request.authorization, request.body};
  admin::HttpResponse answer = impl_->router().Handle(routed);
  return AdminResponse{answer.status, std::move(answer.content_type), std::move(answer.body),
                       std::move(answer.headers)};
}

std::shared_ptr<prometheus::Registry> LockService::MetricsRegistry() {
  return impl_->core().metrics().shared_registry();
}

void LockService::RefreshMetrics() {
  impl_->core().metrics().Refresh(impl_->core().admin_backend().Status());
}

std::string LockService::MetricsText() {
  RefreshMetrics();
  return impl_->core().metrics().Serialize();
}

void LockService::FindConflicts(ConflictQuery query,
                                std::function<void(std::vector<HeldLock>)> done) {
  asio::post(impl_->executor(), [this, query = std::move(query), done = std::move(done)] {
    done(impl_->core().FindConflicts(query));
  });
}

void LockService::ReleaseFile(std::string file, std::function<void(FileRelease)> done) {
  asio::co_spawn(impl_->executor(), impl_->core().ReleaseFile(std::move(file)),
                 [done = std::move(done)](std::exception_ptr error, FileRelease release) {
                   if (error) release = FileRelease{};
                   done(release);
                 });
}

void LockService::Lock(LocalLockRequest request, std::function<void(LockAnswer)> done) {
  asio::co_spawn(impl_->executor(), impl_->core().LocalLock(std::move(request)),
                 [done = std::move(done)](std::exception_ptr error, LockAnswer answer) {
                   if (error) answer = LockAnswer{LockResult::kNoResources, std::nullopt};
                   done(std::move(answer));
                 });
}

void LockService::Test(LocalLockRequest request, std::function<void(LockAnswer)> done) {
  asio::post(impl_->executor(), [this, request = std::move(request), done = std::move(done)] {
    done(impl_->core().LocalTest(request));
  });
}

void LockService::Unlock(std::string file, LockOwner owner, ByteRange range,
                         std::function<void(LockResult)> done) {
  asio::co_spawn(impl_->executor(),
                 impl_->core().LocalUnlock(std::move(file), std::move(owner), range),
                 [done = std::move(done)](std::exception_ptr error, LockResult result) {
                   done(error ? LockResult::kNoResources : result);
                 });
}

void LockService::ReleaseHost(std::string host, std::function<void(size_t)> done) {
  asio::post(impl_->executor(), [this, host = std::move(host), done = std::move(done)] {
    done(impl_->core().ReleaseHost(host));
  });
}

}  // namespace nlockd
