// SPDX-License-Identifier: Apache-2.0
#include "admin/router.hpp"

#include <cctype>
#include <charconv>
#include <exception>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "admin/json_views.hpp"
#include "admin/metrics.hpp"
#include "base/error.hpp"
#include "nlockd_build_info.hpp"

namespace nlockd::admin {
namespace {

using nlohmann::json;

constexpr std::string_view kMetricsContentType = "text/plain; version=0.0.4; charset=utf-8";

std::string Dump(const json& value) {
  // Names come off the wire as bytes; replace what is not UTF-8 instead of failing.
  return value.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

HttpResponse JsonResponse(int status, const json& value) {
  HttpResponse response;
  response.status = status;
  response.body = Dump(value);
  return response;
}

HttpResponse Ok(const json& value) { return JsonResponse(200, value); }

// Compares without an early exit, so that response time does not tell how much of a guessed
// token was right.
bool ConstantTimeEqual(std::string_view a, std::string_view b) {
  unsigned diff = a.size() == b.size() ? 0 : 1;
  const std::string_view& longer = a.size() >= b.size() ? a : b;
  for (size_t i = 0; i < longer.size(); ++i) {
    const auto x = static_cast<unsigned char>(i < a.size() ? a[i] : 0);
    const auto y = static_cast<unsigned char>(i < b.size() ? b[i] : 0);
    diff |= static_cast<unsigned>(x ^ y);
  }
  return diff == 0;
}

size_t ParseCount(const std::map<std::string, std::string, std::less<>>& query,
                  std::string_view key, size_t fallback) {
  const auto it = query.find(key);
  if (it == query.end()) return fallback;
  const std::string& text = it->second;
  size_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size()) {
    throw ApiError(ApiErrorKind::kInvalidArgument,
                   std::string(key) + " must be a non-negative integer, not '" + text + "'");
  }
  return value;
}

Page ParsePage(const std::map<std::string, std::string, std::less<>>& query) {
  Page page;
  page.offset = ParseCount(query, "offset", 0);
  page.limit = ParseCount(query, "limit", Page::kDefaultLimit);
  if (page.limit == 0 || page.limit > Page::kMaxLimit) {
    throw ApiError(ApiErrorKind::kInvalidArgument,
                   "limit must be between 1 and " + std::to_string(Page::kMaxLimit));
  }
  return page;
}

std::optional<std::string> Optional(const std::map<std::string, std::string, std::less<>>& query,
                                    std::string_view key) {
  const auto it = query.find(key);
  if (it == query.end()) return std::nullopt;
  return it->second;
}

StateQuery ParseStateQuery(const std::map<std::string, std::string, std::less<>>& query) {
  StateQuery state;
  state.host = Optional(query, "host");
  if (auto file = Optional(query, "file")) {
    state.file = HexDecode(*file);
    if (!state.file) {
      throw ApiError(ApiErrorKind::kInvalidArgument,
                     "file must be the file handle in hex, not '" + *file + "'");
    }
  }
  state.page = ParsePage(query);
  return state;
}

// A request body: empty, or a JSON object.
json ParseBody(const std::string& body) {
  if (body.find_first_not_of(" \t\r\n") == std::string::npos) return json::object();
  json value = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) {
    throw ApiError(ApiErrorKind::kInvalidArgument, "the request body is not valid JSON");
  }
  if (!value.is_object()) {
    throw ApiError(ApiErrorKind::kInvalidArgument, "the request body must be a JSON object");
  }
  return value;
}

HttpResponse FromApiError(const ApiError& error) {
  switch (error.kind()) {
    case ApiErrorKind::kNotFound:
      return ErrorResponse(404, "not_found", error.what());
    case ApiErrorKind::kConflict:
      return ErrorResponse(409, "conflict", error.what());
    case ApiErrorKind::kInvalidArgument:
      return ErrorResponse(400, "invalid_argument", error.what());
    case ApiErrorKind::kUnavailable:
      return ErrorResponse(503, "unavailable", error.what());
  }
  return ErrorResponse(500, "internal", error.what());
}

HttpResponse FromError(const Error& error) {
  switch (error.kind()) {
    case ErrorKind::kOverloaded:
    case ErrorKind::kDisconnected:
      return ErrorResponse(503, "unavailable", error.what());
    case ErrorKind::kUnimplemented:
      return ErrorResponse(501, "unimplemented", error.what());
    case ErrorKind::kFailed:
      break;
  }
  return ErrorResponse(500, "internal", error.what());
}

}  // namespace

