// SPDX-License-Identifier: Apache-2.0
// LockManager against a deliberately simple reference model: thousands of random operations by
// several owners on one small file, compared after every step — status, holder, waiter ids,
// grants (in order), the lock set and the waiter records — and every blocking request refused
// as a deadlock exactly when a plain search of the model's owners finds the cycle it closes.
//
// The model keeps one lock type per (cell, owner). A cell is a byte, except that the low domain
// has a last cell standing for every byte from 64 to the end of the file (no request starts or
// ends inside it, so it behaves as one byte), which models "length 0 = to the end" faithfully.
// The high domain is the 64 bytes ending at UINT64_MAX, where lengths that overflow are also
// generated and must be rejected.
//
// Undoing a granted block (Cancel, RevokeGrant) is modelled per cell as a stack of the owner's
// pending grants: each remembers the owner's type in each cell before it and whether it still
// decides the cell. The owner's own LOCK stops every pending grant of it from deciding the
// cells it covers; an acknowledged grant (or one an UNLOCK kept) stops the older ones. Undoing
// a grant in a cell where a later one sits on top hands its prior type to that one; elsewhere
// the cell gets the prior type back, unless another owner's lock conflicts with it now.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "lock/lock_manager.hpp"
#include "lock/testing/test_util.hpp"

namespace nlockd::lock {
namespace {

constexpr uint64_t kMax = ByteRange::kMaxOffset;
constexpr int kOwners = 5;
constexpr int kHosts = 3;
constexpr int kNone = -1;  // No lock in a cell.

LockOwner ModelOwner(int index) {
  return testing::Owner("h" + std::to_string(index % kHosts), index);
}

int OwnerIndex(const LockOwner& owner) { return owner.svid; }

struct Domain {
  uint64_t base;          // Byte of cell 0.
  int cells;              // Number of cells.
  bool last_cell_to_end;  // The last cell stands for [base + cells - 1, UINT64_MAX].

  ByteRange CellRange(int lo, int hi) const {
    const uint64_t first = base + static_cast<uint64_t>(lo);
    const uint64_t last =
        (hi == cells - 1 && last_cell_to_end) ? kMax : base + static_cast<uint64_t>(hi);
    return ByteRange::FromFirstLast(first, last);
  }
};

struct ModelWaiter {
  uint64_t id;
  int owner;
  int lo, hi;
  LockType type;
  bool granted;
  // Set when granted, per cell from lo: the owner's type before the grant, and whether the
  // grant still decides the cell.
  uint64_t seq = 0;
  std::vector<int> prior = {};
  std::vector<bool> live = {};

  bool Decides(int cell) const { return cell >= lo && cell <= hi && live[Idx(cell - lo)]; }
  static size_t Idx(int i) { return static_cast<size_t>(i); }
};

struct ModelGrant {
  uint64_t id;
  int owner;
  int lo, hi;
  LockType type;
};

struct ModelRun {
  int owner;
  int lo, hi;
  LockType type;
};

class Model {
 public:
  explicit Model(const Domain& domain)
      : domain_(domain),
        held_(static_cast<size_t>(domain.cells), std::vector<int>(kOwners, kNone)) {}

  static bool Conflicts(int held, LockType want) {
    return held != kNone && TypesConflict(static_cast<LockType>(held), want);
  }

  bool HasConflict(int owner, int lo, int hi, LockType type) const {
    for (int c = lo; c <= hi; ++c) {
      for (int p = 0; p < kOwners; ++p) {
        if (p != owner && Conflicts(held_[Idx(c)][Idx(p)], type)) return true;
      }
    }
    return false;
  }

  // Maximal runs of one (owner, type): the lock entries the manager must hold.
  std::vector<ModelRun> Runs() const {
    std::vector<ModelRun> runs;
    for (int p = 0; p < kOwners; ++p) {
      int c = 0;
      while (c < domain_.cells) {
        const int t = held_[Idx(c)][Idx(p)];
        if (t == kNone) {
          ++c;
          continue;
        }
        int end = c;
        while (end + 1 < domain_.cells && held_[Idx(end + 1)][Idx(p)] == t) ++end;
        runs.push_back(ModelRun{p, c, end, static_cast<LockType>(t)});
        c = end + 1;
      }
    }
    return runs;
  }

