// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "admin/backend.hpp"

namespace nlockd::admin {

class Metrics;

// An HTTP request as the router needs it; the transport fills it in.
struct HttpRequest {
  std::string method;         // "GET", "HEAD", "POST", ...
  std::string target;         // As sent: the percent-encoded path, then "?query" if any.
  std::string authorization;  // The Authorization header, empty if absent.
  std::string body;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
};

// Whether an Authorization header carries "Bearer <token>" (scheme case-insensitive, token
// compared in constant time). An empty token accepts every request.
bool BearerTokenMatches(std::string_view authorization, std::string_view token);
// The 401 answer to a request without the right token.
HttpResponse UnauthorizedResponse();

struct RouterOptions {
  // When not empty, every endpoint but /healthz requires "Authorization: Bearer <token>".
  std::string token;
};

// Maps admin requests to Backend calls and their JSON answers (docs/api.md): the whole HTTP API
// without the transport, so that it is tested without sockets. Errors are JSON objects
// {"error":{"code":...,"message":...}}. Thread-safe as the Backend is; `backend` and `metrics`
// must outlive the router.
class Router {
 public:
  Router(Backend& backend, Metrics& metrics, RouterOptions options);

  HttpResponse Handle(const HttpRequest& request) const;

 private:
  using Query = std::map<std::string, std::string, std::less<>>;
  struct Call {
    const HttpRequest& request;
    const Query& query;
    std::string capture;  // The {name} or {id} segment(s), decoded.
  };
  using Handler = HttpResponse (Router::*)(const Call&) const;
  struct Route {
    std::string_view method;
    std::string_view prefix;  // Up to the capture, or the whole path.
    std::string_view suffix;  // After the capture.
    bool captures = false;
    Handler handler;
  };

  bool Authorized(const HttpRequest& request) const;
  HttpResponse Dispatch(const HttpRequest& request) const;

  HttpResponse GetMetrics(const Call& call) const;
  HttpResponse GetHealthz(const Call& call) const;
  HttpResponse GetReadyz(const Call& call) const;
  HttpResponse GetStatus(const Call& call) const;
  HttpResponse ListClients(const Call& call) const;
  HttpResponse GetClient(const Call& call) const;
  HttpResponse DeleteClient(const Call& call) const;
  HttpResponse ListHosts(const Call& call) const;
  HttpResponse GetHost(const Call& call) const;
  HttpResponse ReleaseHost(const Call& call) const;
  HttpResponse ListLocks(const Call& call) const;
  HttpResponse ListShares(const Call& call) const;
  HttpResponse ListWaiters(const Call& call) const;
  HttpResponse GetGrace(const Call& call) const;
  HttpResponse EndGrace(const Call& call) const;
  HttpResponse Notify(const Call& call) const;
  HttpResponse ReleaseService(const Call& call) const;

  static const std::vector<Route>& Routes();

  Backend& backend_;
  Metrics& metrics_;
  RouterOptions options_;
};

// The answer of a node that has no service yet (an HA standby, or the active node while it
// loads the store): /healthz 200, /readyz 503 with the role, holder and epoch, /api/v1/status
// with the "ha" object, /metrics with the HA gauges (and the counters `metrics` holds); every
// other endpoint 503. The token rules are the Router's.
HttpResponse StandbyResponse(const HttpRequest& request, const HaView& ha, Metrics& metrics,
                             const RouterOptions& options);

// The JSON error object with `code` and `message`.
HttpResponse ErrorResponse(int status, std::string_view code, std::string_view message);

// Decodes %XX escapes (and '+' as a space when `plus_is_space`); nullopt on a bad escape.
std::optional<std::string> PercentDecode(std::string_view text, bool plus_is_space);

}  // namespace nlockd::admin