HttpResponse ErrorResponse(int status, std::string_view code, std::string_view message) {
  return JsonResponse(status, {{"error", {{"code", code}, {"message", message}}}});
}

std::optional<std::string> PercentDecode(std::string_view text, bool plus_is_space) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '%') {
      if (i + 2 >= text.size()) return std::nullopt;
      const auto byte = HexDecode(text.substr(i + 1, 2));
      if (!byte) return std::nullopt;
      out += *byte;
      i += 2;
    } else if (c == '+' && plus_is_space) {
      out.push_back(' ');
    } else {
      out.push_back(c);
    }
  }
  return out;
}

Router::Router(Backend& backend, Metrics& metrics, RouterOptions options)
    : backend_(backend), metrics_(metrics), options_(std::move(options)) {}

const std::vector<Router::Route>& Router::Routes() {
  static const std::vector<Route> kRoutes = {
      {"GET", "/metrics", "", false, &Router::GetMetrics},
      {"GET", "/healthz", "", false, &Router::GetHealthz},
      {"GET", "/readyz", "", false, &Router::GetReadyz},
      {"GET", "/api/v1/status", "", false, &Router::GetStatus},
      {"GET", "/api/v1/clients", "", false, &Router::ListClients},
      {"GET", "/api/v1/clients/", "", true, &Router::GetClient},
      {"DELETE", "/api/v1/clients/", "", true, &Router::DeleteClient},
      {"GET", "/api/v1/hosts", "", false, &Router::ListHosts},
      {"GET", "/api/v1/hosts/", "", true, &Router::GetHost},
      {"POST", "/api/v1/hosts/", "/release", true, &Router::ReleaseHost},
      {"GET", "/api/v1/locks", "", false, &Router::ListLocks},
      {"GET", "/api/v1/shares", "", false, &Router::ListShares},
      {"GET", "/api/v1/waiters", "", false, &Router::ListWaiters},
      {"GET", "/api/v1/grace", "", false, &Router::GetGrace},
      {"POST", "/api/v1/grace/end", "", false, &Router::EndGrace},
      {"POST", "/api/v1/notify", "", false, &Router::Notify},
      {"POST", "/api/v1/service/release", "", false, &Router::ReleaseService},
  };
  return kRoutes;
}

bool BearerTokenMatches(std::string_view authorization, std::string_view token) {
  if (token.empty()) return true;
  constexpr std::string_view kScheme = "Bearer ";
  if (authorization.size() < kScheme.size()) return false;
  // The scheme is case-insensitive (RFC 7235 section 2.1).
  for (size_t i = 0; i < kScheme.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(authorization[i])) !=
        std::tolower(static_cast<unsigned char>(kScheme[i]))) {
      return false;
    }
  }
  return ConstantTimeEqual(authorization.substr(kScheme.size()), token);
}

HttpResponse UnauthorizedResponse() {
  HttpResponse response = ErrorResponse(401, "unauthorized", "a valid bearer token is required");
  response.headers.emplace_back("WWW-Authenticate", "Bearer");
  return response;
}

bool Router::Authorized(const HttpRequest& request) const {
  return BearerTokenMatches(request.authorization, options_.token);
}

