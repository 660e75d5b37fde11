// SPDX-License-Identifier: Apache-2.0
#include "store/store.hpp"

#include <future>
#include <utility>

#include "base/error.hpp"

namespace nlockd::store {
namespace {

// Submits op through `store_submit` and blocks until it is committed; rethrows its failure.
template <typename SubmitFn>
void SubmitAndWait(SubmitFn&& store_submit, WriteOp op) {
  std::promise<void> committed;
  std::future<void> result = committed.get_future();
  store_submit(std::move(op), [&committed](std::exception_ptr error) {
    if (error) {
      committed.set_exception(std::move(error));
    } else {
      committed.set_value();
    }
  });
  result.get();
}

struct DurabilityVisitor {
  Durability operator()(const PutRegistrationOp&) const { return Durability::kSynced; }
  Durability operator()(const RemoveRegistrationOp&) const { return Durability::kSynced; }
  Durability operator()(const RemoveRegistrationsOfOp&) const { return Durability::kSynced; }
  Durability operator()(const PutNotifyOwedOp&) const { return Durability::kSynced; }
  Durability operator()(const ClearOp&) const { return Durability::kSynced; }
  Durability operator()(const BumpStateOp&) const { return Durability::kSynced; }
  Durability operator()(const MarkCleanShutdownOp&) const { return Durability::kSynced; }
  Durability operator()(const LockChangesOp&) const { return Durability::kCommitted; }
  Durability operator()(const ReleaseHostOp&) const { return Durability::kCommitted; }
  Durability operator()(const RemoveNotifyOwedOp&) const { return Durability::kCommitted; }
  Durability operator()(const MarkLockTableCompleteOp&) const { return Durability::kCommitted; }
};

}  // namespace

Durability DurabilityOf(const WriteOp& op) { return std::visit(DurabilityVisitor{}, op); }

int32_t NextOddState(int32_t state) {
  auto bits = static_cast<uint32_t>(state);
  bits += (bits & 1U) != 0 ? 2U : 1U;
  return static_cast<int32_t>(bits);
}

int32_t NextEvenState(int32_t state) {
  auto bits = static_cast<uint32_t>(state);
  bits += bits & 1U;
  return static_cast<int32_t>(bits);
}

void Store::PutRegistration(Registration registration, Done done) {
  Submit(PutRegistrationOp{std::move(registration)}, std::move(done));
}

void Store::RemoveRegistration(std::string mon_name, MyId my_id, Done done) {
  Submit(RemoveRegistrationOp{std::move(mon_name), std::move(my_id)}, std::move(done));
}

void Store::RemoveRegistrationsOf(MyId my_id, Done done) {
  Submit(RemoveRegistrationsOfOp{std::move(my_id)}, std::move(done));
}

void Store::PutNotifyOwed(std::vector<NotifyOwed> owed, Done done) {
  Submit(PutNotifyOwedOp{std::move(owed)}, std::move(done));
}

void Store::PutNotifyOwedAndWait(std::vector<NotifyOwed> owed) {
  SubmitAndWait([this](WriteOp op, Done done) { Submit(std::move(op), std::move(done)); },
                PutNotifyOwedOp{std::move(owed)});
}

void Store::Clear(Done done) { Submit(ClearOp{}, std::move(done)); }

int32_t Store::BumpState() { return WriteState(std::nullopt); }

int32_t Store::MoveStateTo(int32_t state) {
  NLOCKD_REQUIRE(state % 2 != 0, "a state number a host is up with is odd");
  return WriteState(state);
}

int32_t Store::WriteState(std::optional<int32_t> to) {
  int32_t new_state = 0;
  SubmitAndWait([this](WriteOp op, Done done) { Submit(std::move(op), std::move(done)); },
                BumpStateOp{&new_state, to});
  return new_state;
}

void Store::MarkCleanShutdown() {
  SubmitAndWait([this](WriteOp op, Done done) { Submit(std::move(op), std::move(done)); },
                MarkCleanShutdownOp{});
}

void Store::ApplyLockChanges(std::vector<LockChange> changes, Done done) {
  Submit(LockChangesOp{std::move(changes)}, std::move(done));
}

void Store::ReleaseHost(std::string host, Done done) {
  Submit(ReleaseHostOp{std::move(host)}, std::move(done));
}

void Store::RemoveNotifyOwed(std::string mon_name, Done done) {
  Submit(RemoveNotifyOwedOp{std::move(mon_name)}, std::move(done));
}

void Store::MarkLockTableComplete(Done done) { Submit(MarkLockTableCompleteOp{}, std::move(done)); }

}  // namespace nlockd::store
