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

ReplyCache::ReplyCache(Options options) : options_(options) {
  // No rehash ever (the index holds at most one entry per slot), so the slots' iterators stay
  // valid.
  index_.reserve(options_.max_entries);
}

void ReplyCache::Unindex(Slot& slot) {
  slot.indexed = false;
  spare_nodes_.push_back(index_.extract(slot.position));
}

ReplyCache::Slot* ReplyCache::Find(const Ticket& ticket) {
  if (ticket.slot >= slots_.size()) return nullptr;
  Slot& slot = slots_[ticket.slot];
  return slot.indexed && slot.generation == ticket.generation ? &slot : nullptr;
}

ReplyCache::Lookup ReplyCache::Begin(const Key& key, std::vector<uint8_t>& reply,
                                     std::chrono::steady_clock::time_point now, Ticket& ticket) {
  auto it = index_.find(key);
  if (it != index_.end()) {
    Slot& slot = slots_[it->second];
    if (now - slot.created <= options_.max_age) {
      if (!slot.done) {
        ++dropped_in_progress_;
        return Lookup::kInProgress;
      }
      ++replays_;
      reply.insert(reply.end(), slot.reply.begin(), slot.reply.end());
      return Lookup::kReplay;
    }
    Unindex(slot);  // Too old: a new call.
  }
  ticket = Ticket{slots_.size(), 0};  // Names no slot: Finish and Abandon ignore it.
  if (options_.max_entries == 0) return Lookup::kNew;
  // The next slot of the ring; once the ring is full it holds the oldest entry, evicted now.
  size_t index = next_;
  next_ = (next_ + 1) % options_.max_entries;
  if (index == slots_.size()) slots_.emplace_back();
  Slot& slot = slots_[index];
  if (slot.indexed) Unindex(slot);
  slot.key = key;
  slot.indexed = true;
  slot.done = false;
  ++slot.generation;
  slot.reply.clear();
  slot.created = now;
  if (spare_nodes_.empty()) {
    slot.position = index_.emplace(key, index).first;
  } else {
    Index::node_type node = std::move(spare_nodes_.back());
    spare_nodes_.pop_back();
    node.key() = key;
    node.mapped() = index;
    slot.position = index_.insert(std::move(node)).position;
  }
  ticket = Ticket{index, slot.generation};
  return Lookup::kNew;
}

void ReplyCache::Finish(const Ticket& ticket, std::span<const uint8_t> reply) {
  Slot* slot = Find(ticket);
  if (slot == nullptr) return;  // Evicted while running: nothing to keep.
  slot->done = true;
  slot->reply.assign(reply.begin(), reply.end());
}

void ReplyCache::Abandon(const Ticket& ticket) {
  if (Slot* slot = Find(ticket)) Unindex(*slot);
}

}  // namespace nlockd::rpc
