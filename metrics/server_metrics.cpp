#include "metrics/server_metrics.h"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <algorithm>

#include "metrics/process_metrics.h"

namespace replayd::metrics {
namespace {

// Seconds. Fast ops take tens of microseconds; a waiting sample or insert can take minutes.
const prometheus::Histogram::BucketBoundaries kRequestSecondsBuckets{
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
    0.1,     0.25,   0.5,     1,      2.5,   5,      10,    30,   60,    300};
const prometheus::Histogram::BucketBoundaries kWaitSecondsBuckets{
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
    0.25,   0.5,     1,      2.5,   5,      10,    30,   60,    300};

double seconds_of(ServerMetrics::Clock::duration elapsed) {
  return std::chrono::duration<double>(elapsed).count();
}

}  // namespace

ServerMetrics::ServerMetrics(std::string_view version, std::span<const OpLabel> ops)
    : registry_(std::make_shared<prometheus::Registry>()) {
  for (const OpLabel& op : ops)
    op_names_.emplace_back(op.name);
  op_names_.emplace_back("unknown");
  using prometheus::BuildCounter;
  using prometheus::BuildGauge;
  using prometheus::BuildHistogram;
  prometheus::Registry& registry = *registry_;

  BuildGauge()
      .Name("replayd_build_info")
      .Help("Always 1; the version label names the running replayd build")
      .Register(registry)
      .Add({{"version", std::string(version)}})
      .Set(1);
  connections_open_ = &BuildGauge()
                           .Name("replayd_connections_open")
                           .Help("Client connections (Unix and TCP) open now")
                           .Register(registry)
                           .Add({});
  connections_accepted_ = &BuildCounter()
                               .Name("replayd_connections_accepted_total")
                               .Help("Client connections accepted and served")
                               .Register(registry)
                               .Add({});
  connections_refused_ = &BuildCounter()
                              .Name("replayd_connections_refused_total")
                              .Help(
                                  "Client connections closed at once because "
                                  "limits.max_connections were open")
                              .Register(registry)
                              .Add({});
  received_bytes_ = &BuildCounter()
                         .Name("replayd_received_bytes_total")
                         .Help("Bytes read from client connections")
                         .Register(registry)
                         .Add({});
  sent_bytes_ = &BuildCounter()
                     .Name("replayd_sent_bytes_total")
                     .Help("Bytes written to client connections")
                     .Register(registry)
                     .Add({});
  busy_poll_seconds_ = &BuildCounter()
                            .Name("replayd_busy_poll_seconds_total")
                            .Help(
                                "Seconds the server's thread spent polling for work with "
                                "nothing to run (busy_poll_us; 0 while it is off)")
                            .Register(registry)
                            .Add({});
  snapshot_items_saved_ = &BuildCounter()
                               .Name("replayd_snapshot_items_saved_total")
                               .Help("Items written to snapshot files, summed over snapshots")
                               .Register(registry)
                               .Add({});
  snapshot_items_dropped_ =
      &BuildCounter()
           .Name("replayd_snapshot_items_dropped_total")
           .Help("Items left out of snapshots because they were overwritten while written")
           .Register(registry)
           .Add({});
  values_published_ = &BuildCounter()
                           .Name("replayd_values_published_total")
                           .Help("Versions of published values committed")
                           .Register(registry)
                           .Add({});
  auto& fetches = BuildCounter()
                      .Name("replayd_value_fetches_total")
                      .Help(
                          "Fetches answered, with a newer version (changed=true) or without "
                          "one (their wait ended: no value bytes moved)")
                      .Register(registry);
  value_fetches_changed_ = &fetches.Add({{"changed", "true"}});
  value_fetches_unchanged_ = &fetches.Add({{"changed", "false"}});
  value_fetched_bytes_ = &BuildCounter()
                              .Name("replayd_value_fetched_bytes_total")
                              .Help("Value bytes sent in fetch replies")
                              .Register(registry)
                              .Add({});
  value_shared_bytes_ = &BuildCounter()
                             .Name("replayd_value_shared_bytes_total")
                             .Help(
                                 "Bytes of values handed to same-host fetchers as their "
                                 "shared-memory blocks (mapped, not sent)")
                             .Register(registry)
                             .Add({});
  value_fetch_age_ = &BuildHistogram()
                          .Name("replayd_value_fetch_age_seconds")
                          .Help(
                              "How long after its publication each fetched version was sent "
                              "(the lag of the fetchers that waited is the smallest)")
                          .Register(registry)
                          .Add({}, prometheus::Histogram::BucketBoundaries{
                                       0.001, 0.005, 0.01, 0.05, 0.1, 0.2, 0.5, 1, 5, 30});
  value_version_ = &BuildGauge()
                        .Name("replayd_value_version")
                        .Help("The current version of each published value")
                        .Register(registry);
  value_bytes_ = &BuildGauge()
                      .Name("replayd_value_bytes")
                      .Help("Bytes of each published value's current version")
                      .Register(registry);
  last_snapshot_items_saved_ = &BuildGauge()
                                    .Name("replayd_last_snapshot_items_saved")
                                    .Help("Items the last snapshot holds")
                                    .Register(registry)
                                    .Add({});
  last_snapshot_items_dropped_ =
      &BuildGauge()
           .Name("replayd_last_snapshot_items_dropped")
           .Help("Items the last snapshot left out (overwritten while it was written)")
           .Register(registry)
           .Add({});
  requests_ = &BuildCounter()
                   .Name("replayd_requests_total")
                   .Help("Requests answered, by op and outcome (ok or the wire error code)")
                   .Register(registry);
  errors_ = &BuildCounter()
                 .Name("replayd_errors_total")
                 .Help(
                     "Error replies queued, by wire error code, including replies that "
                     "answer no request (broken frames, idle connections)")
                 .Register(registry);
  auto& request_seconds =
      BuildHistogram()
          .Name("replayd_request_duration_seconds")
          .Help(
              "Time from reading a request to queueing its reply, by op; includes time "
              "spent waiting on a rate limiter")
          .Register(registry);
  requests_ok_.assign(op_names_.size(), nullptr);
  for (std::size_t i = 0; i < op_names_.size(); ++i) {
    // An unknown op never succeeds; its ok series would only be noise.
    if (i != unknown_op())
      requests_ok_[i] = &requests_->Add({{"op", op_names_[i]}, {"outcome", "ok"}});
    request_seconds_.push_back(
        &request_seconds.Add({{"op", op_names_[i]}}, kRequestSecondsBuckets));
  }
  auto& wait_seconds = BuildHistogram()
                           .Name("replayd_rate_limiter_wait_seconds")
                           .Help(
                               "Time requests held by a table's rate limiter waited, by op, "
                               "whether they were then admitted, timed out or cancelled")
                           .Register(registry);
  wait_seconds_.assign(op_names_.size(), nullptr);
  for (std::size_t i = 0; i < ops.size(); ++i) {
    if (ops[i].rate_limited) {
      wait_seconds_[i] = &wait_seconds.Add({{"op", op_names_[i]}}, kWaitSecondsBuckets);
    }
  }
}

ServerMetrics::~ServerMetrics() = default;

void ServerMetrics::connection_opened() {
  connections_open_->Increment();
  connections_accepted_->Increment();
}

void ServerMetrics::connection_refused() {
  connections_refused_->Increment();
}

void ServerMetrics::connection_closed() {
  connections_open_->Decrement();
}

void ServerMetrics::bytes_received(std::uint64_t bytes) {
  received_bytes_->Increment(static_cast<double>(bytes));
}

void ServerMetrics::bytes_sent(std::uint64_t bytes) {
  sent_bytes_->Increment(static_cast<double>(bytes));
}

void ServerMetrics::busy_polled(std::chrono::nanoseconds idle) {
  busy_poll_seconds_->Increment(std::chrono::duration<double>(idle).count());
}

ServerMetrics::ErrorSeries& ServerMetrics::error_series(std::string_view code) {
  for (ErrorSeries& series : error_series_) {
    if (series.code == code) return series;
  }
  ErrorSeries& series = error_series_.emplace_back();
  series.code = std::string(code);
  series.errors = &errors_->Add({{"code", series.code}});
  return series;
}

void ServerMetrics::request_finished(std::size_t op, std::string_view error_code,
                                     Clock::duration elapsed) {
  const std::size_t index = std::min(op, unknown_op());
  request_seconds_[index]->Observe(seconds_of(elapsed));
  if (error_code.empty()) {
    if (requests_ok_[index] == nullptr) {
      requests_ok_[index] = &requests_->Add({{"op", op_names_[index]}, {"outcome", "ok"}});
    }
    requests_ok_[index]->Increment();
    return;
  }
  ErrorSeries& series = error_series(error_code);
  if (series.requests.empty()) series.requests.assign(op_names_.size(), nullptr);
  if (series.requests[index] == nullptr) {
    series.requests[index] = &requests_->Add({{"op", op_names_[index]}, {"outcome", series.code}});
  }
  series.requests[index]->Increment();
}

void ServerMetrics::declare_error_code(std::string_view code) {
  error_series(code);
}

void ServerMetrics::error_replied(std::string_view code) {
  error_series(code).errors->Increment();
}

void ServerMetrics::rate_limiter_waited(std::size_t op, Clock::duration waited) {
  if (op < wait_seconds_.size() && wait_seconds_[op] != nullptr) {
    wait_seconds_[op]->Observe(seconds_of(waited));
  }
}

void ServerMetrics::value_published(const std::string& name, std::uint64_t version,
                                    std::uint64_t bytes) {
  values_published_->Increment();
  value_version_->Add({{"name", name}}).Set(static_cast<double>(version));
  value_bytes_->Add({{"name", name}}).Set(static_cast<double>(bytes));
}

void ServerMetrics::value_fetched(bool changed, std::uint64_t bytes, Clock::duration age,
                                  bool shared) {
  if (!changed) {
    value_fetches_unchanged_->Increment();
    return;
  }
  value_fetches_changed_->Increment();
  (shared ? value_shared_bytes_ : value_fetched_bytes_)->Increment(static_cast<double>(bytes));
  value_fetch_age_->Observe(seconds_of(age));
}

void ServerMetrics::snapshot_written(std::uint64_t saved, std::uint64_t dropped) {
  snapshot_items_saved_->Increment(static_cast<double>(saved));
  snapshot_items_dropped_->Increment(static_cast<double>(dropped));
  last_snapshot_items_saved_->Set(static_cast<double>(saved));
  last_snapshot_items_dropped_->Set(static_cast<double>(dropped));
}

std::string ServerMetrics::scrape(std::span<const TableSnapshot> tables,
                                  const PlaneFigures& plane) const {
  std::vector<prometheus::MetricFamily> families = registry_->Collect();
  for (auto& family : table_families(tables))
    families.push_back(std::move(family));
  for (auto& family : plane_families(plane))
    families.push_back(std::move(family));
  for (auto& family : process_families())
    families.push_back(std::move(family));
  return prometheus::TextSerializer().Serialize(families);
}

}  // namespace replayd::metrics
