// Tests of metrics/table_metrics.* and the scrape of metrics/server_metrics.*.
#include "metrics/table_metrics.h"

#include <array>
#include <catch2/catch.hpp>
#include <string_view>

#include "metrics/server_metrics.h"

using replayd::metrics::OpLabel;
using replayd::metrics::ServerMetrics;
using replayd::metrics::TableSnapshot;

namespace {

TableSnapshot snapshot(std::string name, std::uint64_t inserts) {
  TableSnapshot t;
  t.name = std::move(name);
  t.info.size = 7;
  t.info.capacity = 100;
  t.info.counters.inserts = inserts;
  t.info.counters.stale_updates = 3;
  t.waiting_samples = 2;
  return t;
}

const prometheus::MetricFamily& family(const std::vector<prometheus::MetricFamily>& families,
                                       std::string_view name) {
  for (const auto& f : families) {
    if (f.name == name) return f;
  }
  FAIL("no family " << name);
  throw std::logic_error("unreachable");
}

}  // namespace

TEST_CASE("table families carry one series per table with the table's figures") {
  const std::vector<TableSnapshot> tables{snapshot("a", 10), snapshot("b", 20)};
  const auto families = replayd::metrics::table_families(tables);
  CHECK(family(families, "replayd_tables").metric.at(0).gauge.value == 2);
  const auto& inserts = family(families, "replayd_table_inserts_total");
  CHECK(inserts.type == prometheus::MetricType::Counter);
  REQUIRE(inserts.metric.size() == 2);
  CHECK(inserts.metric[1].label.at(0).value == "b");
  CHECK(inserts.metric[1].counter.value == 20);
  CHECK(family(families, "replayd_table_items").metric[0].gauge.value == 7);
  CHECK(family(families, "replayd_table_stale_updates_total").metric[0].counter.value == 3);
  const auto& waiting = family(families, "replayd_rate_limiter_waiting_requests");
  REQUIRE(waiting.metric.size() == 4);  // insert and sample, per table
  CHECK(waiting.metric[1].label.at(0).value == "sample");
  CHECK(waiting.metric[1].gauge.value == 2);
  for (const auto& f : families)
    CHECK_FALSE(f.help.empty());
}

TEST_CASE("with no tables, per-table families are left out and replayd_tables is 0") {
  const auto families = replayd::metrics::table_families({});
  REQUIRE(families.size() == 1);
  CHECK(families[0].name == "replayd_tables");
  CHECK(families[0].metric.at(0).gauge.value == 0);
}

TEST_CASE("the scrape counts requests by op and outcome and errors by code") {
  const std::array<OpLabel, 2> ops{OpLabel{"insert", true}, OpLabel{"sample", true}};
  ServerMetrics metrics("1.2.3", ops);
  metrics.declare_error_code("invalid_argument");
  metrics.declare_error_code("timeout");
  metrics.request_finished(0, "", std::chrono::microseconds(30));
  metrics.request_finished(0, "", std::chrono::microseconds(30));
  metrics.request_finished(1, "timeout", std::chrono::milliseconds(5));
  metrics.request_finished(metrics.unknown_op(), "invalid_argument", std::chrono::microseconds(9));
  metrics.rate_limiter_waited(1, std::chrono::milliseconds(2));
  metrics.error_replied("timeout");
  metrics.error_replied("unauthenticated");
  metrics.bytes_received(100);
  metrics.connection_opened();
  const std::string text = metrics.scrape({});
  CHECK_THAT(text, Catch::Contains("replayd_build_info{version=\"1.2.3\"} 1"));
  CHECK_THAT(text, Catch::Contains("replayd_requests_total{op=\"insert\",outcome=\"ok\"} 2"));
  CHECK_THAT(text, Catch::Contains("replayd_requests_total{op=\"sample\",outcome=\"timeout\"} 1"));
  CHECK_THAT(text, Catch::Contains(
                       "replayd_requests_total{op=\"unknown\",outcome=\"invalid_argument\"} 1"));
  CHECK_THAT(text, Catch::Contains("replayd_rate_limiter_wait_seconds_count{op=\"sample\"} 1"));
  CHECK_THAT(text, Catch::Contains("replayd_errors_total{code=\"invalid_argument\"} 0"));
  CHECK_THAT(text, Catch::Contains("replayd_errors_total{code=\"timeout\"} 1"));
  CHECK_THAT(text, Catch::Contains("replayd_errors_total{code=\"unauthenticated\"} 1"));
  CHECK_THAT(text, Catch::Contains("replayd_request_duration_seconds_count{op=\"insert\"} 2"));
  CHECK_THAT(text, Catch::Contains("replayd_received_bytes_total 100"));
  CHECK_THAT(text, Catch::Contains("replayd_connections_open 1"));
  CHECK_THAT(text, Catch::Contains("process_resident_memory_bytes "));
  CHECK_THAT(text, Catch::Contains("process_cpu_seconds_total "));
}
