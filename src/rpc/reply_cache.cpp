#include "rpc/reply_cache.hpp"


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

namespace {
// splitmix64's finaliser: every input bit affects every output bit.
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
}  // namespace

size_t ReplyCache::KeyHash::operator()(const Key& key) const {
  uint64_t h = Mix(key.args_checksum ^ (uint64_t{key.xid} << 32 | key.procedure));
  h = Mix(h ^ (uint64_t{key.program} << 32 | key.version));
  if (key.client.is_v4()) {
    h = Mix(h ^ key.client.to_v4().to_uint());
  } else {
    auto bytes = key.client.to_v6().to_bytes();
    uint64_t high = 0, low = 0;
    for (size_t i = 0; i < 8; ++i) {
      high = high << 8 | bytes[i];
      low = low << 8 | bytes[i + 8];
    }
    h = Mix(Mix(h ^ high) ^ low);
  }
  return static_cast<size_t>(h);
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
