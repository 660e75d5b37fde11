// SPDX-License-Identifier: Apache-2.0
#include "admin/connection_guard.hpp"

#include <algorithm>

#include <sys/socket.h>

namespace nlockd::admin {

std::optional<uint64_t> ConnectionGuard::Admit(int fd) {
  std::lock_guard lock(mutex_);
  if (connections_.size() >= max_connections_ && !EvictOldestReaderLocked()) return std::nullopt;
  const uint64_t id = next_id_++;
  connections_.emplace(id, Connection{fd, id, true, false});
  return id;
}

bool ConnectionGuard::MakeRoom(size_t waiting) {
  std::lock_guard lock(mutex_);
  size_t staying = connections_.size() - LeavingLocked();
  while (staying + waiting + 1 > max_connections_) {
    if (!EvictOldestReaderLocked()) return false;
    --staying;
  }
  return true;
}

size_t ConnectionGuard::LeavingLocked() const {
  return static_cast<size_t>(
      std::count_if(connections_.begin(), connections_.end(),
                    [](const auto& entry) { return entry.second.shut_down; }));
}

bool ConnectionGuard::EvictOldestReaderLocked() {
  // Ids grow with admission: the first reader found is the oldest.
  for (auto& [id, connection] : connections_) {
    if (!connection.reading || connection.shut_down) continue;
    ::shutdown(connection.fd, SHUT_RDWR);
    connection.shut_down = true;
    ++evicted_;
    return true;
  }
  return false;
}

void ConnectionGuard::RequestRead(uint64_t id) {
  std::lock_guard lock(mutex_);
  if (auto it = connections_.find(id); it != connections_.end()) it->second.reading = false;
}

void ConnectionGuard::Leave(uint64_t id) {
  std::lock_guard lock(mutex_);
  connections_.erase(id);
}

void ConnectionGuard::ShutDownReaders() {
  std::lock_guard lock(mutex_);
  for (auto& [id, connection] : connections_) {
    if (connection.reading && !connection.shut_down) {
      ::shutdown(connection.fd, SHUT_RDWR);
      connection.shut_down = true;
    }
  }
}

size_t ConnectionGuard::open() const {
  std::lock_guard lock(mutex_);
  return connections_.size();
}

uint64_t ConnectionGuard::evicted() const {
  std::lock_guard lock(mutex_);
  return evicted_;
}

}  // namespace nlockd::admin
