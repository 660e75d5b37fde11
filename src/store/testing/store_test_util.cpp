// SPDX-License-Identifier: Apache-2.0
#include "store/testing/store_test_util.hpp"

#include <algorithm>
#include <cstdlib>
#include <future>
#include <random>
#include <sstream>
#include <vector>

#include <fmt/format.h>
#include <unistd.h>

#include "base/error.hpp"
#include "store/log/logged_store.hpp"
#include "store/memory/memory_store.hpp"
#include "store/postgres/pg_conn.hpp"
#include "store/postgres/pg_store.hpp"
#include "store/sqlite/sqlite_store.hpp"
#include "testutil/temp_dir.hpp"

namespace nlockd::store::testutil {

void Sync(const std::function<void(Done)>& start) {
  std::promise<void> committed;
  std::future<void> result = committed.get_future();
  start([&committed](std::exception_ptr error) {
    if (error) {
      committed.set_exception(error);
    } else {
      committed.set_value();
    }
  });
  result.get();
}

std::optional<std::string> PgTestUri() {
  const char* uri = std::getenv("NLOCKD_TEST_PG_URI");
  if (uri == nullptr || *uri == '\0') {
    return std::nullopt;
  }
  return std::string(uri);
}

std::string UniqueNodeId(const std::string& prefix) {
  static std::atomic<int> counter{0};
  static const uint32_t run = std::random_device{}();
  return fmt::format("{}-{}-{:08x}-{}", prefix, getpid(), run, counter++);
}

void PgExec(const std::string& uri, const std::string& sql) {
  try {
    PgConn(uri, std::chrono::seconds(5)).Exec(sql);
  } catch (const Error& e) {
    throw Error(ErrorKind::kFailed, fmt::format("PgExec({}): {}", sql, e.what()));
  }
}

std::string FreshPgSchemaUri(const std::string& prefix) {
  const std::optional<std::string> base = PgTestUri();
  NLOCKD_REQUIRE(base.has_value());
  std::string schema = UniqueNodeId(prefix);
  std::replace_if(
      schema.begin(), schema.end(), [](char c) { return c == '-'; }, '_');
  PgExec(*base, fmt::format("CREATE SCHEMA {}", schema));
  const char separator = base->find('?') == std::string::npos ? '?' : '&';
  return fmt::format("{}{}options=-csearch_path%3D{}", *base, separator, schema);
}

namespace {

class MemoryBackend final : public TestBackend {
 public:
  std::unique_ptr<Store> Open(StoreOptions options) override {
    if (options.node_id == "default") options.node_id = node_;
    return std::make_unique<MemoryStore>(std::move(options));
  }
  bool persistent() const override { return false; }
  std::string uri() const override { return "memory:"; }
};

class SqliteBackend final : public TestBackend {
 public:
  // split_scan: every LoadAll() reads the locks on two connections at once, as it does for a
  // large file (the tests' files are small).
  explicit SqliteBackend(bool split_scan = false) : split_scan_(split_scan) {}
  std::unique_ptr<Store> Open(StoreOptions options) override {
    if (options.node_id == "default") options.node_id = node_;
    if (split_scan_) options.sqlite_split_scan_min_bytes = 0;
    return std::make_unique<SqliteStore>(path(), std::move(options));
  }
  bool persistent() const override { return true; }
  std::string uri() const override { return "sqlite:" + path(); }

 private:
  std::string path() const { return dir_.path() + "/var/nlockd.db"; }
  nlockd::testutil::TempDir dir_{"store"};
  bool split_scan_;
};

// SQLite behind the lock log, as OpenStore("sqlite:...") builds it.
class LoggedSqliteBackend final : public TestBackend {
 public:
  std::unique_ptr<Store> Open(StoreOptions options) override {
    if (options.node_id == "default") options.node_id = node_;
    return std::make_unique<LoggedStore>(std::make_unique<SqliteStore>(path(), std::move(options)),
                                         path() + ".journal");
  }
  bool persistent() const override { return true; }
  std::string uri() const override { return "sqlite:" + path(); }

