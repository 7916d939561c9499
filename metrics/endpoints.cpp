#include "metrics/endpoints.h"

namespace replayd::metrics {

HttpResponse route_request(const HttpRequest& request, const EndpointCallbacks& callbacks) {
  const std::string& path = request.path;
  if (path != "/metrics" && path != "/healthz" && path != "/readyz") {
    return HttpResponse{404,
                        "text/plain; charset=utf-8",
                        "not found: this server serves /metrics, /healthz and /readyz\n",
                        {}};
  }
  if (request.method != "GET" && request.method != "HEAD") {
    return HttpResponse{405,
                        "text/plain; charset=utf-8",
                        "method " + request.method + " not allowed: use GET or HEAD\n",
                        {{"Allow", "GET, HEAD"}}};
  }
  if (path == "/metrics")
    return HttpResponse{200, kPrometheusTextContentType, callbacks.scrape(), {}};
  if (path == "/healthz") return HttpResponse{200, "text/plain; charset=utf-8", "ok\n", {}};
  const std::string reason = callbacks.not_ready_reason();
  if (reason.empty()) return HttpResponse{200, "text/plain; charset=utf-8", "ready\n", {}};
  return HttpResponse{503, "text/plain; charset=utf-8", "not ready: " + reason + "\n", {}};
}

}  // namespace replayd::metrics