  void Set(int owner, int lo, int hi, std::optional<LockType> type) {
    for (int c = lo; c <= hi; ++c) {
      held_[Idx(c)][Idx(owner)] = type ? static_cast<int>(*type) : kNone;
    }
  }

  // Grants the first grantable queued waiter until none is left.
  void Serve(std::vector<ModelGrant>& grants) {
    for (bool again = true; again;) {
      again = false;
      for (ModelWaiter& w : waiters_) {
        if (w.granted || HasConflict(w.owner, w.lo, w.hi, w.type)) continue;
        w.seq = next_seq_++;
        w.prior.clear();
        for (int c = w.lo; c <= w.hi; ++c) w.prior.push_back(held_[Idx(c)][Idx(w.owner)]);
        w.live.assign(static_cast<size_t>(w.hi - w.lo + 1), true);
        Set(w.owner, w.lo, w.hi, w.type);
        w.granted = true;
        grants.push_back(ModelGrant{w.id, w.owner, w.lo, w.hi, w.type});
        again = true;
        break;
      }
    }
  }

  // The owner's own change of cells [lo, hi]: its pending grants no longer decide them.
  void SettleOwner(int owner, int lo, int hi) {
    for (ModelWaiter& w : waiters_) {
      if (!w.granted || w.owner != owner) continue;
      for (int c = std::max(lo, w.lo); c <= std::min(hi, w.hi); ++c) w.live[Idx(c - w.lo)] = false;
    }
  }

  // `grant` stands: the owner's older pending grants no longer decide the cells it decides.
  void SettleOlder(const ModelWaiter& grant) {
    for (ModelWaiter& w : waiters_) {
      if (!w.granted || w.owner != grant.owner || w.seq >= grant.seq) continue;
      for (int c = w.lo; c <= w.hi; ++c) {
        if (grant.Decides(c)) w.live[Idx(c - w.lo)] = false;
      }
    }
  }

  // Takes back the granted waiter at `index`, erases it and serves the waiters this frees.
  void Undo(size_t index, std::vector<ModelGrant>& grants) {
    const ModelWaiter grant = waiters_[index];
    waiters_.erase(waiters_.begin() + static_cast<std::ptrdiff_t>(index));
    for (int c = grant.lo; c <= grant.hi; ++c) {
      if (!grant.Decides(c)) continue;
      const int prior = grant.prior[Idx(c - grant.lo)];
      ModelWaiter* above = nullptr;
      for (ModelWaiter& w : waiters_) {
        if (w.granted && w.owner == grant.owner && w.seq > grant.seq && w.Decides(c) &&
            (above == nullptr || w.seq < above->seq)) {
          above = &w;
        }
      }
      if (above != nullptr) {
        above->prior[Idx(c - above->lo)] = prior;
        continue;
      }
      bool conflicts = false;
      for (int p = 0; p < kOwners; ++p) {
        conflicts |= p != grant.owner && prior != kNone &&
                     Conflicts(held_[Idx(c)][Idx(p)], static_cast<LockType>(prior));
      }
      if (!conflicts) held_[Idx(c)][Idx(grant.owner)] = prior;
    }
    Serve(grants);
  }

  // Whether `owner` waiting over [lo, hi] would close a cycle: some owner holding a conflicting
  // cell reaches it through queued waiters and the owners holding cells they conflict with.
  bool WouldDeadlock(int owner, int lo, int hi, LockType type) const {
    std::vector<bool> seen(kOwners, false);
    std::vector<int> todo = Blockers(owner, lo, hi, type);
    while (!todo.empty()) {
      const int p = todo.back();
      todo.pop_back();
      if (p == owner) return true;
      if (seen[Idx(p)]) continue;
      seen[Idx(p)] = true;
      for (const ModelWaiter& w : waiters_) {
        if (w.granted || w.owner != p) continue;
        for (int q : Blockers(p, w.lo, w.hi, w.type)) todo.push_back(q);
      }
    }
    return false;
  }

