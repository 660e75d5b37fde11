// SPDX-License-Identifier: Apache-2.0
#include "nsm/registry.hpp"

#include <algorithm>

#include <asio/ip/address.hpp>

#include "base/host_name.hpp"
#include "rpc/address.hpp"

namespace nlockd::nsm {

std::string FoldName(const std::string& name) { return FoldHostName(name); }

std::optional<std::string> NormalizedAddressLiteral(const std::string& text) {
  asio::error_code ec;
  auto address = asio::ip::make_address(text, ec);
  if (ec) return std::nullopt;
  return rpc::AddressToString(rpc::NormalizeAddress(address));
}

bool StateIsNewer(int32_t candidate, int32_t known) {
  auto diff = static_cast<int32_t>(static_cast<uint32_t>(candidate) - static_cast<uint32_t>(known));
  return diff > 0;
}

Registry::Key Registry::KeyOf(const std::string& mon_name, const store::MyId& my_id) {
  return {mon_name, my_id.my_name, my_id.my_prog, my_id.my_vers, my_id.my_proc};
}

bool Registry::WouldExceedLimit(const std::string& mon_name, const store::MyId& my_id) const {
  return registrations_.size() >= limit_ && !registrations_.contains(KeyOf(mon_name, my_id));
}

Registry::PutResult Registry::Put(const store::Registration& registration) {
  Key key = KeyOf(registration.mon_name, registration.my_id);
  auto it = registrations_.find(key);
  if (it != registrations_.end()) {
    it->second.priv = registration.priv;
    it->second.source_address = registration.source_address;
    it->second.updated = registration.updated;
    return PutResult::kUpdated;
  }
  if (registrations_.size() >= limit_) return PutResult::kFull;
  registrations_.emplace(key, registration);
  std::string folded = FoldName(registration.mon_name);
  PeerState& peer = peers_[folded];
  if (peer.registrations.empty()) peer.name = registration.mon_name;
  peer.registrations.insert(key);
  if (auto literal = NormalizedAddressLiteral(registration.mon_name)) {
    peer.addresses.insert(*literal);
    by_address_[*literal].insert(folded);
  }
  return PutResult::kAdded;
}

const store::Registration* Registry::Find(const std::string& mon_name,
                                          const store::MyId& my_id) const {
  auto it = registrations_.find(KeyOf(mon_name, my_id));
  return it == registrations_.end() ? nullptr : &it->second;
}

void Registry::Unlink(const Key& key, const std::string& mon_name) {
  std::string folded = FoldName(mon_name);
  auto peer = peers_.find(folded);
  if (peer == peers_.end()) return;
  peer->second.registrations.erase(key);
  if (!peer->second.registrations.empty()) return;
  // The last registration of a peer went: so does what we knew of it.
  for (const auto& address : peer->second.addresses) {
    auto names = by_address_.find(address);
    if (names == by_address_.end()) continue;
    names->second.erase(folded);
    if (names->second.empty()) by_address_.erase(names);
  }
  peers_.erase(peer);
}

bool Registry::Remove(const std::string& mon_name, const store::MyId& my_id) {
  Key key = KeyOf(mon_name, my_id);
  if (registrations_.erase(key) == 0) return false;
  Unlink(key, mon_name);
  return true;
}

size_t Registry::RemoveAllOf(const store::MyId& my_id) {
  std::vector<Key> doomed;
  for (const auto& [key, registration] : registrations_) {
    if (registration.my_id == my_id) doomed.push_back(key);
  }
  for (const auto& key : doomed) {
    registrations_.erase(key);
    Unlink(key, std::get<0>(key));
  }
  return doomed.size();
}

void Registry::Clear() {
  registrations_.clear();
  peers_.clear();
  by_address_.clear();
}

void Registry::AddPeerAddress(const std::string& mon_name, const std::string& address) {
  auto normalised = NormalizedAddressLiteral(address);
  if (!normalised) return;
  std::string folded = FoldName(mon_name);
  auto peer = peers_.find(folded);
  if (peer == peers_.end()) return;
  peer->second.addresses.insert(*normalised);
  by_address_[*normalised].insert(folded);
}

void Registry::SetPeerState(const std::string& mon_name, int32_t state) {
  auto peer = peers_.find(FoldName(mon_name));
  if (peer == peers_.end()) return;
  if (state == 0) {
    peer->second.state.reset();
  } else {
    peer->second.state = state;
  }
}

int32_t Registry::StateOf(const std::string& mon_name) const {
  auto peer = peers_.find(FoldName(mon_name));
  return peer == peers_.end() ? 0 : peer->second.state.value_or(0);
}

Registry::Peer Registry::View(const PeerState& peer) const {
  Peer view{peer.name, peer.addresses, peer.state, {}};
  for (const auto& key : peer.registrations) view.registrations.push_back(&registrations_.at(key));
  return view;
}

std::vector<Registry::Peer> Registry::Match(const std::string& mon_name,
                                            const std::string& source) const {
  std::set<std::string> keys;
  std::string folded = FoldName(mon_name);
  if (peers_.contains(folded)) keys.insert(folded);
  std::vector<std::string> addresses;
  if (auto literal = NormalizedAddressLiteral(mon_name)) addresses.push_back(*literal);
  if (!source.empty()) addresses.push_back(source);
  for (const auto& address : addresses) {
    auto names = by_address_.find(address);
    if (names != by_address_.end()) keys.insert(names->second.begin(), names->second.end());
  }
  std::vector<Peer> out;
  for (const auto& key : keys) out.push_back(View(peers_.at(key)));
  return out;
}

std::vector<Registry::Peer> Registry::Peers() const {
  std::vector<Peer> out;
  out.reserve(peers_.size());
  for (const auto& [key, peer] : peers_) out.push_back(View(peer));
  std::sort(out.begin(), out.end(),
            [](const Peer& a, const Peer& b) { return FoldName(a.name) < FoldName(b.name); });
  return out;
}

std::vector<store::Registration> Registry::All() const {
  std::vector<store::Registration> out;
  out.reserve(registrations_.size());
  for (const auto& [key, registration] : registrations_) out.push_back(registration);
  return out;
}

}  // namespace nlockd::nsm
