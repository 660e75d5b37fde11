// SPDX-License-Identifier: Apache-2.0
#include "admin/admin_server.hpp"

#include <atomic>
#include <chrono>
#include <memory>

#include <httplib.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include "base/error.hpp"

namespace nlockd::admin {
namespace {

void Serve(const AdminServer::Handler& handler, const httplib::Request& request,
           httplib::Response& response) {
  HttpRequest routed;
  routed.method = request.method;
  routed.target = request.target;
  routed.authorization = request.get_header_value("Authorization");
  routed.body = request.body;
  HttpResponse answer = handler(routed);
  spdlog::debug("admin: {} {} from {}: {}", request.method, request.target, request.remote_addr,
                answer.status);
  response.status = answer.status;
  for (auto& [name, value] : answer.headers) response.set_header(name, value);
  response.set_content(answer.body, answer.content_type);
}

}  // namespace

AdminServer::AdminServer(Backend& backend, Metrics& metrics, AdminServerOptions options)
    : router_(std::in_place, backend, metrics, RouterOptions{options.token}),
      handler_([this](const HttpRequest& request) { return router_->Handle(request); }),
      options_(std::move(options)) {}

AdminServer::AdminServer(Handler handler, AdminServerOptions options)
    : handler_(std::move(handler)), options_(std::move(options)) {}

AdminServer::~AdminServer() { Stop(); }

void AdminServer::Start(const std::string& address, uint16_t port) {
  NLOCKD_REQUIRE(server_ == nullptr, "AdminServer started twice");
  auto server = std::make_unique<httplib::Server>();
  const size_t threads = options_.threads;
  server->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  server->set_payload_max_length(options_.max_body_bytes);
  // httplib's default also sets SO_REUSEPORT, which would let a second nlockd bind the same
  // port and steal half of the requests; SO_REUSEADDR alone allows a restart next to TIME_WAIT.
  server->set_socket_options([](int sock) {
    const int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });

  // One catch-all handler per method: the Router matches paths itself (so that it can answer
  // 405 and decode host names that contain '/'). Handlers (not a pre-routing hook) see the body.
  const auto handler = [this](const httplib::Request& request, httplib::Response& response) {
    Serve(handler_, request, response);
  };
  server->Get(".*", handler);
  server->Post(".*", handler);
  server->Put(".*", handler);
  server->Patch(".*", handler);
  server->Delete(".*", handler);
  server->Options(".*", handler);
  // Errors httplib answers itself (413, 414, a malformed request line) get the JSON shape too.
  const httplib::Server::HandlerWithResponse on_error = [](const httplib::Request&,
                                                           httplib::Response& response) {
    if (!response.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    const bool too_large = response.status == 413;
    const HttpResponse error = ErrorResponse(
        response.status, too_large ? "payload_too_large" : "bad_request",
        too_large ? "the request body is too large" : "the request could not be read as HTTP");
    response.set_content(error.body, error.content_type);
    return httplib::Server::HandlerResponse::Handled;
  };
  server->set_error_handler(on_error);

  int bound = port;
  if (port == 0) {
    bound = server->bind_to_any_port(address);
  } else if (!server->bind_to_port(address, port)) {
    bound = -1;
  }
  if (bound <= 0) {
    throw Error(ErrorKind::kFailed,
                "admin: cannot listen on " + address + ":" + std::to_string(port));
  }
  port_ = static_cast<uint16_t>(bound);
  server_ = std::move(server);
  auto finished = std::make_shared<std::atomic<bool>>(false);
  thread_ = std::thread([server = server_.get(), finished] {
    if (!server->listen_after_bind()) spdlog::error("admin: the HTTP accept loop failed");
    finished->store(true);
  });
  // Stop() only works once the accept loop runs; wait for it so that Start-then-Stop is safe.
  while (!server_->is_running() && !finished->load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  // An IPv6 literal goes in brackets in a URL (RFC 3986 section 3.2.2).
  const std::string host = address.find(':') == std::string::npos ? address : "[" + address + "]";
  spdlog::info("admin: listening on http://{}:{}{}", host, port_,
               options_.token.empty() ? "" : " (bearer token required)");
}

void AdminServer::Stop() {
  if (server_ == nullptr) return;
  server_->stop();
  if (thread_.joinable()) thread_.join();
  server_.reset();
}

}  // namespace nlockd::admin