  std::vector<int> Blockers(int owner, int lo, int hi, LockType type) const {
    std::vector<int> out;
    for (int p = 0; p < kOwners; ++p) {
      if (p == owner) continue;
      for (int c = lo; c <= hi; ++c) {
        if (Conflicts(held_[Idx(c)][Idx(p)], type)) {
          out.push_back(p);
          break;
        }
      }
    }
    return out;
  }

  std::vector<ModelWaiter>::iterator FindWaiter(int owner, int lo, int hi, LockType type,
                                                bool granted) {
    return std::find_if(waiters_.begin(), waiters_.end(), [&](const ModelWaiter& w) {
      return w.owner == owner && w.lo == lo && w.hi == hi && w.type == type && w.granted == granted;
    });
  }

  const Domain& domain() const { return domain_; }
  std::vector<ModelWaiter>& waiters() { return waiters_; }
  uint64_t NextWaiterId() { return next_id_++; }

 private:
  static size_t Idx(int i) { return static_cast<size_t>(i); }

  Domain domain_;
  std::vector<std::vector<int>> held_;  // [cell][owner] -> LockType or kNone.
  std::vector<ModelWaiter> waiters_;
  uint64_t next_id_ = 1;
  uint64_t next_seq_ = 1;
};

class ModelTest {
 public:
  ModelTest(const Domain& domain, uint64_t seed) : model_(domain), rng_(seed) {}

  // Returns the blocking requests refused as deadlocks.
  size_t Run(int steps) {
    for (int step = 0; step < steps; ++step) {
      SCOPED_TRACE("step " + std::to_string(step));
      Step();
      CompareState();
      if (::testing::Test::HasFatalFailure()) break;
    }
    EXPECT_EQ(manager_.deadlock_counts().refused, deadlocks_);
    return deadlocks_;
  }

 private:
  struct Pick {
    uint64_t offset, length;
    std::optional<std::pair<int, int>> cells;  // nullopt: the range overflows.
  };

  int Rand(int n) { return static_cast<int>(rng_() % static_cast<uint64_t>(n)); }

  Pick PickRange() {
    const Domain& d = model_.domain();
    const int byte_cells = d.last_cell_to_end ? d.cells - 1 : d.cells;
    // Mostly in a hot window at the start of the domain, so that requests contend.
    const int lo = Rand(10) < 7 ? Rand(12) : Rand(byte_cells);
    const uint64_t offset = d.base + static_cast<uint64_t>(lo);
    const int roll = Rand(10);
    if (roll == 0) return Pick{offset, 0, std::make_pair(lo, d.cells - 1)};
    if (!d.last_cell_to_end && roll == 1) {
      // Past UINT64_MAX by 1..4 bytes.
      const uint64_t len = static_cast<uint64_t>(d.cells - lo + 1 + Rand(4));
      return Pick{offset, len, std::nullopt};
    }
    // Short ranges make more interesting overlaps.
    const int max_len = std::min(byte_cells - lo, roll < 5 ? 6 : byte_cells);
    const int len = 1 + Rand(max_len);
    return Pick{offset, static_cast<uint64_t>(len), std::make_pair(lo, lo + len - 1)};
  }

  LockType PickType() { return Rand(2) ? LockType::kExclusive : LockType::kShared; }

  void ExpectHolder(const Holder& holder, int requester, int lo, int hi, LockType want) {
    const std::vector<ModelRun> runs = Conflicting(requester, lo, hi, want);
    ASSERT_FALSE(runs.empty());
    uint64_t lowest = kMax;
    for (const auto& r : runs) lowest = std::min(lowest, CellRange(r.lo, r.hi).first());
    const bool listed = std::any_of(runs.begin(), runs.end(), [&](const auto& r) {
      return r.owner == OwnerIndex(holder.owner) && r.type == holder.type &&
             CellRange(r.lo, r.hi) == holder.range;
    });
    EXPECT_TRUE(listed) << holder.owner.ToString() << " " << holder.range.ToString();
    EXPECT_EQ(holder.range.first(), lowest);
  }

