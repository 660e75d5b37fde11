// SPDX-License-Identifier: Apache-2.0
// store_crash_child URI NODE [locks]: the victim of the crash tests. Opens the store and issues
// durable registrations (mon_name "host-N") or, with "locks", lock-table writes (a lock at
// offset N, ApplyLockChanges), 64 in flight, as fast as it can until it is killed; writes N on a
// line of its own to stdout as soon as write N is acknowledged.
#include <atomic>
#include <csignal>
#include <cstdio>
#include <exception>
#include <functional>
#include <memory>
#include <semaphore>
#include <string>
#include <vector>

#include <unistd.h>

#include "store/open_store.hpp"

namespace {

constexpr int kInFlight = 64;

void WriteAll(const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = write(STDOUT_FILENO, data, size);
    if (n <= 0) {
      _exit(3);  // the parent is gone
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 && argc != 4) {
    std::fprintf(stderr, "usage: %s URI NODE [locks]\n", argv[0]);
    return 2;
  }
  try {
    nlockd::store::StoreOptions options;
    options.node_id = argv[2];
    options.boot_id = "crash-test-boot";
    std::unique_ptr<nlockd::store::Store> store = nlockd::store::OpenStore(argv[1], options);
    std::atomic<int> next{0};
    const bool locks = argc == 4 && std::string(argv[3]) == "locks";
    std::function<void()> issue = [&] {
      const int id = next++;

      nlockd::store::Registration r;
      r.mon_name = "host-" + std::to_string(id);
      r.my_id = nlockd::store::MyId{"lockd", 100021, 4, 16};
      r.priv.fill(static_cast<uint8_t>(id));
      r.source_address = "127.0.0.1";
      store->PutRegistration(std::move(r), [&issue, id](std::exception_ptr error) {
        if (!error) {
          const std::string line = std::to_string(id) + "\n";
          WriteAll(line.data(), line.size());
        }
        issue();
      });
    };
    if (locks) {
      // The lock log acknowledges on the calling thread: a loop, not a chain of completions.
      std::counting_semaphore<kInFlight> slots(kInFlight);
      for (int id = 0;; ++id) {
        slots.acquire();
        nlockd::store::LockRecord lock;
        lock.file_key = "crash-file";
        lock.host = "crash-host";
        lock.svid = id % 64;
        lock.owner_handle = "crash-owner";
        lock.exclusive = true;
        lock.offset = static_cast<uint64_t>(id);
        lock.length = 1;
        std::vector<nlockd::store::LockChange> changes{nlockd::store::PutLock{std::move(lock)}};
        store->ApplyLockChanges(std::move(changes), [&slots, id](std::exception_ptr error) {
          if (!error) {
            const std::string line = std::to_string(id) + "\n";
            WriteAll(line.data(), line.size());
          }
          slots.release();
        });
      }
    }
    for (int i = 0; i < kInFlight; ++i) {
      issue();
    }
    for (;;) {
      pause();
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "store_crash_child: %s\n", e.what());
    return 1;
  }
}
