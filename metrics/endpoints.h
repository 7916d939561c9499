// The operator's HTTP endpoints: GET /metrics (Prometheus text exposition), GET /healthz
// (the process is alive) and GET /readyz (serving). HEAD works wherever GET does.
// Routing only: the caller supplies the scrape and the readiness check.
// Threading: io_context thread only (the callbacks read the server's state).
#pragma once

#include <functional>
#include <string>

#include "metrics/http_server.h"

namespace replayd::metrics {

inline constexpr const char* kPrometheusTextContentType =
    "text/plain; version=0.0.4; charset=utf-8";

struct EndpointCallbacks {
  // The whole /metrics body in the Prometheus text format.
  std::function<std::string()> scrape;
  // Empty when ready; otherwise why not (the /readyz 503 body).
  std::function<std::string()> not_ready_reason;
};

// 200 with the endpoint's body; 404 for any other path; 405 (with Allow) for a method other
// than GET or HEAD on a known path; 503 from /readyz when not ready.
HttpResponse route_request(const HttpRequest& request, const EndpointCallbacks& callbacks);

}  // namespace replayd::metrics
