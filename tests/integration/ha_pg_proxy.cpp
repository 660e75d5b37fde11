// SPDX-License-Identifier: Apache-2.0
#include "integration/ha_pg_proxy.hpp"

#include <cerrno>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <vector>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

namespace nlockd::integration::hafault {
namespace {

// The untyped packets that precede the startup message (PostgreSQL protocol, "Message
// Formats"): the server answers each with one byte and another packet follows.
constexpr uint32_t kSslRequest = 80877103;
constexpr uint32_t kGssEncRequest = 80877104;

uint32_t BigEndian32(const std::string& bytes, size_t at) {
  uint32_t value = 0;
  for (size_t i = 0; i < 4; ++i) value = (value << 8) | static_cast<uint8_t>(bytes[at + i]);
  return value;
}

void SendAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t sent = send(fd, data, size, MSG_NOSIGNAL);
    if (sent <= 0) {
      if (sent < 0 && errno == EINTR) continue;
      return;  // the peer went away: its read side notices
    }
    data += sent;
    size -= static_cast<size_t>(sent);
  }
}

int Close(int fd) {
  if (fd >= 0) close(fd);
  return -1;
}

}  // namespace

struct PgProxy::Connection {
  int client = -1;
  int server = -1;
  std::string inbound;   // the frontend's bytes not yet forwarded (an incomplete message)
  bool started = false;  // past the startup message: typed messages follow
  bool cut_after_execute = false;
};

PgProxy::PgProxy(const std::string& listen_address, const std::string& upstream_host,
                 uint16_t upstream_port)
    : upstream_host_(upstream_host), upstream_port_(upstream_port) {
  listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  if (listen_fd_ < 0 || inet_pton(AF_INET, listen_address.c_str(), &address.sin_addr) != 1 ||
      bind(listen_fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      listen(listen_fd_, 64) != 0) {
    const std::string why = std::strerror(errno);
    Close(listen_fd_);
    throw std::runtime_error("pg proxy: cannot listen on " + listen_address + ": " + why);
  }
  socklen_t length = sizeof address;
  getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&address), &length);
  port_ = ntohs(address.sin_port);
  wake_fd_ = eventfd(0, EFD_CLOEXEC);
  thread_ = std::thread([this] { Run(); });
}

PgProxy::~PgProxy() {
  const uint64_t one = 1;
  if (write(wake_fd_, &one, sizeof one) < 0) std::abort();
  thread_.join();
  Close(wake_fd_);
  Close(listen_fd_);
}

void PgProxy::Arm(const std::string& sql_prefix, Cut where) {
  std::lock_guard lock(mutex_);
  prefix_ = sql_prefix;
  where_ = where;
}

bool PgProxy::WaitCut(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  return cut_changed_.wait_for(lock, timeout, [this] { return silent_; });
}

PgProxy::Clock::time_point PgProxy::cut_at() {
  std::lock_guard lock(mutex_);
  return cut_at_;
}

void PgProxy::Run() {
  std::vector<std::unique_ptr<Connection>> connections;
  auto silent = [this] {
    std::lock_guard lock(mutex_);
    return silent_;
  };
  auto go_silent = [this] {
    std::lock_guard lock(mutex_);
    if (!silent_) {
      silent_ = true;
      cut_at_ = Clock::now();
    }
    cut_changed_.notify_all();
  };
  // Forwards the complete messages in c.inbound, up to the cut.
  auto forward_inbound = [&](Connection& c) {
    std::string& in = c.inbound;
    while (!silent()) {
      size_t size = 0;
      char type = 0;
      if (!c.started) {
        if (in.size() < 8 || in.size() < BigEndian32(in, 0)) return;
        size = BigEndian32(in, 0);
        const uint32_t code = BigEndian32(in, 4);
        c.started = code != kSslRequest && code != kGssEncRequest;
      } else {
        if (in.size() < 5) return;
        size = 1 + BigEndian32(in, 1);
        if (in.size() < size) return;
        type = in[0];
      }
      bool cut_after = false;
      if (c.cut_after_execute && type == 'E') {
        cut_after = true;
      } else if (type == 'P' || type == 'Q') {
        // Parse: statement name, then the SQL; Query: the SQL. Both NUL-terminated.
        size_t sql_at = 5;
        if (type == 'P') sql_at = in.find('\0', 5) + 1;
        const std::string sql = in.substr(sql_at, size - sql_at);
        std::lock_guard lock(mutex_);
        if (!prefix_.empty() && sql.rfind(prefix_, 0) == 0) {
          if (where_ == Cut::kBeforeStatement) {
            prefix_.clear();
            silent_ = true;
            cut_at_ = Clock::now();
            cut_changed_.notify_all();
            return;
          }
          prefix_.clear();
          c.cut_after_execute = true;
        }
      }
      SendAll(c.server, in.data(), size);
      in.erase(0, size);
      if (cut_after) go_silent();
    }
  };
  char buffer[16384];
  for (;;) {
    std::vector<pollfd> fds{{wake_fd_, POLLIN, 0}, {listen_fd_, POLLIN, 0}};
    for (const auto& c : connections) {
      fds.push_back({c->client, POLLIN, 0});
      fds.push_back({c->server, POLLIN, 0});
    }
    if (poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (fds[0].revents != 0) break;
    if ((fds[1].revents & POLLIN) != 0) {
      const int client = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (client >= 0) {
        auto c = std::make_unique<Connection>();
        c->client = client;
        // A path that is cut lets the handshake through (the listener's kernel does it) and
        // nothing after it.
        if (!silent()) {
          c->server = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
          sockaddr_in upstream{};
          upstream.sin_family = AF_INET;
          upstream.sin_port = htons(upstream_port_);
          inet_pton(AF_INET, upstream_host_.c_str(), &upstream.sin_addr);
          if (connect(c->server, reinterpret_cast<sockaddr*>(&upstream), sizeof upstream) != 0) {
            c->server = Close(c->server);
            c->client = Close(c->client);
          }
        }
        if (c->client >= 0) connections.push_back(std::move(c));
      }
    }
    // Only the connections polled above: one accepted just now has no pollfd yet.
    const size_t polled = (fds.size() - 2) / 2;
    for (size_t i = 0; i < polled; ++i) {
      Connection& c = *connections[i];
      const pollfd& from_client = fds[2 + 2 * i];
      const pollfd& from_server = fds[3 + 2 * i];
      if (c.client >= 0 && from_client.revents != 0) {
        const ssize_t got = read(c.client, buffer, sizeof buffer);
        if (got <= 0) {
          c.client = Close(c.client);
          if (!silent()) c.server = Close(c.server);
        } else if (!silent() && c.server >= 0) {
          c.inbound.append(buffer, static_cast<size_t>(got));
          forward_inbound(c);
        }
      }
      if (c.server >= 0 && from_server.revents != 0) {
        const ssize_t got = read(c.server, buffer, sizeof buffer);
        if (got <= 0) {
          // The server ended the session; a silent path never tells the client.
          c.server = Close(c.server);
          if (!silent()) c.client = Close(c.client);
        } else if (!silent() && c.client >= 0) {
          SendAll(c.client, buffer, static_cast<size_t>(got));
        }
      }
    }
    std::erase_if(connections, [](const auto& c) { return c->client < 0 && c->server < 0; });
  }
  for (auto& c : connections) {
    Close(c->client);
    Close(c->server);
  }
}

}  // namespace nlockd::integration::hafault
