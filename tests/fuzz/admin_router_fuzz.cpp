// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: an admin HTTP request as the transport hands it over (method, target,
// Authorization header, body) -> Router::Handle over a populated FakeBackend. Every answer must
// be a JSON error or a success, never a crash; query strings, percent escapes, host names with
// '/', and JSON bodies all come from the input.
//
// Input layout: the first byte picks the method; the rest is split at the first two 0x00 bytes
// into target, Authorization and body (missing parts are empty).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "admin/metrics.hpp"
#include "admin/router.hpp"
#include "admin/testing/fake_backend.hpp"

namespace {

using nlockd::admin::HttpRequest;
using nlockd::admin::Metrics;
using nlockd::admin::Router;
using nlockd::admin::RouterOptions;
using nlockd::admin::testing::FakeBackend;

constexpr std::string_view kMethods[] = {"GET",   "HEAD",   "POST",    "PUT",
                                         "PATCH", "DELETE", "OPTIONS", "BREW"};

std::string_view Next(std::string_view& rest) {
  const size_t end = rest.find('\0');
  std::string_view part = rest.substr(0, end);
  rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
  return part;
}

// Built once: the router is stateless between requests, the backend only records writes.
struct Fixture {
  Fixture() : router(backend, metrics, RouterOptions{"token"}) { FakeBackend::Populate(backend); }
  FakeBackend backend;
  Metrics metrics;
  Router router;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Fixture fixture;
  if (size == 0) return 0;
  std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  HttpRequest request;
  request.method = std::string(kMethods[data[0] % std::size(kMethods)]);
  request.target = std::string(Next(rest));
  request.authorization = std::string(Next(rest));
  request.body = std::string(rest);
  // Half the inputs carry the right token, so that the routes behind it are reached.
  if (data[0] & 0x80) request.authorization = "Bearer token";
  const auto answer = fixture.router.Handle(request);
  if (answer.status < 100 || answer.status > 599) __builtin_trap();
  return 0;
}
