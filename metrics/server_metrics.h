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

#include "metrics/request_op.h"
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

class ServerMetrics {
 public:
  using Clock = std::chrono::steady_clock;

  // `version` labels replayd_build_info.
  explicit ServerMetrics(std::string_view version);
  ~ServerMetrics();
  ServerMetrics(const ServerMetrics&) = delete;
  ServerMetrics& operator=(const ServerMetrics&) = delete;

  // A client connection was accepted and is served / was refused (max_connections) / ended.
  void connection_opened();
  void connection_refused();
  void connection_closed();
  void bytes_received(std::uint64_t bytes);
  void bytes_sent(std::uint64_t bytes);

  // The reply to a request of `op` was queued, `elapsed` after the request was read.
  // error_code: the reply's wire error code, empty for success. Counts requests by op and
  // outcome and the latency histogram (not replayd_errors_total: see error_replied).
  void request_finished(RequestOp op, std::string_view error_code, Clock::duration elapsed);
  // Creates the series of wire error code `code` at 0, so that rate() works from the first
  // error on. Codes never declared are added when first seen.
  void declare_error_code(std::string_view code);
  // An error reply with wire code `code` was queued: any error reply, including those to
  // frames that were not readable requests and to connections closed for idleness.
  void error_replied(std::string_view code);
  // A request of `op` (insert or sample) left its table's wait queue after `waited`.
  void rate_limiter_waited(RequestOp op, Clock::duration waited);

  // The Prometheus text exposition of every family: the instruments above, `tables`
  // (see table_metrics.h) and the process (/proc/self). Cost: O(series); allocates.
  std::string scrape(std::span<const TableSnapshot> tables) const;

 private:
  struct ErrorSeries {
    std::string code;
    prometheus::Counter* errors = nullptr;                         // replayd_errors_total{code}
    std::array<prometheus::Counter*, kRequestOpCount> requests{};  // created when first used
  };
  ErrorSeries& error_series(std::string_view code);

  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Gauge* connections_open_ = nullptr;
  prometheus::Counter* connections_accepted_ = nullptr;
  prometheus::Counter* connections_refused_ = nullptr;
  prometheus::Counter* received_bytes_ = nullptr;
  prometheus::Counter* sent_bytes_ = nullptr;
  prometheus::Family<prometheus::Counter>* requests_ = nullptr;
  prometheus::Family<prometheus::Counter>* errors_ = nullptr;
  std::array<prometheus::Counter*, kRequestOpCount> requests_ok_{};
  std::array<prometheus::Histogram*, kRequestOpCount> request_seconds_{};
  prometheus::Histogram* wait_seconds_insert_ = nullptr;
  prometheus::Histogram* wait_seconds_sample_ = nullptr;
  std::vector<ErrorSeries> error_series_;  // a handful of codes: linear search
};

}  // namespace replayd::metrics