  std::vector<ModelRun> Conflicting(int requester, int lo, int hi, LockType want) {
    std::vector<ModelRun> out;
    for (const auto& r : model_.Runs()) {
      if (r.owner != requester && r.lo <= hi && lo <= r.hi && TypesConflict(r.type, want)) {
        out.push_back(r);
      }
    }
    return out;
  }

  ByteRange CellRange(int lo, int hi) const { return model_.domain().CellRange(lo, hi); }

  void ExpectGrants(const Grants& actual, const std::vector<ModelGrant>& expected) {
    ASSERT_EQ(actual.size(), expected.size());
    for (size_t i = 0; i < actual.size(); ++i) {
      EXPECT_EQ(actual[i].id.value(), expected[i].id);
      EXPECT_EQ(OwnerIndex(actual[i].owner), expected[i].owner);
      EXPECT_EQ(actual[i].range, CellRange(expected[i].lo, expected[i].hi));
      EXPECT_EQ(actual[i].type, expected[i].type);
      EXPECT_EQ(actual[i].file, file_);
    }
  }

  void Step() {
    const int op = Rand(100);
    const int owner = Rand(kOwners);
    if (op < 45) {
      DoLock(owner, Rand(10) < 7);
    } else if (op < 67) {
      DoUnlock(owner);
    } else if (op < 80) {
      DoTest(owner);
    } else if (op < 85) {
      DoCancel(owner);
    } else if (op < 93) {
      DoRevokeOrAcknowledge();
    } else if (op < 95) {
      DoReleaseHost();
    } else {
      DoCancelExistingWaiter();
    }
  }

  void DoLock(int owner, bool block) {
    const Pick pick = PickRange();
    const LockType type = PickType();
    const LockOutcome out = manager_.Lock(
        testing::Req(file_, ModelOwner(owner), pick.offset, pick.length, type, block));
    if (!pick.cells) {
      EXPECT_EQ(out.status, LockStatus::kInvalidRange);
      return;
    }
    const auto [lo, hi] = *pick.cells;
    std::vector<ModelGrant> grants;
    if (model_.HasConflict(owner, lo, hi, type)) {
      ASSERT_TRUE(out.holder);
      ExpectHolder(*out.holder, owner, lo, hi, type);
      if (!block) {
        EXPECT_EQ(out.status, LockStatus::kDenied);
      } else if (model_.WouldDeadlock(owner, lo, hi, type)) {
        ASSERT_EQ(out.status, LockStatus::kDenied);
        EXPECT_TRUE(out.deadlock);
        ++deadlocks_;
        // A re-sent request whose waiter the cycle runs through: the waiter goes with it.
        auto queued = model_.FindWaiter(owner, lo, hi, type, false);
        if (queued != model_.waiters().end()) {
          EXPECT_EQ(out.waiters_removed, (WaiterIds{WaiterId(queued->id)}));
          model_.waiters().erase(queued);
        } else {
          EXPECT_TRUE(out.waiters_removed.empty());
        }
      } else {
        ASSERT_EQ(out.status, LockStatus::kBlocked);
        EXPECT_FALSE(out.deadlock);
        auto queued = model_.FindWaiter(owner, lo, hi, type, false);
        if (queued != model_.waiters().end()) {
          EXPECT_EQ(out.waiter->value(), queued->id);
        } else {
          const uint64_t id = model_.NextWaiterId();
          EXPECT_EQ(out.waiter->value(), id);
          model_.waiters().push_back(ModelWaiter{id, owner, lo, hi, type, false});
        }
      }
    } else {
      EXPECT_EQ(out.status, LockStatus::kGranted);
      model_.Set(owner, lo, hi, type);
      model_.SettleOwner(owner, lo, hi);
      auto granted = model_.FindWaiter(owner, lo, hi, type, true);
      if (granted != model_.waiters().end()) model_.waiters().erase(granted);
      model_.Serve(grants);
    }
    ExpectGrants(out.grants, grants);
  }

