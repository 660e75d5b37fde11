#pragma once

#include <string>

#include "bench/load/load_generator.hpp"

namespace nlockd::bench {

// NLM version 4 LOCK then UNLOCK, over and over, each lane with its own owner (svid) and its own
// byte range of one shared file, so that nothing conflicts and every call must answer GRANTED.
// Lanes of one connection share a caller_name; with distinct source addresses each connection
// is a different client host to the server.
class NlmLockUnlockWorkload : public Workload {
 public:
  // `run` names the file, so that runs against one server never meet each other's locks (a run
  // ends with some lanes holding their lock).
  NlmLockUnlockWorkload(size_t pipeline, uint64_t run) : pipeline_(pipeline), run_(run) {}
  std::string name() const override { return "NLM4 LOCK+UNLOCK"; }
  CallSpec Next(size_t connection, size_t lane, uint64_t seq) override;
  bool Check(const CallSpec& call, std::span<const uint8_t> result) override;

 private:
  size_t pipeline_;
  uint64_t run_;
};

}  // namespace nlockd::bench
