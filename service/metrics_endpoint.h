// MetricsEndpoint: the server's side of replayd_metrics. It serves /metrics, /healthz and
// /readyz over HTTP on the server's io_context, scraping the context's instruments and a
// snapshot of its tables taken on that thread when /metrics is requested.
// Owned by the Server; it must not outlive the ServiceContext it reads.
// Threading: io_context thread only.
#pragma once

#include <asio/io_context.hpp>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "metrics/http_server.h"
#include "metrics/table_metrics.h"
#include "service/service_context.h"

namespace replayd::service {

class MetricsEndpoint {
 public:
  // Binds `address` ("HOST:PORT", port 0 picks a free port) and returns the endpoint, not yet
  // serving. `not_ready_reason` is empty when the server is ready (see /readyz). Errors name
  // the address; nothing listens then.
  static Result<std::unique_ptr<MetricsEndpoint>> open(
      asio::io_context& io, std::string_view address, ServiceContext& context,
      std::function<std::string()> not_ready_reason);

  // "host:port" bound.
  const std::string& address() const { return http_.address(); }
  void start() { http_.start(); }
  // Stops accepting and closes open HTTP connections. Idempotent.
  void close() { http_.close(); }

  MetricsEndpoint(asio::io_context& io, metrics::HttpServerLimits limits,
                  metrics::HttpHandler handler);

 private:
  metrics::HttpServer http_;
};

// What a scrape reports of each table, copied now. O(tables).
std::vector<metrics::TableSnapshot> snapshot_tables(const TableRegistry& tables);
// What connections hold through the shared-memory plane, and tables left off it.
metrics::PlaneFigures plane_figures(const ServiceContext& context);

// The wire error codes of docs/PROTOCOL.md, declared at start so their series exist before
// the first error (a code missing here still gets its series when first replied).
std::vector<std::string_view> wire_error_codes();

}  // namespace replayd::service