HttpResponse Router::Handle(const HttpRequest& request) const {
  try {
    return Dispatch(request);
  } catch (const ApiError& error) {
    return FromApiError(error);
  } catch (const Error& error) {
    spdlog::warn("admin: {} {}: {}", request.method, request.target, error.what());
    return FromError(error);
  } catch (const std::exception& error) {
    spdlog::error("admin: {} {}: {}", request.method, request.target, error.what());
    return ErrorResponse(500, "internal", error.what());
  }
}

HttpResponse Router::Dispatch(const HttpRequest& request) const {
  const std::string_view target = request.target;
  const size_t question = target.find('?');
  const std::string_view path = target.substr(0, question);

  if (path != "/healthz" && !Authorized(request)) return UnauthorizedResponse();

  Query query;
  if (question != std::string_view::npos) {
    std::string_view rest = target.substr(question + 1);
    while (!rest.empty()) {
      const size_t amp = rest.find('&');
      const std::string_view pair = rest.substr(0, amp);
      rest = amp == std::string_view::npos ? std::string_view() : rest.substr(amp + 1);
      if (pair.empty()) continue;
      const size_t equals = pair.find('=');
      auto key = PercentDecode(pair.substr(0, equals), true);
      auto value = PercentDecode(
          equals == std::string_view::npos ? std::string_view() : pair.substr(equals + 1), true);
      if (!key || !value) {
        return ErrorResponse(400, "invalid_argument", "bad percent-escape in the query string");
      }
      query.emplace(std::move(*key), std::move(*value));  // The first of a repeated key wins.
    }
  }

  std::string_view method = request.method;
  if (method == "HEAD") method = "GET";
  std::string allowed;
  for (const Route& route : Routes()) {
    std::string_view capture;
    if (!route.captures) {
      if (path != route.prefix) continue;
    } else {
      if (path.size() <= route.prefix.size() + route.suffix.size() ||
          !path.starts_with(route.prefix) || !path.ends_with(route.suffix)) {
        continue;
      }
      capture =
          path.substr(route.prefix.size(), path.size() - route.prefix.size() - route.suffix.size());
    }
    if (route.method != method) {
      if (!allowed.empty()) allowed += ", ";
      allowed += route.method;
      // HEAD is served wherever GET is (RFC 9110 section 9.3.2).
      if (route.method == "GET") allowed += ", HEAD";
      continue;
    }
    auto decoded = PercentDecode(capture, false);
    if (!decoded) return ErrorResponse(400, "invalid_argument", "bad percent-escape in the path");
    const Call call{request, query, std::move(*decoded)};
    return (this->*route.handler)(call);
  }
  if (!allowed.empty()) {
    HttpResponse response = ErrorResponse(405, "method_not_allowed",
                                          request.method + " is not allowed here; use " + allowed);
    response.headers.emplace_back("Allow", allowed);
    return response;
  }
  return ErrorResponse(404, "not_found", "no such endpoint: " + std::string(path));
}

HttpResponse Router::GetMetrics(const Call& /*call*/) const {
  try {
    metrics_.Refresh(backend_.Status());
  } catch (const std::exception& error) {
    // Still serve the counters: a scrape during start-up must not fail.
    spdlog::debug("admin: metrics served without a state snapshot: {}", error.what());
  }
  HttpResponse response;
  response.content_type = kMetricsContentType;
  response.body = metrics_.Serialize();
  return response;
}

HttpResponse StandbyResponse(const HttpRequest& request, const HaView& ha, Metrics& metrics,
                             const RouterOptions& options) {
  const std::string_view target = request.target;
  const std::string_view path = target.substr(0, target.find('?'));
  if (path != "/healthz" && !BearerTokenMatches(request.authorization, options.token)) {
    return UnauthorizedResponse();
  }
  const bool get = request.method == "GET" || request.method == "HEAD";
  if (get && path == "/healthz") return Ok({{"status", "ok"}});
  if (get && path == "/readyz") {
    ReadinessView readiness;
    readiness.ha = ha;
    return JsonResponse(503, ToJson(readiness));
  }
  if (get && path == "/api/v1/status") {
    return Ok({{"version", NLOCKD_BUILD_VERSION},
               {"revision", NLOCKD_BUILD_REVISION},
               {"ha", ToJson(ha)}});
  }
  if (get && path == "/metrics") {
    metrics.SetHa(ha);
    HttpResponse response;
    response.content_type = kMetricsContentType;
    response.body = metrics.Serialize();
    return response;
  }
  if (ha.active) {
    return ErrorResponse(503, "unavailable", "starting: the service is not served yet");
  }
  return ErrorResponse(503, "standby",
                       ha.holder.empty()
                           ? std::string("this node is a standby; it serves nothing")
                           : "this node is a standby; the active node is " + ha.holder);
}