  void DoUnlock(int owner) {
    const Pick pick = PickRange();
    const UnlockOutcome out = manager_.Unlock(file_, ModelOwner(owner), pick.offset, pick.length);
    if (!pick.cells) {
      EXPECT_EQ(out.status, LockStatus::kInvalidRange);
      return;
    }
    const auto [lo, hi] = *pick.cells;
    EXPECT_EQ(out.status, LockStatus::kGranted);
    size_t cancelled = 0;
    auto& waiters = model_.waiters();
    const auto hit = [&](const ModelWaiter& w) {
      return w.owner == owner && w.lo <= hi && lo <= w.hi;
    };
    for (const ModelWaiter& w : waiters) {
      if (!hit(w)) continue;
      if (w.granted) {
        model_.SettleOlder(w);  // The rest of the grant stands.
      } else {
        ++cancelled;
      }
    }
    waiters.erase(std::remove_if(waiters.begin(), waiters.end(), hit), waiters.end());
    EXPECT_EQ(out.waiters_cancelled, cancelled);
    model_.Set(owner, lo, hi, std::nullopt);
    std::vector<ModelGrant> grants;
    model_.Serve(grants);
    ExpectGrants(out.grants, grants);
  }

  void DoTest(int owner) {
    const Pick pick = PickRange();
    const LockType type = PickType();
    const TestOutcome out =
        manager_.Test(testing::Req(file_, ModelOwner(owner), pick.offset, pick.length, type));
    if (!pick.cells) {
      EXPECT_EQ(out.status, LockStatus::kInvalidRange);
      return;
    }
    const auto [lo, hi] = *pick.cells;
    if (model_.HasConflict(owner, lo, hi, type)) {
      EXPECT_EQ(out.status, LockStatus::kDenied);
      ASSERT_TRUE(out.holder);
      ExpectHolder(*out.holder, owner, lo, hi, type);
    } else {
      EXPECT_EQ(out.status, LockStatus::kGranted);
      EXPECT_FALSE(out.holder);
    }
  }

  void CancelAndCheck(int owner, uint64_t offset, uint64_t length, LockType type,
                      std::optional<std::pair<int, int>> cells) {
    const CancelOutcome out =
        manager_.Cancel(testing::Req(file_, ModelOwner(owner), offset, length, type));
    if (!cells) {
      EXPECT_EQ(out.result, CancelResult::kInvalidRange);
      return;
    }
    const auto [lo, hi] = *cells;
    std::vector<ModelGrant> grants;
    auto queued = model_.FindWaiter(owner, lo, hi, type, false);
    auto granted = model_.FindWaiter(owner, lo, hi, type, true);
    if (queued != model_.waiters().end()) {
      EXPECT_EQ(out.result, CancelResult::kCancelled);
      model_.waiters().erase(queued);
    } else if (granted != model_.waiters().end()) {
      EXPECT_EQ(out.result, CancelResult::kGrantUndone);
      model_.Undo(static_cast<size_t>(granted - model_.waiters().begin()), grants);
    } else {
      EXPECT_EQ(out.result, CancelResult::kNotFound);
    }
    ExpectGrants(out.grants, grants);
  }

  void DoCancel(int owner) {
    const Pick pick = PickRange();
    CancelAndCheck(owner, pick.offset, pick.length, PickType(), pick.cells);
  }

  void DoCancelExistingWaiter() {
    auto& waiters = model_.waiters();
    if (waiters.empty()) return;
    const ModelWaiter w = waiters[static_cast<size_t>(Rand(static_cast<int>(waiters.size())))];
    const ByteRange range = CellRange(w.lo, w.hi);
    CancelAndCheck(w.owner, range.offset(), range.length(), w.type, std::make_pair(w.lo, w.hi));
  }

