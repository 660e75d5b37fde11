#include "rpc/reply_cache.hpp"

#include <functional>

namespace nlockd::rpc {

uint64_t ReplyCache::Checksum(std::span<const uint8_t> bytes) {
  // FNV-1a: not cryptographic; it only tells different arguments apart.
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (uint8_t byte : bytes) {
    hash ^= byte;
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

size_t ReplyCache::KeyHash::operator()(const Key& key) const {
  size_t h = 0;
  auto mix = [&h](uint64_t v) {
    h ^= std::hash<uint64_t>{}(v) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  };
  if (key.client.is_v4()) {
    mix(key.client.to_v4().to_uint());
  } else {
    for (uint8_t byte : key.client.to_v6().to_bytes()) mix(byte);
  }
  mix(key.xid);
  mix((uint64_t{key.program} << 32) | key.version);
  mix(key.procedure);
  mix(key.args_checksum);
  return h;
}

void ReplyCache::Evict(std::chrono::steady_clock::time_point now) {
  while (!order_.empty()) {
    auto it = entries_.find(order_.front());
    bool too_many = entries_.size() >= options_.max_entries;
    bool too_old = it != entries_.end() && now - it->second.created > options_.max_age;
    if (!too_many && !too_old) break;
    if (it != entries_.end()) entries_.erase(it);
    order_.pop_front();
  }
}

ReplyCache::Lookup ReplyCache::Begin(const Key& key, std::vector<uint8_t>& reply,
                                     std::chrono::steady_clock::time_point now) {
  auto it = entries_.find(key);
  if (it != entries_.end() && now - it->second.created <= options_.max_age) {
    if (!it->second.done) {
      ++dropped_in_progress_;
      return Lookup::kInProgress;
    }
    ++replays_;
    reply.insert(reply.end(), it->second.reply.begin(), it->second.reply.end());
    return Lookup::kReplay;
  }
  if (it != entries_.end()) {
    order_.erase(it->second.order);
    entries_.erase(it);
  }
  Evict(now);
  order_.push_back(key);
  Entry entry;
  entry.created = now;
  entry.order = std::prev(order_.end());
  entries_.emplace(key, std::move(entry));
  return Lookup::kNew;
}

void ReplyCache::Finish(const Key& key, std::span<const uint8_t> reply) {
  auto it = entries_.find(key);
  if (it == entries_.end()) return;  // Evicted while running: nothing to keep.
  it->second.done = true;
  it->second.reply.assign(reply.begin(), reply.end());
}

void ReplyCache::Abandon(const Key& key) {
  auto it = entries_.find(key);
  if (it == entries_.end()) return;
  order_.erase(it->second.order);
  entries_.erase(it);
}

}  // namespace nlockd::rpc