 private:
  std::string path() const { return dir_.path() + "/var/nlockd.db"; }
  nlockd::testutil::TempDir dir_{"store"};
};

class PgBackend final : public TestBackend {
 public:
  std::unique_ptr<Store> Open(StoreOptions options) override {
    if (options.node_id == "default") options.node_id = node_;
    return std::make_unique<PgStore>(uri_, std::move(options));
  }
  bool persistent() const override { return true; }
  bool on_database_server() const override { return true; }
  std::string uri() const override { return uri_; }

 private:
  std::string uri_ = *PgTestUri();
};

}  // namespace

std::unique_ptr<TestBackend> MakeMemoryBackend() { return std::make_unique<MemoryBackend>(); }
std::unique_ptr<TestBackend> MakeSqliteBackend() { return std::make_unique<SqliteBackend>(); }
std::unique_ptr<TestBackend> MakeSqliteSplitScanBackend() {
  return std::make_unique<SqliteBackend>(/*split_scan=*/true);
}
std::unique_ptr<TestBackend> MakeLoggedSqliteBackend() {
  return std::make_unique<LoggedSqliteBackend>();
}
std::unique_ptr<TestBackend> MakePgBackend() { return std::make_unique<PgBackend>(); }

std::string Printable(const std::string& bytes) {
  std::string out;
  for (char c : bytes) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f && c != '\\') {
      out.push_back(c);
    } else {
      out += fmt::format("\\x{:02x}", u);
    }
  }
  return out;
}

std::string Dump(const LoadedState& state) {
  std::vector<std::string> lines;
  lines.push_back(fmt::format("state {}", state.state));
  for (const Registration& r : state.registrations) {
    std::string priv;
    for (uint8_t b : r.priv) priv += fmt::format("{:02x}", b);
    lines.push_back(fmt::format("reg {} -> {}/{}/{}/{} priv={} from={}", Printable(r.mon_name),
                                Printable(r.my_id.my_name), r.my_id.my_prog, r.my_id.my_vers,
                                r.my_id.my_proc, priv, Printable(r.source_address)));
  }
  for (const LockRecord& l : state.locks) {
    lines.push_back(fmt::format("lock {} {}/{}/{} {} {}+{}", Printable(l.file_key),
                                Printable(l.host), l.svid, Printable(l.owner_handle),
                                l.exclusive ? "ex" : "sh", l.offset, l.length));
  }
  for (const ShareRecord& s : state.shares) {
    lines.push_back(fmt::format("share {} {}/{} mode={} access={}", Printable(s.file_key),
                                Printable(s.host), Printable(s.owner_handle), s.mode, s.access));
  }
  for (const NotifyOwed& n : state.notify_owed) {
    lines.push_back(fmt::format("owed {} at={} state={} attempts={}", Printable(n.mon_name),
                                Printable(n.address), n.state, n.attempts));
  }
  std::sort(lines.begin() + 1, lines.end());
  std::string out;
  for (const std::string& line : lines) {
    out += line;
    out += '\n';
  }
  return out;
}

Registration MakeRegistration(const std::string& mon_name, const std::string& my_name, int32_t proc,
                              uint8_t priv_fill) {
  Registration r;
  r.mon_name = mon_name;
  r.my_id = MyId{my_name, 100021, 4, proc};
  r.priv.fill(priv_fill);
  r.source_address = "127.0.0.1";
  return r;
}

LockRecord MakeLock(const std::string& file, const std::string& host, int32_t svid, uint64_t offset,
                    uint64_t length, bool exclusive) {
  return LockRecord{file, host, svid, "oh-" + host, exclusive, offset, length};
}

ShareRecord MakeShare(const std::string& file, const std::string& host, int32_t mode,
                      int32_t access) {
  return ShareRecord{file, host, "oh-" + host, mode, access};
}

}  // namespace nlockd::store::testutil
