// store_crash_child URI NODE: the victim of the crash tests. Opens the store and issues durable
// registrations (mon_name "host-N"), 64 in flight, as fast as it can until it is killed; writes
// N on a line of its own to stdout as soon as registration N is acknowledged as durable.
#include <atomic>
#include <csignal>
#include <cstdio>
#include <exception>
#include <functional>
#include <memory>
#include <string>

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
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s URI NODE\n", argv[0]);
    return 2;
  }
  try {
    nlockd::store::StoreOptions options;
    options.node_id = argv[2];
    options.boot_id = "crash-test-boot";
    std::unique_ptr<nlockd::store::Store> store = nlockd::store::OpenStore(argv[1], options);
    std::atomic<int> next{0};
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
