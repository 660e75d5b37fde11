// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <asio/ip/address.hpp>

namespace nlockd::rpc {

// The duplicate request cache: a retransmitted call (same client address, xid, program,
// version, procedure and arguments) is answered with the reply of the first execution instead
// of being executed again, and a retransmission that arrives while the first is still running
// is dropped (the client will retransmit again and then get the cached reply). This keeps a
// retransmitted LOCK from being applied after the client gave up on it (ganesha#951) and a
// UDP-retransmitted UNLOCK from undoing a later LOCK.
//
// The key leaves out the client port so that a TCP client that reconnects still matches; the
// arguments' checksum keeps an xid reused by another process on the same host from matching.
// Bounded in entries (least recently inserted evicted first) and in age. Entries live in a ring
// of slots reused in insertion order, with their reply buffers, so that a call costs no
// allocation once the ring is full (an abandoned entry's slot waits for its turn, so abandoned
// calls lower the bound a little). The index is an open-addressing table of slot numbers with
// a hash fragment each: a lookup touches one table line and the matching slot, and evicting the
// oldest entry touches its own cell (a node-based map cost a cold bucket walk for each, the
// largest item of an NLM call's profile). One executor; not thread-safe.
class ReplyCache {
 public:
  struct Options {
    size_t max_entries = 8192;  // Bounds memory: about 200 bytes per entry plus the reply.
    std::chrono::steady_clock::duration max_age = std::chrono::seconds(120);
  };

  struct Key {
    asio::ip::address client;
    uint32_t xid = 0;
    uint32_t program = 0;
    uint32_t version = 0;
    uint32_t procedure = 0;
    uint64_t args_checksum = 0;
    bool operator==(const Key&) const = default;
  };

  enum class Lookup {
    kNew,         // Not seen: execute it (Begin was recorded).
    kInProgress,  // The first execution is still running: send nothing.
    kReplay,      // Answered before: `reply` holds the cached reply.
  };

  // Names the entry Begin recorded for a new call, so that Finish and Abandon find it without
  // a second lookup. Stale (and ignored) once the entry was evicted or expired.
  struct Ticket {
    size_t slot = 0;
    uint64_t generation = 0;
  };

  ReplyCache() : ReplyCache(Options{}) {}
  explicit ReplyCache(Options options);

  // Looks the call up; for a new call, records it as in progress and sets `ticket`.
  Lookup Begin(const Key& key, std::vector<uint8_t>& reply,
               std::chrono::steady_clock::time_point now, Ticket& ticket);
  // Stores the reply of a call that Begin reported as new.
  void Finish(const Ticket& ticket, std::span<const uint8_t> reply);
  // Forgets a call that ended without a reply worth replaying.
  void Abandon(const Ticket& ticket);

  size_t size() const { return size_; }
  uint64_t replays() const { return replays_; }
  uint64_t dropped_in_progress() const { return dropped_in_progress_; }

  static uint64_t Checksum(std::span<const uint8_t> bytes);

 private:
  static uint64_t Hash(const Key& key);

  struct Slot {
    Key key;
    uint64_t hash = 0;
    bool indexed = false;  // False once abandoned or found too old.
    bool done = false;
    uint64_t generation = 0;     // Bumped each time the slot takes a new call.
    uint32_t cell = 0;           // Its cell in the index while `indexed`.
    std::vector<uint8_t> reply;  // Its capacity is kept when the slot is reused.
    std::chrono::steady_clock::time_point created;
  };
  // An index cell: 0 for empty, else the slot number + 1, with the low bits of the key's hash
  // so that probing needs no slot but the match.
  struct Cell {
    uint32_t slot_plus_one = 0;
    uint32_t hash = 0;
  };

  // The cell of `key`, or the empty cell where it would go.
  uint32_t Probe(const Key& key, uint64_t hash) const;
  // Removes an entry from the index (backward-shift deletion keeps the probes short).
  void Unindex(Slot& slot);
  // The slot a ticket names, if it still holds that call's entry.
  Slot* Find(const Ticket& ticket);

  Options options_;
  std::vector<Cell> cells_;  // A power of two, at least twice max_entries: load <= 1/2.
  uint32_t mask_ = 0;
  size_t size_ = 0;
  std::vector<Slot> slots_;  // Grows to max_entries, then reused from next_ on.
  size_t next_ = 0;          // The slot the next new call takes (the oldest once full).
  uint64_t replays_ = 0;
  uint64_t dropped_in_progress_ = 0;
};

}  // namespace nlockd::rpc
