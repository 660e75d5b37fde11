// SPDX-License-Identifier: Apache-2.0
#include "integration/ha_fault_clients.hpp"

#include <algorithm>
#include <map>
#include <optional>
#include <random>
#include <span>

#include <fcntl.h>
#include <fmt/format.h>
#include <sched.h>
#include <unistd.h>

#include "integration/nlm_rpcgen.hpp"
#include "integration/raw_rpc.hpp"

namespace nlockd::integration::hafault {

namespace {

using std::chrono::milliseconds;

constexpr uint32_t kSmProgram = 100024;
constexpr uint32_t kSmNotify = 6;
constexpr milliseconds kCallTimeout(300);
constexpr int kSharedFiles = 4;

// An SM_NOTIFY's stat_chge: mon_name, state.
std::optional<std::pair<std::string, int32_t>> ParseStatChge(std::span<const uint8_t> body) {
  auto u32 = [&](size_t at) -> std::optional<uint32_t> {
    if (at + 4 > body.size()) return std::nullopt;
    return static_cast<uint32_t>(body[at]) << 24 | static_cast<uint32_t>(body[at + 1]) << 16 |
           static_cast<uint32_t>(body[at + 2]) << 8 | body[at + 3];
  };
  auto length = u32(0);
  if (!length || *length > 1024) return std::nullopt;
  const size_t padded = (*length + 3) / 4 * 4;
  auto state = u32(4 + padded);
  if (!state) return std::nullopt;
  return std::make_pair(std::string(reinterpret_cast<const char*>(body.data() + 4), *length),
                        static_cast<int32_t>(*state));
}

struct Held {
  NlmLock lock;
  bool exclusive = true;
  bool anchor = false;
  Clock::time_point since;
  Clock::time_point release_at;
};

}  // namespace

std::vector<std::string> Conflicts(std::vector<LockInterval> intervals) {
  std::vector<std::string> out;
  std::map<std::string, std::vector<const LockInterval*>> by_file;
  for (const LockInterval& interval : intervals) by_file[interval.file].push_back(&interval);
  for (auto& [file, list] : by_file) {
    std::sort(list.begin(), list.end(),
              [](const LockInterval* a, const LockInterval* b) { return a->start < b->start; });
    for (size_t i = 0; i < list.size(); ++i) {
      for (size_t j = i + 1; j < list.size() && list[j]->start < list[i]->end; ++j) {
        const LockInterval& a = *list[i];
        const LockInterval& b = *list[j];
        if (a.owner == b.owner || (!a.exclusive && !b.exclusive)) continue;
        auto ms = [](Clock::duration d) {
          return std::chrono::duration_cast<milliseconds>(d).count();
        };
        const Clock::time_point zero = list.front()->start;
        out.push_back(fmt::format("{}: {} held [{}, {}] ms, {} granted at {} ms", file, a.owner,
                                  ms(a.start - zero), ms(a.end - zero), b.owner,
                                  ms(b.start - zero)));
      }
    }
  }
  return out;
}

FaultClient::FaultClient(int id, int clients, std::string netns, std::string address,
                         std::string server, uint16_t nlm_port, uint16_t statd_port,
                         std::string service, uint32_t seed)
    : id_(id),
      clients_(clients),
      netns_(std::move(netns)),
      address_(std::move(address)),
      server_(std::move(server)),
      nlm_port_(nlm_port),
      statd_port_(statd_port),
      service_(std::move(service)),
      seed_(seed),
      thread_([this] { Run(); }) {}

FaultClient::~FaultClient() { Stop(); }

bool FaultClient::WaitAnchored(milliseconds timeout) {
  std::unique_lock lock(mutex_);
  return changed_.wait_for(lock, timeout, [&] { return anchored_ || failed_; }) && anchored_;
}

bool FaultClient::WaitReclaimed(int32_t above, milliseconds timeout) {
  std::unique_lock lock(mutex_);
  return changed_.wait_for(lock, timeout, [&] { return last_state_ > above || failed_; }) &&
         !failed_;
}

void FaultClient::Stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

void FaultClient::Run() {
  auto fail = [&](const std::string& why) {
    std::lock_guard lock(mutex_);
    failed_ = true;
    result_.lost_detail += why + "\n";
    changed_.notify_all();
  };
  // This thread only joins the host's network namespace; every socket it makes lives there.
  const int fd = open(("/run/netns/" + netns_).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 || setns(fd, CLONE_NEWNET) != 0) {
    if (fd >= 0) close(fd);
    return fail("cannot join " + netns_);
  }
  close(fd);
  UdpSocket statd;
  if (!statd.Bind(Ipv4("0.0.0.0", statd_port_))) return fail("cannot bind the status monitor");
  UdpSocket nlm;
  if (!nlm.Bind(Ipv4(address_, 0))) return fail("cannot bind the NLM socket");
  const sockaddr_in server = Ipv4(server_, nlm_port_);
  std::mt19937 random(seed_);
  uint32_t xid = seed_ * 0x10000u;
  const std::string caller = fmt::format("client{}", id_);
  int32_t notified = 0;

  // Answers every SM_NOTIFY that came, remembering the highest state of the service.
  auto drain_notifies = [&](milliseconds wait) {
    sockaddr_in from{};
    for (auto datagram = statd.Receive(wait, &from); datagram;
         datagram = statd.Receive(milliseconds(0), &from)) {
      auto call = ParseMessage(*datagram);
      if (!call || !call->is_call || call->program != kSmProgram) continue;
      statd.SendTo(from, BuildSuccessReply(call->xid));
      if (call->procedure != kSmNotify) continue;
      auto change = ParseStatChge(call->body);
      if (change && change->first == service_) notified = std::max(notified, change->second);
    }
  };
  // One NLM call, sent again until an answer comes (nullopt when the run stops, if
  // `until_stop`, or at `deadline`). A server that is down or not yet serving answers nothing.
  auto call = [&](uint32_t procedure, const std::vector<uint8_t>& args, bool until_stop,
                  Clock::time_point deadline =
                      Clock::time_point::max()) -> std::optional<std::vector<uint8_t>> {
    for (;;) {
      auto reply = nlm.Call(server, BuildCall(++xid, 100021, 4, procedure, args), kCallTimeout);
      if (reply && reply->reply_stat == 0 && reply->accept_stat == kSuccess) return reply->body;
      if (reply) {
        std::this_thread::sleep_for(milliseconds(50));  // rejected: try again
      }
      drain_notifies(milliseconds(0));
      if ((until_stop && stop_) || Clock::now() > deadline) return std::nullopt;
    }
  };
  auto lock_call = [&](const NlmLock& lock, bool exclusive, bool reclaim,
                       bool until_stop) -> std::optional<NlmStat> {
    auto body = call(2, EncodeLockArgs(4, lock, NlmLockFlags{exclusive, false, reclaim, 1}, "lock"),
                     until_stop);
    if (!body) return std::nullopt;
    auto res = DecodeRes(4, *body);
    return res ? std::optional<NlmStat>(res->stat) : std::nullopt;
  };

  std::vector<Held> held;
  auto record = [&](const Held& h, Clock::time_point end) {
    result_.intervals.push_back(
        LockInterval{caller + "/" + h.lock.oh, h.lock.fh, h.exclusive, h.since, end});
  };
  auto make_lock = [&](const std::string& file, int32_t svid) {
    return NlmLock{caller, file, fmt::format("{}@{}", svid, caller), svid, 0, 100};
  };

  // The anchors: held for the whole run.
  {
    const NlmLock own = make_lock(fmt::format("own-{}", id_), 1);
    NlmLock common = make_lock("common", 1);
    common.length = 50;
    for (const auto& [lock, exclusive] : {std::pair{own, true}, std::pair{common, false}}) {
      for (;;) {
        auto stat = lock_call(lock, exclusive, false, true);
        if (!stat) return fail("stopped before the anchors were granted");
        if (*stat == NlmStat::kGranted) {
          ++result_.grants;
          held.push_back(Held{lock, exclusive, true, Clock::now(), Clock::time_point::max()});
          break;
        }
        std::this_thread::sleep_for(milliseconds(100));
      }
    }
    std::lock_guard guard(mutex_);
    anchored_ = true;
    changed_.notify_all();
  }

  auto pause = [&] { drain_notifies(milliseconds(5 + random() % 20)); };
  while (!stop_) {
    // A new active node: reclaim everything held, in its grace period.
    if (notified > last_state_) {
      const int32_t state = notified;
      for (auto it = held.begin(); it != held.end();) {
        auto stat = lock_call(it->lock, it->exclusive, true, true);
        if (!stat) break;  // stopping
        ++result_.reclaims;
        if (*stat == NlmStat::kGranted) {
          ++it;
          continue;
        }
        ++result_.lost;
        result_.lost_detail += fmt::format("reclaim of {} {} after state {}: {}\n", it->lock.oh,
                                           it->lock.fh, state, ToString(*stat));
        record(*it, Clock::now());
        it = held.erase(it);
      }
      std::lock_guard guard(mutex_);
      last_state_ = state;
      changed_.notify_all();
      continue;
    }
    // Release what is due.
    auto due = std::find_if(held.begin(), held.end(), [](const Held& h) {
      return !h.anchor && h.release_at <= Clock::now();
    });
    if (due != held.end()) {
      const Clock::time_point sent = Clock::now();
      record(*due, sent);
      const NlmLock lock = due->lock;
      held.erase(due);
      call(4, EncodeUnlockArgs(4, lock, "unlock"), true);
      pause();
      continue;
    }
    // Take a lock: a churn owner (svid 2, 3) on a shared file, or now and then (svid 4) another
    // client's own file, which must be refused while that client holds it.
    NlmLock lock;
    if (random() % 8 == 0 && clients_ > 1) {
      int other = 1 + static_cast<int>(random() % static_cast<uint32_t>(clients_ - 1));
      if (other >= id_) ++other;
      lock = make_lock(fmt::format("own-{}", other), 4);
    } else {
      lock = make_lock(fmt::format("f{}", random() % kSharedFiles),
                       2 + static_cast<int32_t>(random() % 2));
    }
    const bool busy = std::any_of(held.begin(), held.end(),
                                  [&](const Held& h) { return h.lock.svid == lock.svid; });
    if (!busy) {
      auto stat = lock_call(lock, true, false, true);
      if (stat && *stat == NlmStat::kGranted) {
        const Clock::time_point now = Clock::now();
        ++result_.grants;
        last_new_grant_ = now.time_since_epoch().count();
        held.push_back(Held{lock, true, false, now, now + milliseconds(20 + random() % 200)});
      }
    }
    pause();
  }

  // The server must still hold everything held here: another owner of this host asks.
  result_.verified = true;
  const Clock::time_point give_up = Clock::now() + std::chrono::seconds(30);
  for (const Held& h : held) {
    NlmLock probe = h.lock;
    probe.svid = 99;
    probe.oh = fmt::format("99@{}", caller);
    std::optional<NlmTestReply> res;
    for (int attempt = 0; attempt < 100; ++attempt) {
      auto body = call(1, EncodeTestArgs(4, probe, true, "test"), false, give_up);
      res = body ? DecodeTestRes(4, *body) : std::nullopt;
      if (!res || res->stat != NlmStat::kDeniedGracePeriod) break;
      std::this_thread::sleep_for(milliseconds(100));
    }
    if (!res) {
      result_.verified = false;
    } else if (res->stat != NlmStat::kDenied) {
      ++result_.not_held_at_end;
      result_.lost_detail += fmt::format("{} {}: TEST by another owner answered {}\n", h.lock.oh,
                                         h.lock.fh, ToString(res->stat));
    }
    record(h, Clock::now());
  }
}

}  // namespace nlockd::integration::hafault
