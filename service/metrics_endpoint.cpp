#include "service/metrics_endpoint.h"

#include "metrics/endpoints.h"
#include "service/protocol/reply.h"

namespace replayd::service {

MetricsEndpoint::MetricsEndpoint(asio::io_context& io, metrics::HttpServerLimits limits,
                                 metrics::HttpHandler handler)
    : http_(io, limits, std::move(handler)) {}

Result<std::unique_ptr<MetricsEndpoint>> MetricsEndpoint::open(
    asio::io_context& io, std::string_view address, ServiceContext& context,
    std::function<std::string()> not_ready_reason) {
  auto host_port = parse_host_port(address);
  if (!host_port) {
    return make_error(ErrorCode::invalid_argument, "metrics " + host_port.error().message);
  }
  asio::error_code ec;
  const auto ip = asio::ip::make_address(host_port->host, ec);
  if (ec) {
    return make_error(ErrorCode::invalid_argument, "metrics address '" + std::string(address) +
                                                       "': '" + host_port->host +
                                                       "' is not an IP address");
  }
  metrics::EndpointCallbacks callbacks{
      [&context] {
        return context.metrics.scrape(snapshot_tables(context.tables), plane_figures(context));
      },
      std::move(not_ready_reason)};
  metrics::HttpServerLimits http_limits;
  http_limits.header_timeout_ms = std::chrono::milliseconds(context.limits.http_header_timeout_ms);
  http_limits.max_connections = context.limits.http_max_connections;
  auto endpoint = std::make_unique<MetricsEndpoint>(
      io, http_limits, [callbacks = std::move(callbacks)](const metrics::HttpRequest& request) {
        return metrics::route_request(request, callbacks);
      });
  REPLAYD_RETURN_IF_ERROR(endpoint->http_.open(asio::ip::tcp::endpoint(ip, host_port->port)));
  return endpoint;
}

metrics::PlaneFigures plane_figures(const ServiceContext& context) {
  metrics::PlaneFigures figures;
  figures.staging_arenas = context.plane.arenas;
  figures.staging_bytes = context.plane.staging_bytes;
  figures.queued_descriptors = context.plane.queued_descriptors;
  figures.dropped_table_bytes_mapped = context.plane.dropped_block_bytes;
  for (const auto& hosted : context.tables.list()) {
    if (shm::plane_refusal_of(hosted->table->storage().memory())) ++figures.tables_off_plane;
  }
  return figures;
}

std::vector<metrics::TableSnapshot> snapshot_tables(const TableRegistry& tables) {
  std::vector<metrics::TableSnapshot> snapshots;
  for (const auto& hosted : tables.list()) {
    metrics::TableSnapshot& snapshot = snapshots.emplace_back();
    snapshot.name = hosted->table->name();
    snapshot.info = hosted->table->info();
    snapshot.waiting_inserts = hosted->insert_waiters.size();
    snapshot.waiting_samples = hosted->sample_waiters.size();
    snapshot.episodic = hosted->table->episodic() != nullptr;
    snapshot.priorities = metrics::summarize_priorities(*hosted->table);
    if (hosted->tier) {
      const TierIndex& index = *hosted->table->tier();
      const FileTierStats& stats = hosted->tier->stats();
      snapshot.tier =
          metrics::TierFigures{index.hot_rows(),
                               index.cold_rows(),
                               index.hot_rows() * fixed_row_bytes(hosted->table->schema()),
                               hosted->tier->file_bytes(),
                               stats.rows_written,
                               stats.cold_reads,
                               stats.read_batches,
                               stats.read_seconds,
                               stats.rows_moved};
    }
  }
  return snapshots;
}

std::vector<std::string_view> wire_error_codes() {
  std::vector<std::string_view> codes;
  for (WireError code :
       {WireError::invalid_argument, WireError::not_found, WireError::already_exists,
        WireError::timeout, WireError::resource_exhausted, WireError::shutting_down,
        WireError::protocol_error, WireError::unauthenticated}) {
    codes.emplace_back(wire_error_name(code));
  }
  return codes;
}

}  // namespace replayd::service
