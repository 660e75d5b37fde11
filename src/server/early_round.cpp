// SPDX-License-Identifier: Apache-2.0
#include "server/early_round.hpp"

#include <exception>
#include <utility>

#include <asio/co_spawn.hpp>
#include <asio/post.hpp>
#include <spdlog/spdlog.h>

#include "base/describe.hpp"
#include "nsm/notify_targets.hpp"
#include "store/write_op.hpp"

namespace nlockd::server {
namespace {

// One attempt per host: a host that does not answer at once is the store's round's to retry.
nsm::NotifierOptions OneAttempt(nsm::NotifierOptions options) {
  options.total_budget = std::chrono::milliseconds(0);
  return options;
}

}  // namespace

EarlyRound::EarlyRound(std::string our_name, int32_t state, std::vector<nsm::NotifyTarget> hosts,
                       nsm::NotifierOptions options)
    : state_(state),
      host_count_(nsm::MergeTargets({}, hosts).size()),
      client_(io_.get_executor()),
      notifier_(io_.get_executor(), client_, clock_, OneAttempt(options)) {
  work_.emplace(io_.get_executor());
  notifier_.set_on_answered([this](const std::string& mon_name) { HostEnded(mon_name, true); });
  notifier_.set_on_given_up([this](const std::string& mon_name) { HostEnded(mon_name, false); });
  asio::post(io_, [this, our_name = std::move(our_name), hosts = std::move(hosts)]() mutable {
    notifier_.StartRound(std::move(our_name), state_, std::move(hosts));
  });
  thread_ = std::thread([this] { io_.run(); });
}

EarlyRound::~EarlyRound() {
  asio::post(io_, [this] { Stop(); });
  thread_.join();
}

void EarlyRound::WhenFinished(asio::any_io_executor executor, std::function<void()> done) {
  std::lock_guard lock(mutex_);
  if (ended_ == host_count_) {
    asio::post(executor, std::move(done));
    return;
  }
  finished_executor_ = std::move(executor);
  on_finished_ = std::move(done);
}

bool EarlyRound::WaitFinished(std::chrono::milliseconds limit) {
  std::unique_lock lock(mutex_);
  return all_ended_.wait_for(lock, limit, [this] { return ended_ == host_count_; });
}

std::vector<std::string> EarlyRound::Answered() const {
  std::lock_guard lock(mutex_);
  return answered_;
}

void EarlyRound::HostEnded(const std::string& mon_name, bool answered) {
  bool finished = false;
  {
    std::lock_guard lock(mutex_);
    if (answered) answered_.push_back(mon_name);
    finished = ++ended_ == host_count_;
    if (finished && on_finished_) asio::post(finished_executor_, std::move(on_finished_));
  }
  if (finished) {
    all_ended_.notify_all();
    spdlog::info("nsm early round: {} of {} hosts answered state {}", Answered().size(),
                 host_count_, state_);
    Stop();
  }
}

void EarlyRound::Stop() {
  if (stopped_) return;
  stopped_ = true;
  asio::co_spawn(io_, notifier_.Shutdown(), [this](const std::exception_ptr& error) {
    if (error) spdlog::warn("nsm early round: shutdown failed: {}", Describe(error));
    work_.reset();
    // A name lookup still running on Asio's resolver thread is not waited for.
    io_.stop();
  });
}

std::unique_ptr<EarlyRound> BeginEarlyRound(EarlyNotifyFile& file, const std::string& boot_id,
                                            const std::string& our_name,
                                            nsm::NotifierOptions options,
                                            std::chrono::milliseconds lead) {
  const std::optional<EarlyNotifyRecord> record = file.record();
  // This boot reserved a state already: the store knows whether it was announced. Without a
  // boot id a restart cannot be told from a reboot.
  if (!record || boot_id.empty() || record->boot_id == boot_id || record->hosts.empty()) {
    return nullptr;
  }
  try {
    const int32_t state = store::NextOddState(record->state);
    if (!file.Reserve(state, boot_id)) {
      spdlog::warn("nsm no early round: state {} could not be reserved in {}", state, file.path());
      return nullptr;
    }
    spdlog::info("nsm notifying {} hosts of state {} as {} before the store opens (early round)",
                 record->hosts.size(), state, our_name);
    auto round = std::make_unique<EarlyRound>(our_name, state, record->hosts, options);
    if (!round->WaitFinished(lead)) {
      spdlog::info("nsm early round: {} of {} hosts answered within {} ms; the start goes on",
                   round->Answered().size(), round->host_count(), lead.count());
    }
    return round;
  } catch (const std::exception& e) {
    spdlog::warn("nsm no early round: {}", e.what());
    return nullptr;
  }
}

}  // namespace nlockd::server
