// SPDX-License-Identifier: Apache-2.0
#include "nsm/service.hpp"

#include <algorithm>
#include <exception>
#include <map>
#include <set>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>
#include <spdlog/spdlog.h>

#include "base/describe.hpp"
#include "base/logging.hpp"
#include "nsm/notify_targets.hpp"
#include "rpc/address.hpp"
#include "rpc/use_tuple.hpp"
#include "rpc/wait_bounds.hpp"
#include "store/async_write.hpp"
#include "store/write_op.hpp"

namespace nlockd::nsm {

namespace {

const char* ProcedureName(SmProc procedure) {
  static constexpr const char* kNames[] = {"SM_NULL",      "SM_STAT",       "SM_MON",   "SM_UNMON",
                                           "SM_UNMON_ALL", "SM_SIMU_CRASH", "SM_NOTIFY"};
  return kNames[procedure];
}

store::MyId ToStore(const my_id& id) {
  return store::MyId{id.my_name, id.my_prog, id.my_vers, id.my_proc};
}

// Runs the blocking BumpState (after the hook's BeforeStateBump, if any) on `pool` and hands the
// new state (or the failure) back.
template <typename Token>
auto AsyncBumpState(asio::thread_pool& pool, store::Store& store, RestartHook* hook, int32_t from,
                    Token&& token) {
  return asio::async_initiate<Token, void(std::exception_ptr, int32_t)>(
      [&pool, &store, hook, from](auto handler) {
        auto executor = asio::get_associated_executor(handler);
        auto shared = std::make_shared<decltype(handler)>(std::move(handler));
        asio::post(pool, [shared, executor, &store, hook, from] {
          std::exception_ptr error;
          int32_t state = 0;
          try {
            if (hook != nullptr) hook->BeforeStateBump(store::NextOddState(from));
            state = store.BumpState();
          } catch (...) {
            error = std::current_exception();
          }
          asio::post(executor, [shared, error, state]() mutable { (*shared)(error, state); });
        });
      },
      token);
}

}  // namespace

bool PrintableName(const std::string& name) {
  for (char c : name) {
    if (c < 0x20 || c > 0x7e) return false;
  }
  return true;
}

std::string CallerEndpoint(const rpc::CallContext& context) {
  const std::string address = rpc::AddressToString(context.peer_address);
  const std::string port = std::to_string(context.peer_port);
  return context.peer_address.is_v6() ? "[" + address + "]:" + port : address + ":" + port;
}

bool FromReservedPort(const rpc::CallContext& context) { return context.peer_port < 1024; }

bool MadeFromReservedPort(const store::Registration& registration) {
  const std::string& source = registration.source_address;
  // "a.b.c.d:port" or "[v6]:port"; a bare address (no port recorded) is not known to be
  // unprivileged.
  const size_t colon = source.rfind(':');
  const bool has_port =
      colon != std::string::npos &&
      (source.front() == '[' ? colon > 0 && source[colon - 1] == ']' : source.find(':') == colon);
  if (!has_port) return true;
  const std::string port = source.substr(colon + 1);
  if (port.empty() || port.size() > 5 ||
      port.find_first_not_of("0123456789") != std::string::npos) {
    return true;
  }
  return std::stoi(port) < 1024;
}

NsmService::NsmService(asio::any_io_executor executor, store::Store& store, StatusCaller& caller,
                       LocalStatusReceiver& local, NsmOptions options, NameResolver* resolver,
                       const Clock* clock)
    : executor_(executor),
      store_(store),
      caller_(caller),
      local_(local),
      resolver_(resolver),
      clock_(clock != nullptr ? *clock : steady_clock_),
      options_(std::move(options)),
      registry_(options_.max_registrations),
      gate_(executor, "nsm") {}

NsmService::~NsmService() { worker_.join(); }

void NsmService::SetCallerRules(const NsmOptions& options) {
  options_.allowlist = options.allowlist;
  options_.callback_programs = options.callback_programs;
  options_.check_notifier_address = options.check_notifier_address;
  options_.protect_privileged_registrations = options.protect_privileged_registrations;
  options_.simu_crash_interval = options.simu_crash_interval;
}

void NsmService::Load(int32_t state, const std::vector<store::Registration>& registrations) {
  state_ = state;
  registry_.Clear();
  // Each peer's newest persisted state (its registrations may have been written at different
  // times), so that a replayed SM_NOTIFY is still recognised after a restart.
  std::map<std::string, int32_t> peer_states;
  for (const auto& registration : registrations) {
    if (registration.peer_state == 0) continue;
    auto [known, added] = peer_states.try_emplace(registration.mon_name, registration.peer_state);
    if (!added && StateIsNewer(registration.peer_state, known->second)) {
      known->second = registration.peer_state;
    }
  }
  for (const auto& registration : registrations) {
    if (registry_.Put(registration) == Registry::PutResult::kFull) {
      spdlog::warn("nsm registration limit {} reached while loading; {} dropped from memory",
                   registry_.limit(), registrations.size() - registry_.size());
      break;
    }
    // nlockd's own registrations keep the client's address in source_address.
    if (IsLocalNlmId(registration.my_id)) {
      registry_.AddPeerAddress(registration.mon_name, registration.source_address);
    }
  }
  for (const auto& [mon_name, peer_state] : peer_states) {
    const int32_t known = registry_.StateOf(mon_name);
    if (known == 0 || StateIsNewer(peer_state, known)) registry_.SetPeerState(mon_name, peer_state);
  }
}

bool NsmService::CallerAllowed(const rpc::CallContext& context, SmProc procedure) {
  if (rpc::IsLoopback(context.peer_address) ||
      options_.allowlist.contains(rpc::AddressToString(context.peer_address))) {
    return true;
  }
  ++stats_.refused[procedure];
  context.result = "denied";  // The result label of nsm_requests_total.
  refused_log_.Log(spdlog::level::warn, "nsm {} from {} refused: not loopback or on the allowlist",
                   ProcedureName(procedure), context.peer);
  return false;
}

bool NsmService::MayChange(const rpc::CallContext& context, const store::Registration& registration,
                           SmProc procedure) {
  if (!options_.protect_privileged_registrations || FromReservedPort(context) ||
      !MadeFromReservedPort(registration)) {
    return true;
  }
  ++stats_.privilege_refusals;
  context.result = "denied";
  refused_log_.Log(spdlog::level::warn,
                   "nsm {} mon_name={} my_name={} from {} refused: the registration was made "
                   "from a reserved port, the call comes from port {}",
                   ProcedureName(procedure), LogValue(registration.mon_name),
                   LogValue(registration.my_id.my_name), context.peer, context.peer_port);
  return false;
}

bool NsmService::Valid(const std::string& mon_name, const my_id& id, std::string_view procedure) {
  const char* problem = nullptr;
  if (mon_name.empty() || id.my_name.empty()) {
    problem = "empty mon_name or my_name";
  } else if (!PrintableName(mon_name) || !PrintableName(id.my_name)) {
    problem = "unprintable mon_name or my_name";
  } else if (IsLocalNlmId(ToStore(id))) {
    problem = "my_id reserved for nlockd's own NLM";
  }
  if (problem) {
    ++stats_.invalid_arguments;
    invalid_log_.Log(spdlog::level::warn, "nsm {} refused: {}", procedure, problem);
    return false;
  }
  return true;
}

asio::awaitable<std::exception_ptr> NsmService::Persist(std::function<void(store::Done)> write) {
  std::vector<store::Write> writes{std::move(write)};
  co_return co_await Persist(std::move(writes));
}

asio::awaitable<std::exception_ptr> NsmService::Persist(std::vector<store::Write> writes) {
  auto [error] = co_await store::AsyncWrite(std::move(writes), rpc::kUseTuple);
  co_return error;
}

asio::awaitable<bool> NsmService::PutRegistration(store::Registration registration) {
  // The row carries what is known of its peer, so that an update does not forget it.
  if (registration.peer_state == 0) {
    registration.peer_state = registry_.StateOf(registration.mon_name);
  }
  std::optional<store::Registration> before;
  if (const auto* existing = registry_.Find(registration.mon_name, registration.my_id)) {
    before = *existing;
  }
  // The store stamps its own copy; the one in memory (the admin API lists it) gets the same
  // meaning: created at the first SM_MON, updated at this one.
  const auto now = std::chrono::floor<std::chrono::microseconds>(std::chrono::system_clock::now());
  registration.updated = now;
  registration.created = before ? before->created : now;
  // Applied before it is durable so that concurrent SM_MONs count against the limit; undone if
  // the write fails. A callback that matches it meanwhile is harmless.
  if (registry_.Put(registration) == Registry::PutResult::kFull) {
    ++stats_.registrations_over_limit;
    spdlog::warn("nsm registration limit {} reached; not monitoring mon_name={}", registry_.limit(),
                 LogValue(registration.mon_name));
    co_return false;
  }
  // Named, not a temporary argument: docs/decisions/0001-toolchain-pitfalls.md, item 1.
  std::function<void(store::Done)> write = [this, registration](store::Done done) {
    store_.PutRegistration(registration, std::move(done));
  };
  std::exception_ptr error = co_await Persist(std::move(write));
  if (!error) co_return true;
  ++stats_.store_failures;
  spdlog::error("nsm cannot persist registration mon_name={}: {}", LogValue(registration.mon_name),
                Describe(error));
  if (before) {
    registry_.Put(*before);
  } else {
    registry_.Remove(registration.mon_name, registration.my_id);
  }
  co_return false;
}

sm_stat_res NsmService::Stat(const rpc::CallContext&, const sm_name&) {
  ++stats_.succeeded[SM_STAT];
  return sm_stat_res{stat_succ, state_};
}

asio::awaitable<sm_stat_res> NsmService::Mon(const rpc::CallContext& context, mon args) {
  const mon_id& id = args.mon_id_;
  if (!CallerAllowed(context, SM_MON)) co_return sm_stat_res{stat_fail, -1};
  bool ok = Valid(id.mon_name, id.my_id_, "SM_MON");
  if (ok && !options_.callback_programs.contains(id.my_id_.my_prog)) {
    ++stats_.invalid_arguments;
    invalid_log_.Log(spdlog::level::warn,
                     "nsm SM_MON mon_name={} refused: callback program {} not allowed",
                     LogValue(id.mon_name), id.my_id_.my_prog);
    ok = false;
  }
  bool news = true;  // not an identical repeat
  if (ok) {
    if (const auto* existing = registry_.Find(id.mon_name, ToStore(id.my_id_))) {
      ok = MayChange(context, *existing, SM_MON);
      news = existing->priv != args.priv;
    }
  }
  if (ok) {
    store::Registration registration;
    registration.mon_name = id.mon_name;
    registration.my_id = ToStore(id.my_id_);
    registration.priv = args.priv;
    registration.source_address = CallerEndpoint(context);
    ok = co_await PutRegistration(std::move(registration));
  }
  if (!ok) {
    ++stats_.failed[SM_MON];
    co_return sm_stat_res{stat_fail, -1};  // nfs-utils answers -1 with stat_fail.
  }
  ++stats_.succeeded[SM_MON];
  if (events_ != nullptr && news) events_->ClientAdded(id.mon_name, id.my_id_.my_name);
  spdlog::debug("nsm monitoring mon_name={} for {}/{}/{}/{}", LogValue(id.mon_name),
                id.my_id_.my_name, id.my_id_.my_prog, id.my_id_.my_vers, id.my_id_.my_proc);
  co_return sm_stat_res{stat_succ, state_};
}

asio::awaitable<sm_stat> NsmService::Unmon(const rpc::CallContext& context, mon_id args) {
  if (!CallerAllowed(context, SM_UNMON)) co_return sm_stat{state_};
  store::MyId id = ToStore(args.my_id_);
  const store::Registration* existing = registry_.Find(args.mon_name, id);
  if (IsLocalNlmId(id) || existing == nullptr || !MayChange(context, *existing, SM_UNMON)) {
    ++stats_.failed[SM_UNMON];
    co_return sm_stat{state_};
  }
  registry_.Remove(args.mon_name, id);
  if (events_ != nullptr) events_->ClientRemoved(args.mon_name, args.my_id_.my_name);
  std::function<void(store::Done)> write = [this, args, id](store::Done done) {
    store_.RemoveRegistration(args.mon_name, id, std::move(done));
  };
  std::exception_ptr error = co_await Persist(std::move(write));
  if (error) {
    ++stats_.store_failures;
    spdlog::error("nsm cannot persist SM_UNMON mon_name={}: {}", LogValue(args.mon_name),
                  Describe(error));
  }
  ++stats_.succeeded[SM_UNMON];
  co_return sm_stat{state_};
}

asio::awaitable<bool> NsmService::RemoveRegistration(std::string mon_name, store::MyId id) {
  if (!registry_.Remove(mon_name, id)) co_return false;
  std::function<void(store::Done)> write = [this, mon_name, id](store::Done done) {
    store_.RemoveRegistration(mon_name, id, std::move(done));
  };
  std::exception_ptr error = co_await Persist(std::move(write));
  if (error) {
    ++stats_.store_failures;
    std::rethrow_exception(error);
  }
  spdlog::info("nsm registration removed by the admin API mon_name={} my_name={}",
               LogValue(mon_name), LogValue(id.my_name));
  co_return true;
}

asio::awaitable<sm_stat> NsmService::UnmonAll(const rpc::CallContext& context, my_id args) {
  if (!CallerAllowed(context, SM_UNMON_ALL)) co_return sm_stat{state_};
  store::MyId id = ToStore(args);
  if (IsLocalNlmId(id)) {
    ++stats_.failed[SM_UNMON_ALL];
    co_return sm_stat{state_};
  }
  size_t removed = 0;
  std::vector<store::Write> writes;
  if (!options_.protect_privileged_registrations || FromReservedPort(context)) {
    if (events_ != nullptr) {
      for (const auto& registration : registry_.All()) {
        if (registration.my_id == id) events_->ClientRemoved(registration.mon_name, args.my_name);
      }
    }
    removed = registry_.RemoveAllOf(id);
    writes.emplace_back(
        [this, id](store::Done done) { store_.RemoveRegistrationsOf(id, std::move(done)); });
  } else {
    // From an unreserved port: only the registrations made from one go.
    size_t kept = 0;
    for (const auto& registration : registry_.All()) {
      if (!(registration.my_id == id)) continue;
      if (MadeFromReservedPort(registration)) {
        ++kept;
        continue;
      }
      registry_.Remove(registration.mon_name, id);
      if (events_ != nullptr) events_->ClientRemoved(registration.mon_name, args.my_name);
      ++removed;
      writes.emplace_back([this, mon_name = registration.mon_name, id](store::Done done) {
        store_.RemoveRegistration(mon_name, id, std::move(done));
      });
    }
    if (kept != 0) {
      ++stats_.privilege_refusals;
      refused_log_.Log(spdlog::level::warn,
                       "nsm SM_UNMON_ALL my_name={} from {} port {}: {} registrations made from a "
                       "reserved port kept",
                       LogValue(args.my_name), context.peer, context.peer_port, kept);
    }
  }
  std::exception_ptr error;
  if (!writes.empty()) error = co_await Persist(std::move(writes));
  if (error) {
    ++stats_.store_failures;
    spdlog::error("nsm cannot persist SM_UNMON_ALL my_name={}: {}", LogValue(args.my_name),
                  Describe(error));
  }
  ++stats_.succeeded[SM_UNMON_ALL];
  spdlog::debug("nsm SM_UNMON_ALL my_name={} removed={}", LogValue(args.my_name), removed);
  co_return sm_stat{state_};
}

asio::awaitable<int32_t> NsmService::BumpStateOffThread() {
  auto [error, state] =
      co_await AsyncBumpState(worker_, store_, restart_hook_, state_, rpc::kUseTuple);
  if (error) std::rethrow_exception(error);
  co_return state;
}

bool NsmService::SimuCrashAllowed(const rpc::CallContext& context) {
  if (!CallerAllowed(context, SM_SIMU_CRASH)) return false;
  if (!FromReservedPort(context)) {
    ++stats_.privilege_refusals;
    ++stats_.refused[SM_SIMU_CRASH];
    context.result = "denied";
    refused_log_.Log(spdlog::level::warn,
                     "nsm SM_SIMU_CRASH from {} port {} refused: not a reserved port", context.peer,
                     context.peer_port);
    return false;
  }
  const Clock::time_point now = clock_.Now();
  if (simu_crash_running_ ||
      (last_simu_crash_ && now - *last_simu_crash_ < options_.simu_crash_interval)) {
    ++stats_.simu_crash_limited;
    ++stats_.failed[SM_SIMU_CRASH];
    context.result = "limited";
    simu_crash_log_.Log(spdlog::level::warn,
                        "nsm SM_SIMU_CRASH from {} ignored: at most one per {}s, state stays {}",
                        context.peer, options_.simu_crash_interval.count(), state_);
    return false;
  }
  last_simu_crash_ = now;
  return true;
}

asio::awaitable<void> NsmService::SimuCrash(const rpc::CallContext& context) {
  if (!SimuCrashAllowed(context)) co_return;
  int32_t state = 0;
  simu_crash_running_ = true;
  // Owed before the bump, as at start-up: a restart after it, on this boot, still announces it.
  if (std::vector<store::NotifyOwed> rows = UnannouncedOwedRows(MonitoredTargets(registry_));
      !rows.empty()) {
    if (std::exception_ptr error = co_await Persist([this, &rows](store::Done done) {
          store_.PutNotifyOwed(std::move(rows), std::move(done));
        })) {
      simu_crash_running_ = false;
      ++stats_.store_failures;
      ++stats_.failed[SM_SIMU_CRASH];
      spdlog::error("nsm SM_SIMU_CRASH cannot record the hosts to notify: {}", Describe(error));
      co_return;
    }
  }
  try {
    state = co_await BumpStateOffThread();
  } catch (const std::exception& e) {
    simu_crash_running_ = false;
    ++stats_.store_failures;
    ++stats_.failed[SM_SIMU_CRASH];
    spdlog::error("nsm SM_SIMU_CRASH cannot move the state number: {}", e.what());
    co_return;
  }
  simu_crash_running_ = false;
  state_ = state;
  ++stats_.succeeded[SM_SIMU_CRASH];
  spdlog::info("nsm SM_SIMU_CRASH: state={}; notifying {} monitored hosts", state_,
               registry_.peer_count());
  if (restart_hook_) restart_hook_->Restarted(state_);
}

void NsmService::Notify(const rpc::CallContext& context, const stat_chge& args) {
  std::string source = rpc::AddressToString(context.peer_address);
  // As rpc.statd reports it: before the monitor list is consulted.
  if (events_ != nullptr) events_->NotifyReceived(args.mon_name, source, args.state);
  std::vector<Registry::Peer> peers = registry_.Match(args.mon_name, source);
  if (peers.empty()) {
    // A peer registered by address (as Linux's lockd registers its clients) may notify with its
    // host name from another of its addresses. Only then is the name looked up, in the
    // background: the common path stays free of lookups.
    if (resolver_ && registry_.peer_count() != 0 && !NormalizedAddressLiteral(args.mon_name) &&
        notify_lookups_ < kMaxNotifyLookups) {
      if (gate_.Spawn("SM_NOTIFY name lookup", [&] { return MatchByResolvedName(args, source); })) {
        ++notify_lookups_;
        return;
      }
    }
    NotMonitored(args, source);
    return;
  }
  ++stats_.succeeded[SM_NOTIFY];
  for (const auto& peer : peers) {
    if (!options_.check_notifier_address || peer.addresses.contains(source)) {
      HostRebooted(peer, args, source);
      continue;
    }
    // A host registered by name: its addresses come from a lookup, in the background.
    if (resolver_ && !NormalizedAddressLiteral(peer.name)) {
      gate_.Spawn("monitored host lookup", [&] { return CheckByName(peer.name, args, source); });
      continue;
    }
    RejectAddress(peer.name, args, source);
  }
}

void NsmService::NotMonitored(const stat_chge& args, const std::string& source) {
  ++stats_.notify_not_monitored;
  ++stats_.failed[SM_NOTIFY];
  notify_ignored_log_.Log(spdlog::level::info,
                          "nsm SM_NOTIFY mon_name={} state={} from {} ignored: not monitored",
                          LogValue(args.mon_name), args.state, source);
}

void NsmService::RejectAddress(const std::string& peer, const stat_chge& args,
                               const std::string& source) {
  ++stats_.notify_wrong_address;
  notify_rejected_log_.Log(spdlog::level::warn,
                           "nsm SM_NOTIFY mon_name={} state={} from {} rejected: not an address of "
                           "monitored host {}",
                           LogValue(args.mon_name), args.state, source, peer);
}

asio::awaitable<void> NsmService::CheckByName(std::string peer_name, stat_chge args,
                                              std::string source) {
  // The peer's own name, in the lookups kept apart from those of unmatched notifications.
  std::vector<std::string> addresses =
      co_await resolver_->Resolve(peer_name, LookupFor::kMonitoredHost);
  for (const auto& address : addresses) registry_.AddPeerAddress(peer_name, address);
  // The registry may have changed while we waited: look the peer up again.
  for (const auto& peer : registry_.Match(peer_name, "")) {
    if (FoldName(peer.name) != FoldName(peer_name)) continue;
    if (peer.addresses.contains(source)) {
      HostRebooted(peer, args, source);
    } else {
      RejectAddress(peer.name, args, source);
    }
  }
}

asio::awaitable<void> NsmService::MatchByResolvedName(stat_chge args, std::string source) {
  std::vector<std::string> addresses;
  try {
    addresses = co_await resolver_->Resolve(args.mon_name, LookupFor::kNotifierName);
  } catch (const std::exception& e) {
    notify_lookup_log_.Log(spdlog::level::warn, "nsm cannot look up SM_NOTIFY mon_name={}: {}",
                           LogValue(args.mon_name), e.what());
  }
  --notify_lookups_;
  // The registry may have changed while we waited: match now. Each peer once.
  std::vector<Registry::Peer> peers;
  std::set<std::string> seen;
  for (const auto& address : addresses) {
    for (auto& peer : registry_.Match(address, "")) {
      if (seen.insert(FoldName(peer.name)).second) peers.push_back(std::move(peer));
    }
  }
  if (peers.empty()) {
    NotMonitored(args, source);
    co_return;
  }
  ++stats_.succeeded[SM_NOTIFY];
  const bool from_the_name =
      std::find(addresses.begin(), addresses.end(), source) != addresses.end();
  for (const auto& peer : peers) {
    if (options_.check_notifier_address && !from_the_name) {
      RejectAddress(peer.name, args, source);
      continue;
    }
    notify_lookup_log_.Log(
        spdlog::level::info,
        "nsm SM_NOTIFY mon_name={} from {}: the name resolves to an address of {}",
        LogValue(args.mon_name), source, peer.name);
    HostRebooted(peer, args, source);
  }
}

void NsmService::HostRebooted(const Registry::Peer& peer, const stat_chge& args,
                              const std::string& source) {
  if (peer.state && !StateIsNewer(args.state, *peer.state)) {
    ++stats_.notify_replayed;
    notify_ignored_log_.Log(spdlog::level::info,
                            "nsm SM_NOTIFY mon_name={} state={} from {} ignored: host {} is at "
                            "state {}",
                            LogValue(args.mon_name), args.state, source, peer.name, *peer.state);
    return;
  }
  ++stats_.crashes_detected;
  spdlog::info("nsm host {} rebooted: SM_NOTIFY mon_name={} state={} from {}; {} callbacks",
               peer.name, LogValue(args.mon_name), args.state, source, peer.registrations.size());
  // Copied out first: the registry may change under the callbacks.
  std::vector<std::pair<store::MyId, StatusCallback>> callbacks;
  for (const auto* registration : peer.registrations) {
    callbacks.emplace_back(registration->my_id,
                           StatusCallback{registration->mon_name, args.state, registration->priv});
  }
  registry_.SetPeerState(peer.name, args.state);
  PersistPeerState(peer, args.state);
  for (auto& [target, body] : callbacks) {
    if (IsLocalNlmId(target)) {
      ++stats_.callbacks_local;
      local_.HostRebooted(body.mon_name, body.state);
      continue;
    }
    if (!options_.callback_programs.contains(target.my_prog)) {
      ++stats_.callbacks_refused;
      spdlog::warn("nsm status callback for {} to program {} refused: not allowed", body.mon_name,
                   target.my_prog);
      continue;
    }
    // Not once shutting down.
    // Init-captures, not [&]: clang 14 (the tidy gate's) cannot capture a structured binding.
    if (!gate_.Spawn("status callback",
                     [this, target = std::move(target), body = std::move(body)]() mutable {
                       return SendCallback(std::move(target), std::move(body));
                     })) {
      return;
    }
  }
}

void NsmService::PersistPeerState(const Registry::Peer& peer, int32_t state) {
  // Not awaited: the host's state is released either way; a lost write only means a replay of
  // this notification after a restart is taken as news (the source address is still checked).
  for (const store::Registration* registration : peer.registrations) {
    store::Registration row = *registration;
    row.peer_state = state;
    store_.PutRegistration(std::move(row), [mon_name = peer.name](std::exception_ptr error) {
      if (error) spdlog::warn("nsm cannot persist the new state of {}", mon_name);
    });
  }
}

asio::awaitable<void> NsmService::SendCallback(store::MyId target, StatusCallback body) {
  std::string mon_name = body.mon_name;
  bool ok = false;
  try {
    ok = co_await caller_.Call(target, std::move(body));
  } catch (const std::exception& e) {
    spdlog::error("nsm status callback for {}: {}", mon_name, e.what());
  }
  if (ok) {
    ++stats_.callbacks_ok;
  } else {
    ++stats_.callbacks_failed;
    spdlog::warn("nsm status callback for {} to {}/{}/{}/{} failed", mon_name, target.my_name,
                 target.my_prog, target.my_vers, target.my_proc);
  }
}

asio::awaitable<bool> NsmService::MonitorLocal(std::string mon_name, asio::ip::address address,
                                               int32_t peer_state) {
  store::Registration registration;
  registration.mon_name = mon_name;
  registration.my_id = LocalNlmId();
  registration.source_address = rpc::AddressToString(rpc::NormalizeAddress(address));
  // lockargs.state: the client's own word for its current state.
  registration.peer_state = peer_state;
  std::string source = registration.source_address;
  if (!co_await PutRegistration(std::move(registration))) co_return false;
  registry_.AddPeerAddress(mon_name, source);
  if (peer_state != 0) registry_.SetPeerState(mon_name, peer_state);
  co_return true;
}

asio::awaitable<void> NsmService::Shutdown() { co_await gate_.CancelAndWait(shutdown_bound()); }

}  // namespace nlockd::nsm
