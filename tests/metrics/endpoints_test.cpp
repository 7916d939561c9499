// Tests of metrics/endpoints.*: routing of /metrics, /healthz and /readyz.
#include "metrics/endpoints.h"

#include <catch2/catch.hpp>

using replayd::metrics::EndpointCallbacks;
using replayd::metrics::HttpRequest;
using replayd::metrics::route_request;

namespace {

HttpRequest request(std::string method, std::string path) {
  HttpRequest r;
  r.method = std::move(method);
  r.target = path;
  r.path = std::move(path);
  return r;
}

}  // namespace

TEST_CASE("the endpoints answer by path, readiness comes from the callback") {
  std::string reason;
  int scrapes = 0;
  EndpointCallbacks callbacks{[&] {
                                ++scrapes;
                                return std::string("replayd_tables 1\n");
                              },
                              [&] { return reason; }};

  auto metrics = route_request(request("GET", "/metrics"), callbacks);
  CHECK(metrics.status == 200);
  CHECK(metrics.body == "replayd_tables 1\n");
  CHECK(metrics.content_type == "text/plain; version=0.0.4; charset=utf-8");
  CHECK(scrapes == 1);

  CHECK(route_request(request("GET", "/healthz"), callbacks).status == 200);
  CHECK(route_request(request("GET", "/readyz"), callbacks).status == 200);
  reason = "shutting down";
  auto not_ready = route_request(request("GET", "/readyz"), callbacks);
  CHECK(not_ready.status == 503);
  CHECK(not_ready.body == "not ready: shutting down\n");
  CHECK(route_request(request("GET", "/healthz"), callbacks).status == 200);
}

TEST_CASE("unknown paths are 404 and other methods on known paths are 405 with Allow") {
  EndpointCallbacks callbacks{[] { return std::string(); }, [] { return std::string(); }};
  CHECK(route_request(request("GET", "/"), callbacks).status == 404);
  CHECK(route_request(request("GET", "/metrics/"), callbacks).status == 404);
  CHECK(route_request(request("POST", "/nothing"), callbacks).status == 404);
  auto post = route_request(request("POST", "/metrics"), callbacks);
  CHECK(post.status == 405);
  REQUIRE(post.extra_headers.size() == 1);
  CHECK(post.extra_headers[0].first == "Allow");
  CHECK(route_request(request("HEAD", "/healthz"), callbacks).status == 200);
}
