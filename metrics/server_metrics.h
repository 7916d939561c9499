// ServerMetrics: the server's Prometheus instruments (prometheus-cpp) and the scrape that
// renders them, together with per-table and process figures computed at scrape time.
// Owned by the service's context; the request path calls the hooks below.
// Threading: io_context thread only. The hooks cost a few atomic increments (a histogram
// adds an uncontended mutex); every Counter is cached, no label lookup per request.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "metrics/plane_metrics.h"
#include "metrics/table_metrics.h"

namespace prometheus {
class Counter;
class Gauge;
class Histogram;
class Registry;
template <typename T>
class Family;
}  // namespace prometheus

namespace replayd::metrics {

// One request op as the metrics label it: the server passes its command table's names, so
// the label set is fixed at start (a client cannot grow it). Index i of the list is op i;
// index ops.size() is "unknown" (no readable op, or one the server does not define).
struct OpLabel {
  std::string_view name;      // the wire op; must outlive the ServerMetrics
  bool rate_limited = false;  // it may wait on a table's rate limiter (wait histogram)
};

class ServerMetrics {
 public:
  using Clock = std::chrono::steady_clock;

  // `version` labels replayd_build_info; `ops` are the request op labels (see OpLabel).
  ServerMetrics(std::string_view version, std::span<const OpLabel> ops);
  ~ServerMetrics();
  ServerMetrics(const ServerMetrics&) = delete;
  ServerMetrics& operator=(const ServerMetrics&) = delete;

  // A client connection was accepted and is served / was refused (max_connections) / ended.
  void connection_opened();
  void connection_refused();
  void connection_closed();
  void bytes_received(std::uint64_t bytes);
  void bytes_sent(std::uint64_t bytes);
  // The owner thread polled this long with nothing to run (busy_poll_us; never when 0).
  void busy_polled(std::chrono::nanoseconds idle);

  // The reply to a request of `op` was queued, `elapsed` after the request was read.
  // error_code: the reply's wire error code, empty for success. Counts requests by op and
  // outcome and the latency histogram (not replayd_errors_total: see error_replied).
  void request_finished(std::size_t op, std::string_view error_code, Clock::duration elapsed);
  // Creates the series of wire error code `code` at 0, so that rate() works from the first
  // error on. Codes never declared are added when first seen.
  void declare_error_code(std::string_view code);
  // An error reply with wire code `code` was queued: any error reply, including those to
  // frames that were not readable requests and to connections closed for idleness.
  void error_replied(std::string_view code);
  // A request of `op` (a rate_limited op) left its table's wait queue after `waited`.
  void rate_limiter_waited(std::size_t op, Clock::duration waited);
  // A snapshot finished: `saved` items are in the file, `dropped` were overwritten while it
  // was written and are left out (docs/SNAPSHOT.md).
  void snapshot_written(std::uint64_t saved, std::uint64_t dropped);
  // A published value's new version was committed (docs/VALUES.md): its version and bytes
  // by name (names are bounded by limits.max_values).
  void value_published(const std::string& name, std::uint64_t version, std::uint64_t bytes);
  // A fetch was answered: with a value of `bytes` published `age` before (changed), sent
  // through the socket or, `shared`, handed over as its shared-memory block; or without one
  // (its wait ended with no newer version).
  void value_fetched(bool changed, std::uint64_t bytes, Clock::duration age = {},
                     bool shared = false);
  // The index of the "unknown" op label.
  std::size_t unknown_op() const { return op_names_.size() - 1; }

  // The Prometheus text exposition of every family: the instruments above, `tables`
  // (see table_metrics.h), `plane` (plane_metrics.h) and the process (/proc/self).
  // Cost: O(series); allocates.
  std::string scrape(std::span<const TableSnapshot> tables, const PlaneFigures& plane = {}) const;

 private:
  struct ErrorSeries {
    std::string code;
    prometheus::Counter* errors = nullptr;       // replayd_errors_total{code}
    std::vector<prometheus::Counter*> requests;  // per op label, created when first used
  };
  ErrorSeries& error_series(std::string_view code);

  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Gauge* connections_open_ = nullptr;
  prometheus::Counter* connections_accepted_ = nullptr;
  prometheus::Counter* connections_refused_ = nullptr;
  prometheus::Counter* received_bytes_ = nullptr;
  prometheus::Counter* sent_bytes_ = nullptr;
  prometheus::Counter* busy_poll_seconds_ = nullptr;
  prometheus::Counter* snapshot_items_saved_ = nullptr;
  prometheus::Counter* snapshot_items_dropped_ = nullptr;
  prometheus::Gauge* last_snapshot_items_saved_ = nullptr;
  prometheus::Gauge* last_snapshot_items_dropped_ = nullptr;
  prometheus::Counter* values_published_ = nullptr;
  prometheus::Counter* value_fetches_changed_ = nullptr;
  prometheus::Counter* value_fetches_unchanged_ = nullptr;
  prometheus::Counter* value_fetched_bytes_ = nullptr;
  prometheus::Counter* value_shared_bytes_ = nullptr;
  prometheus::Histogram* value_fetch_age_ = nullptr;
  prometheus::Family<prometheus::Gauge>* value_version_ = nullptr;
  prometheus::Family<prometheus::Gauge>* value_bytes_ = nullptr;
  prometheus::Family<prometheus::Counter>* requests_ = nullptr;
  prometheus::Family<prometheus::Counter>* errors_ = nullptr;
  std::vector<std::string> op_names_;  // per op label, "unknown" last
  std::vector<prometheus::Counter*> requests_ok_;
  std::vector<prometheus::Histogram*> request_seconds_;
  std::vector<prometheus::Histogram*> wait_seconds_;  // null for ops that are not rate_limited
  std::vector<ErrorSeries> error_series_;             // a handful of codes: linear search
};

}  // namespace replayd::metrics
