// SPDX-License-Identifier: Apache-2.0
#include "nsm/registry.hpp"

#include <gtest/gtest.h>

namespace nlockd::nsm {
namespace {

store::MyId Lockd(int32_t proc = 16) { return store::MyId{"localhost", 100021, 4, proc}; }

store::Registration Reg(const std::string& mon_name, store::MyId my_id = Lockd(),
                        uint8_t priv0 = 0) {
  store::Registration registration;
  registration.mon_name = mon_name;
  registration.my_id = std::move(my_id);
  registration.priv[0] = priv0;
  registration.source_address = "127.0.0.1";
  return registration;
}

// Renders what an SM_NOTIFY would reach: "peer[addresses](state):mon_name/proc ...".
std::string Render(const std::vector<Registry::Peer>& peers) {
  std::string out;
  for (const auto& peer : peers) {
    if (!out.empty()) out += " ";
    out += peer.name + "[";
    bool first = true;
    for (const auto& address : peer.addresses) {
      out += (first ? "" : ",") + address;
      first = false;
    }
    out += "](" + (peer.state ? std::to_string(*peer.state) : std::string("?")) + "):";
    for (const auto* registration : peer.registrations) {
      out += registration->mon_name + "/" + std::to_string(registration->my_id.my_proc) + ";";
    }
  }
  return out;
}

TEST(Registry, SameMonNameAndMyIdUpdatesInsteadOfDuplicating) {
  Registry registry(10);
  EXPECT_EQ(registry.Put(Reg("client", Lockd(), 1)), Registry::PutResult::kAdded);
  EXPECT_EQ(registry.Put(Reg("client", Lockd(), 2)), Registry::PutResult::kUpdated);
  EXPECT_EQ(registry.size(), 1u);
  EXPECT_EQ(registry.Find("client", Lockd())->priv[0], 2);
  EXPECT_EQ(registry.Put(Reg("client", Lockd(17))), Registry::PutResult::kAdded);
  EXPECT_EQ(registry.size(), 2u);
  EXPECT_EQ(registry.peer_count(), 1u);
}

TEST(Registry, LimitRefusesNewRegistrationsButStillUpdates) {
  Registry registry(2);
  EXPECT_EQ(registry.Put(Reg("a")), Registry::PutResult::kAdded);
  EXPECT_EQ(registry.Put(Reg("b")), Registry::PutResult::kAdded);
  EXPECT_TRUE(registry.WouldExceedLimit("c", Lockd()));
  EXPECT_FALSE(registry.WouldExceedLimit("a", Lockd()));
  EXPECT_EQ(registry.Put(Reg("c")), Registry::PutResult::kFull);
  EXPECT_EQ(registry.Put(Reg("a", Lockd(), 9)), Registry::PutResult::kUpdated);
  EXPECT_EQ(registry.size(), 2u);
  EXPECT_TRUE(registry.Remove("a", Lockd()));
  EXPECT_EQ(registry.Put(Reg("c")), Registry::PutResult::kAdded);
}

TEST(Registry, NamesMatchCaseInsensitively) {
  Registry registry(10);
  registry.Put(Reg("Client.Example"));
  registry.Put(Reg("client.example", Lockd(17)));
  EXPECT_EQ(Render(registry.Match("CLIENT.example", "")),
            "Client.Example[](?):Client.Example/16;client.example/17;");
  EXPECT_EQ(Render(registry.Match("other", "")), "");
}

TEST(Registry, IpLiteralMonNamesMatchByAddressWithMappedV6Normalised) {
  Registry registry(10);
  registry.Put(Reg("::ffff:10.0.0.7"));
  // Linux clients register by address but notify with their host name: the source matches.
  EXPECT_EQ(Render(registry.Match("client7", "10.0.0.7")),
            "::ffff:10.0.0.7[10.0.0.7](?):::ffff:10.0.0.7/16;");
  EXPECT_EQ(Render(registry.Match("10.0.0.7", "")),
            "::ffff:10.0.0.7[10.0.0.7](?):::ffff:10.0.0.7/16;");
  EXPECT_EQ(Render(registry.Match("client7", "10.0.0.8")), "");
}

TEST(Registry, KnownPeerAddressesAndStateAreKeptPerPeer) {
  Registry registry(10);
  registry.Put(Reg("client"));
  registry.AddPeerAddress("CLIENT", "::ffff:192.0.2.5");
  registry.AddPeerAddress("client", "not an address");
  registry.SetPeerState("client", 7);
  EXPECT_EQ(Render(registry.Match("x", "192.0.2.5")), "client[192.0.2.5](7):client/16;");
  registry.SetPeerState("client", 0);
  EXPECT_EQ(Render(registry.Peers()), "client[192.0.2.5](?):client/16;");
}

TEST(Registry, LastRegistrationGoneForgetsThePeerAndItsAddresses) {
  Registry registry(10);
  registry.Put(Reg("client"));
  registry.AddPeerAddress("client", "192.0.2.5");
  EXPECT_FALSE(registry.Remove("client", Lockd(99)));
  EXPECT_TRUE(registry.Remove("client", Lockd()));
  EXPECT_EQ(registry.peer_count(), 0u);
  EXPECT_EQ(Render(registry.Match("x", "192.0.2.5")), "");
}

TEST(Registry, RemoveAllOfTakesEveryRegistrationOfOneCallback) {
  Registry registry(10);
  registry.Put(Reg("a"));
  registry.Put(Reg("b"));
  registry.Put(Reg("b", Lockd(17)));
  EXPECT_EQ(registry.RemoveAllOf(Lockd()), 2u);
  EXPECT_EQ(Render(registry.Peers()), "b[](?):b/17;");
}

TEST(Registry, PeersListsEachDistinctHostOnce) {
  Registry registry(10);
  registry.Put(Reg("b"));
  registry.Put(Reg("B", Lockd(17)));
  registry.Put(Reg("a"));
  EXPECT_EQ(Render(registry.Peers()), "a[](?):a/16; b[](?):B/17;b/16;");
}

TEST(StateIsNewer, ComparesAcrossTheWrap) {
  EXPECT_TRUE(StateIsNewer(3, 1));
  EXPECT_FALSE(StateIsNewer(1, 3));
  EXPECT_FALSE(StateIsNewer(5, 5));
  EXPECT_TRUE(StateIsNewer(INT32_MIN + 1, INT32_MAX));  // wrapped forward
  EXPECT_FALSE(StateIsNewer(INT32_MAX, INT32_MIN + 1));
  EXPECT_TRUE(StateIsNewer(1, -1));
}

}  // namespace
}  // namespace nlockd::nsm
