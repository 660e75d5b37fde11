// SPDX-License-Identifier: Apache-2.0
#include "store/postgres/pg_pool.hpp"

#include <algorithm>
#include <utility>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "base/error.hpp"

namespace nlockd::store {

PgPool::Lease::Lease(Lease&& other) noexcept : pool_(other.pool_), conn_(std::move(other.conn_)) {}

PgPool::Lease::~Lease() {
  if (conn_) {
    pool_->Return(std::move(conn_));
  }
}

PgPool::PgPool(std::string conninfo, PgPoolOptions options)
    : conninfo_(std::move(conninfo)), options_(options) {
  NLOCKD_REQUIRE(options_.size > 0);
  idle_.push_back(std::make_unique<PgConn>(conninfo_, options_.connect_timeout));
  open_ = 1;
}

PgPool::~PgPool() = default;

void PgPool::Shutdown() {
  {
    std::lock_guard lock(mu_);
    shut_down_ = true;
  }
  changed_.notify_all();
}

void PgPool::Return(std::unique_ptr<PgConn> conn) {
  {
    std::lock_guard lock(mu_);
    if (conn->ok()) {
      idle_.push_back(std::move(conn));
    } else {
      --open_;  // dropped below, outside the lock
    }
  }
  changed_.notify_one();
  conn.reset();
}

PgPool::Lease PgPool::Acquire(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock lock(mu_);
  std::chrono::milliseconds backoff = options_.backoff_initial;
  std::string last_error = "the pool is closing";
  for (;;) {
    if (shut_down_) {
      throw Error(ErrorKind::kDisconnected,
                  fmt::format("PostgreSQL store is closing ({})", last_error));
    }
    if (!idle_.empty()) {
      std::unique_ptr<PgConn> conn = std::move(idle_.back());
      idle_.pop_back();
      if (conn->ok()) {
        return Lease(*this, std::move(conn));
      }
      --open_;
      lock.unlock();
      conn.reset();
      lock.lock();
      continue;
    }
    if (open_ < options_.size) {
      ++open_;
      lock.unlock();
      try {
        auto conn = std::make_unique<PgConn>(conninfo_, options_.connect_timeout);
        return Lease(*this, std::move(conn));
      } catch (const Error& e) {
        lock.lock();
        --open_;
        if (e.kind() != ErrorKind::kDisconnected) {
          throw;
        }
        last_error = e.what();
      } catch (...) {
        lock.lock();
        --open_;
        throw;
      }
      const auto now = std::chrono::steady_clock::now();
      if (now >= deadline) {
        throw Error(ErrorKind::kDisconnected, last_error);
      }
      // Back off, but try once more at the deadline.
      const auto pause = std::min<std::chrono::steady_clock::duration>(backoff, deadline - now);
      spdlog::warn("store: {}; retrying in {} ms", last_error,
                   std::chrono::duration_cast<std::chrono::milliseconds>(pause).count());
      changed_.wait_for(lock, pause, [this] { return shut_down_; });
      backoff = std::min(backoff * 2, options_.backoff_max);
      continue;
    }
    if (!changed_.wait_until(lock, deadline, [this] {
          return shut_down_ || !idle_.empty() || open_ < options_.size;
        })) {
      throw Error(ErrorKind::kOverloaded,
                  fmt::format("all {} PostgreSQL connections stayed busy", options_.size));
    }
  }
}

}  // namespace nlockd::store