HttpResponse Router::GetHealthz(const Call& /*call*/) const { return Ok({{"status", "ok"}}); }

HttpResponse Router::GetReadyz(const Call& /*call*/) const {
  const ReadinessView readiness = backend_.Readiness();
  return JsonResponse(readiness.ready() ? 200 : 503, ToJson(readiness));
}

HttpResponse Router::GetStatus(const Call& /*call*/) const { return Ok(ToJson(backend_.Status())); }

HttpResponse Router::ListClients(const Call& call) const {
  RegistrationQuery query;
  query.mon_name = Optional(call.query, "mon_name");
  query.my_name = Optional(call.query, "my_name");
  query.page = ParsePage(call.query);
  return Ok(PageToJson("clients", backend_.ListRegistrations(query), query.page));
}

HttpResponse Router::GetClient(const Call& call) const {
  return Ok(ToJson(backend_.GetRegistration(call.capture)));
}

HttpResponse Router::DeleteClient(const Call& call) const {
  backend_.DeleteRegistration(call.capture);
  return Ok({{"deleted", call.capture}});
}

HttpResponse Router::ListHosts(const Call& call) const {
  const Page page = ParsePage(call.query);
  return Ok(PageToJson("hosts", backend_.ListHosts(page), page));
}

HttpResponse Router::GetHost(const Call& call) const {
  return Ok(ToJson(backend_.GetHost(call.capture)));
}

HttpResponse Router::ReleaseHost(const Call& call) const {
  ParseBody(call.request.body);
  json out = ToJson(backend_.ReleaseHost(call.capture));
  out["host"] = call.capture;
  return Ok(out);
}

HttpResponse Router::ListLocks(const Call& call) const {
  const StateQuery query = ParseStateQuery(call.query);
  return Ok(PageToJson("locks", backend_.ListLocks(query), query.page));
}

HttpResponse Router::ListShares(const Call& call) const {
  const StateQuery query = ParseStateQuery(call.query);
  return Ok(PageToJson("shares", backend_.ListShares(query), query.page));
}

HttpResponse Router::ListWaiters(const Call& call) const {
  const StateQuery query = ParseStateQuery(call.query);
  return Ok(PageToJson("waiters", backend_.ListWaiters(query), query.page));
}

HttpResponse Router::GetGrace(const Call& /*call*/) const { return Ok(ToJson(backend_.Grace())); }

HttpResponse Router::EndGrace(const Call& call) const {
  ParseBody(call.request.body);
  return Ok(ToJson(backend_.EndGrace()));
}

HttpResponse Router::Notify(const Call& call) const {
  const json body = ParseBody(call.request.body);
  std::optional<std::string> host;
  if (const auto it = body.find("host"); it != body.end() && !it->is_null()) {
    if (!it->is_string() || it->get_ref<const std::string&>().empty()) {
      throw ApiError(ApiErrorKind::kInvalidArgument, "host must be a non-empty string");
    }
    host = it->get<std::string>();
  }
  // Delivery continues in the background: 202.
  return JsonResponse(202, ToJson(backend_.Notify(host)));
}

HttpResponse Router::ReleaseService(const Call& call) const {
  ParseBody(call.request.body);
  // The node stops serving after this answer: 202.
  return JsonResponse(202, ToJson(backend_.ReleaseService()));
}

}  // namespace nlockd::admin