  void DoRevokeOrAcknowledge() {
    auto& waiters = model_.waiters();
    // Sometimes an id that is queued, settled or unknown.
    const uint64_t id =
        waiters.empty() || Rand(4) == 0
            ? 1 + static_cast<uint64_t>(Rand(40))
            : waiters[static_cast<size_t>(Rand(static_cast<int>(waiters.size())))].id;
    auto it = std::find_if(waiters.begin(), waiters.end(),
                           [&](const ModelWaiter& w) { return w.id == id && w.granted; });
    const bool pending = it != waiters.end();
    if (Rand(2) == 0) {
      EXPECT_EQ(manager_.AcknowledgeGrant(WaiterId(id)), pending);
      if (pending) {
        model_.SettleOlder(*it);
        waiters.erase(it);
      }
      return;
    }
    const RevokeOutcome out = manager_.RevokeGrant(WaiterId(id));
    EXPECT_EQ(out.revoked, pending);
    std::vector<ModelGrant> grants;
    if (pending) model_.Undo(static_cast<size_t>(it - waiters.begin()), grants);
    ExpectGrants(out.grants, grants);
  }

  void DoReleaseHost() {
    const int host = Rand(kHosts);
    const HostReleaseOutcome out = manager_.ReleaseHost(HostId("h" + std::to_string(host)));
    EXPECT_EQ(out.files_failed, 0u);
    auto& waiters = model_.waiters();
    waiters.erase(std::remove_if(waiters.begin(), waiters.end(),
                                 [&](const ModelWaiter& w) { return w.owner % kHosts == host; }),
                  waiters.end());
    for (int p = 0; p < kOwners; ++p) {
      if (p % kHosts == host) model_.Set(p, 0, model_.domain().cells - 1, std::nullopt);
    }
    std::vector<ModelGrant> grants;
    model_.Serve(grants);
    ExpectGrants(out.grants, grants);
  }

  void CompareState() {
    std::vector<std::string> expected;
    for (const auto& r : model_.Runs()) {
      expected.push_back(ModelOwner(r.owner).ToString() + " " + std::string(ToString(r.type)) +
                         " " + CellRange(r.lo, r.hi).ToString());
    }
    std::vector<std::string> actual;
    for (const LockInfo& lock : manager_.ListLocks()) {
      actual.push_back(lock.owner.ToString() + " " + std::string(ToString(lock.type)) + " " +
                       lock.range.ToString());
    }
    std::sort(expected.begin(), expected.end());
    std::sort(actual.begin(), actual.end());
    ASSERT_EQ(actual, expected);

    const std::vector<WaiterInfo> waiters = manager_.ListWaiters();
    ASSERT_EQ(waiters.size(), model_.waiters().size());
    for (size_t i = 0; i < waiters.size(); ++i) {
      const ModelWaiter& w = model_.waiters()[i];
      ASSERT_EQ(waiters[i].id.value(), w.id);
      ASSERT_EQ(waiters[i].granted, w.granted);
      ASSERT_EQ(waiters[i].range, CellRange(w.lo, w.hi));
    }
    const LockCounts counts = manager_.Counts();
    ASSERT_EQ(counts.locks, expected.size());
    size_t host_locks = 0;
    manager_.hosts().ForEach([&](const HostInfo& h) { host_locks += h.locks; });
    ASSERT_EQ(host_locks, expected.size());
    if (expected.empty() && waiters.empty()) {
      ASSERT_EQ(counts.files, 0u);
    }
  }

  ManualClock clock_;
  LockManager manager_{clock_};
  const FileKey file_ = testing::File("model-file");
  size_t deadlocks_ = 0;
  Model model_;
  std::mt19937_64 rng_;
};

TEST(LockManagerModel, MatchesThePerByteModelOnASmallFileWithToEndRanges) {
  for (uint64_t seed : {1u, 2u, 3u, 4u, 5u, 6u, 7u, 8u}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    ModelTest test(Domain{0, 65, true}, seed);
    EXPECT_GT(test.Run(5000), 0u);  // The run made cycles.
    if (::testing::Test::HasFatalFailure()) return;
  }
}

TEST(LockManagerModel, MatchesThePerByteModelAtTheTopOfTheOffsetSpace) {
  for (uint64_t seed : {11u, 12u, 13u, 14u}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    ModelTest test(Domain{kMax - 63, 64, false}, seed);
    test.Run(5000);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

}  // namespace
}  // namespace nlockd::lock
