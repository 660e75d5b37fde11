// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "store/records.hpp"

namespace nlockd::nsm {

// The monitor registrations (SM_MON, and nlockd's own NLM asking to watch a client) in memory,
// indexed for matching an incoming SM_NOTIFY, and what is known of each monitored peer: its
// addresses and its last NSM state. Pure logic: the service persists before it changes this.
// Runs on the NSM executor; not thread-safe.
//
// A registration is identified exactly by (mon_name, my_id), as the store keys it; a peer by
// its mon_name compared case-insensitively (host names are), so "Client" and "client" are one
// peer with two registrations. An IP-literal mon_name is also an address of its peer,
// IPv4-mapped IPv6 normalised (::ffff:10.0.0.1 is 10.0.0.1).
class Registry {
 public:
  // `limit` bounds the registrations held (default 10,000): an unprivileged local
  // user of SM_MON, or a flood of client hosts, cannot make the monitor grow without end.
  explicit Registry(size_t limit) : limit_(limit) {}

  enum class PutResult { kAdded, kUpdated, kFull };
  // Adds the registration, or updates priv and source_address of the one with the same
  // (mon_name, my_id): a second SM_MON never duplicates. kFull (nothing changed) past the limit.
  PutResult Put(const store::Registration& registration);
  // Whether Put would add (not update) and the limit forbids it.
  bool WouldExceedLimit(const std::string& mon_name, const store::MyId& my_id) const;
  const store::Registration* Find(const std::string& mon_name, const store::MyId& my_id) const;
  bool Remove(const std::string& mon_name, const store::MyId& my_id);
  // Removes every registration whose callback is my_id; returns how many.
  size_t RemoveAllOf(const store::MyId& my_id);
  void Clear();

  // Records an address the peer named mon_name speaks from (a client's NLM source address).
  // REQUIRES: the peer has a registration.
  void AddPeerAddress(const std::string& mon_name, const std::string& address);
  // The peer's last known NSM state (0 and unknown are the same: "no state seen").
  void SetPeerState(const std::string& mon_name, int32_t state);
  // 0 when none was seen, or no peer has that name.
  int32_t StateOf(const std::string& mon_name) const;

  struct Peer {
    std::string name;                 // mon_name as first registered
    std::set<std::string> addresses;  // normalised IP literals
    std::optional<int32_t> state;
    std::vector<const store::Registration*> registrations;
  };
  // The peers an SM_NOTIFY(mon_name) from `source` (a normalised address, or empty) may be
  // about: the peer of that name, peers that have mon_name as an address (IP-literal
  // notifier name), and peers that have `source` as an address (Linux clients register by
  // address but notify with their host name). Each peer once, in a stable order.
  std::vector<Peer> Match(const std::string& mon_name, const std::string& source) const;

  // One entry per distinct monitored peer, for the restart notification round.
  std::vector<Peer> Peers() const;
  std::vector<store::Registration> All() const;
  size_t size() const { return registrations_.size(); }
  size_t peer_count() const { return peers_.size(); }
  size_t limit() const { return limit_; }

 private:
  using Key = std::tuple<std::string, std::string, int32_t, int32_t, int32_t>;
  struct PeerState {
    std::string name;
    std::set<std::string> addresses;
    std::optional<int32_t> state;
    std::set<Key> registrations;
  };

  static Key KeyOf(const std::string& mon_name, const store::MyId& my_id);
  Peer View(const PeerState& peer) const;
  void Unlink(const Key& key, const std::string& mon_name);

  size_t limit_;
  std::map<Key, store::Registration> registrations_;
  std::unordered_map<std::string, PeerState> peers_;                   // by lower-cased mon_name
  std::unordered_map<std::string, std::set<std::string>> by_address_;  // address -> peer keys
};

// The key of a mon_name: FoldHostName (every module compares host names that one way).
std::string FoldName(const std::string& name);

// The normalised text of an IP literal ("::ffff:10.0.0.1" -> "10.0.0.1"), or nullopt.
std::optional<std::string> NormalizedAddressLiteral(const std::string& text);

// Whether state `candidate` is newer than `known` in serial-number arithmetic (RFC 1982 on 32
// bits): the counter wraps, so "larger" means "less than 2^31 ahead".
bool StateIsNewer(int32_t candidate, int32_t known);

}  // namespace nlockd::nsm
