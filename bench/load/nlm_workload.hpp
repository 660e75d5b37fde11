// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <string>

#include "bench/load/load_generator.hpp"

namespace nlockd::bench {

// The NLM workloads lock one file, named by its file handle `file`: BenchFile(run) for a server
// that takes any handle (nlockd), a real file's NFS handle for one that locks only those.

// NLM version 4 LOCK then UNLOCK, over and over, each lane with its own owner (svid) and its own
// byte range of one shared file, so that nothing conflicts and every call must answer GRANTED.
// Lanes of one connection share a caller_name; with distinct source addresses each connection
// is a different client host to the server.
class NlmLockUnlockWorkload : public Workload {
 public:
  // A file of its own per run keeps runs against one server from meeting each other's locks (a
  // run ends with some lanes holding their lock).
  NlmLockUnlockWorkload(size_t pipeline, std::string file)
      : pipeline_(pipeline), file_(std::move(file)) {}
  std::string name() const override { return "NLM4 LOCK+UNLOCK"; }
  CallSpec Next(size_t connection, size_t lane, uint64_t seq) override;
  bool Check(const CallSpec& call, std::span<const uint8_t> result) override;

 private:
  size_t pipeline_;
  std::string file_;
};

// NLM version 4 blocking LOCK then CANCEL, over and over: a holder (HolderLock) has the whole
// file, so that each lane's LOCK waits (BLOCKED) and its CANCEL withdraws the wait (GRANTED).
// Every LOCK queues a waiter while the other lanes' waiters are queued, so the server runs its
// deadlock check on each one; nothing is journaled and no grant is ever sent.
class NlmBlockCancelWorkload : public Workload {
 public:
  NlmBlockCancelWorkload(size_t pipeline, std::string file)
      : pipeline_(pipeline), file_(std::move(file)) {}
  std::string name() const override { return "NLM4 blocking LOCK+CANCEL"; }
  CallSpec Next(size_t connection, size_t lane, uint64_t seq) override;
  bool Check(const CallSpec& call, std::span<const uint8_t> result) override;
  // The holder's LOCK of the whole file, to send once before the run.
  CallSpec HolderLock() const;

 private:
  size_t pipeline_;
  std::string file_;
};

// NLM version 4 LOCKs that fill one file with `locks` one-byte exclusive locks of one owner, at
// every other byte (so that they never merge): the prefill of NlmTestWorkload.
class NlmFillWorkload : public Workload {
 public:
  explicit NlmFillWorkload(std::string file) : file_(std::move(file)) {}
  std::string name() const override { return "NLM4 LOCK (fill)"; }
  CallSpec Next(size_t connection, size_t lane, uint64_t seq) override;
  bool Check(const CallSpec& call, std::span<const uint8_t> result) override;

 private:
  std::string file_;
  uint64_t next_ = 0;
};

// NLM version 4 TEST of one byte of the file NlmFillWorkload(file) filled with `locks` locks, at
// positions spread over the filled range: half of them hit a lock (DENIED with the holder),
// half fall between two (GRANTED). Each lane tests as its own owner.
class NlmTestWorkload : public Workload {
 public:
  NlmTestWorkload(uint64_t locks, std::string file) : locks_(locks), file_(std::move(file)) {}
  std::string name() const override;
  CallSpec Next(size_t connection, size_t lane, uint64_t seq) override;
  bool Check(const CallSpec& call, std::span<const uint8_t> result) override;

 private:
  uint64_t locks_;
  std::string file_;
};

// A made-up file handle for run `run` of the NLM workloads.
std::string BenchFile(uint64_t run);

}  // namespace nlockd::bench
