// SPDX-License-Identifier: Apache-2.0
#include "rpc/reply_cache.hpp"

#include <cstring>

#include "base/error.hpp"

namespace nlockd::rpc {

namespace {
// splitmix64's finaliser: every input bit affects every output bit.
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
}  // namespace

uint64_t ReplyCache::Checksum(std::span<const uint8_t> bytes) {
  // FNV-1a over 8-byte words, then a mix: not cryptographic; it only tells different arguments
  // apart. A word at a time because it runs on every cached call (a byte at a time is a chain
  // of ~100 dependent multiplications for a LOCK).
  uint64_t hash = 0xcbf29ce484222325ULL ^ bytes.size();
  size_t i = 0;
  for (; i + 8 <= bytes.size(); i += 8) {
    uint64_t word;
    std::memcpy(&word, bytes.data() + i, sizeof(word));
    hash = (hash ^ word) * 0x100000001b3ULL;
  }
  uint64_t tail = 0;
  if (i < bytes.size()) std::memcpy(&tail, bytes.data() + i, bytes.size() - i);
  return Mix(hash ^ tail);
}

uint64_t ReplyCache::Hash(const Key& key) {
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
  return h;
}

ReplyCache::ReplyCache(Options options) : options_(options) {
  NLOCKD_REQUIRE(options_.max_entries < (size_t{1} << 30), "reply cache too large");
  size_t cells = 16;
  while (cells < 2 * options_.max_entries) cells *= 2;
  cells_.resize(cells);
  mask_ = static_cast<uint32_t>(cells - 1);
}

uint32_t ReplyCache::Probe(const Key& key, uint64_t hash) const {
  const auto fragment = static_cast<uint32_t>(hash);
  for (uint32_t i = fragment & mask_;; i = (i + 1) & mask_) {
    const Cell& cell = cells_[i];
    if (cell.slot_plus_one == 0) return i;
    if (cell.hash == fragment) {
      const Slot& slot = slots_[cell.slot_plus_one - 1];
      if (slot.hash == hash && slot.key == key) return i;
    }
  }
}

void ReplyCache::Unindex(Slot& slot) {
  slot.indexed = false;
  --size_;
  // Backward-shift deletion (linear probing): move later cells of the run back into the hole
  // unless their home lies cyclically after the hole.
  uint32_t hole = slot.cell;
  for (uint32_t i = (hole + 1) & mask_;; i = (i + 1) & mask_) {
    Cell& cell = cells_[i];
    if (cell.slot_plus_one == 0) break;
    const uint32_t home = cell.hash & mask_;
    const bool stays = hole <= i ? (hole < home && home <= i) : (hole < home || home <= i);
    if (stays) continue;
    cells_[hole] = cell;
    slots_[cell.slot_plus_one - 1].cell = hole;
    hole = i;
  }
  cells_[hole] = Cell{};
}

ReplyCache::Slot* ReplyCache::Find(const Ticket& ticket) {
  if (ticket.slot >= slots_.size()) return nullptr;
  Slot& slot = slots_[ticket.slot];
  return slot.indexed && slot.generation == ticket.generation ? &slot : nullptr;
}

ReplyCache::Lookup ReplyCache::Begin(const Key& key, std::vector<uint8_t>& reply,
                                     std::chrono::steady_clock::time_point now, Ticket& ticket) {
  const uint64_t hash = Hash(key);
  uint32_t cell = Probe(key, hash);
  if (cells_[cell].slot_plus_one != 0) {
    Slot& slot = slots_[cells_[cell].slot_plus_one - 1];
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
  slot.hash = hash;
  slot.indexed = true;
  slot.done = false;
  ++slot.generation;
  slot.reply.clear();
  slot.created = now;
  // Removals may have shifted the run this key probes: find its empty cell again.
  cell = Probe(key, hash);
  cells_[cell] = Cell{static_cast<uint32_t>(index + 1), static_cast<uint32_t>(hash)};
  slot.cell = cell;
  ++size_;
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
