// Tests of metrics/table_metrics.* and the scrape of metrics/server_metrics.*.
#include "metrics/table_metrics.h"

#include <array>
#include <cmath>
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

TEST_CASE("a power-of-two histogram puts each value in the bucket of the smallest bound >= it") {
  using H = replayd::Log2Histogram<8>;  // bounds 0, 1, 2, 4, 8, 16, 32, +inf
  CHECK(H::bucket_of(0) == 0);
  CHECK(H::bucket_of(1) == 1);
  CHECK(H::bucket_of(2) == 2);
  CHECK(H::bucket_of(3) == 3);
  CHECK(H::bucket_of(4) == 3);
  CHECK(H::bucket_of(5) == 4);
  CHECK(H::bucket_of(32) == 6);
  CHECK(H::bucket_of(33) == 7);
  CHECK(H::bucket_of(UINT64_MAX) == 7);
  CHECK(H::upper_bound(6) == 32);
  CHECK(std::isinf(H::upper_bound(7)));
  H h;
  for (std::uint64_t v : {0, 3, 3, 4, 100}) h.add(v);
  CHECK(h.count == 5);
  CHECK(h.sum == 110);
  CHECK(h.buckets[0] == 1);
  CHECK(h.buckets[3] == 3);
  CHECK(h.buckets[7] == 1);
  // histogram_quantile's estimate: rank 2.5 of 5 falls in (2, 4], 1.5 of its 3 values in.
  CHECK(h.quantile(0.5) == Approx(3.0));
  CHECK(h.quantile(1.0) == 32);  // in the +inf bucket: the last finite bound
  CHECK(H{}.quantile(0.5) == 0);
}

TEST_CASE("priorities fall in power-of-two buckets from 2^-20 to 2^20 with 0 and +inf apart") {
  using P = replayd::PriorityHistogram;
  CHECK(P::bucket_of(0.0) == 0);
  CHECK(P::upper_bound(P::bucket_of(1.0)) == 1.0);
  CHECK(P::upper_bound(P::bucket_of(1.5)) == 2.0);
  CHECK(P::upper_bound(P::bucket_of(2.0)) == 2.0);
  CHECK(P::upper_bound(P::bucket_of(0.3)) == 0.5);
  CHECK(P::upper_bound(P::bucket_of(1e-9)) == std::ldexp(1.0, -20));
  CHECK(std::isinf(P::upper_bound(P::bucket_of(3e6))));
  CHECK(P::upper_bound(P::bucket_of(1048576.0)) == 1048576.0);
}

TEST_CASE("replay histograms are exported cumulative, seconds scaled, episodes only if episodic") {
  TableSnapshot items = snapshot("items", 10);
  items.info.replay.sample_age_ms.add(3);     // le 0.004
  items.info.replay.sample_age_ms.add(1000);  // le 1.024
  items.info.replay.resets = 2;
  items.info.replay.reset_items = 30;
  items.info.rate_limiter.inserts = 8;
  items.info.rate_limiter.samples = 2;
  TableSnapshot episodes = snapshot("episodes", 10);
  episodes.episodic = true;
  episodes.info.replay.episode_length_steps.add(5);
  const std::vector<TableSnapshot> tables{items, episodes};
  const auto families = replayd::metrics::table_families(tables);

  const auto& age = family(families, "replayd_table_sample_age_seconds");
  REQUIRE(age.metric.size() == 2);
  const auto& h = age.metric[0].histogram;
  CHECK(h.sample_count == 2);
  CHECK(h.sample_sum == Approx(1.003));
  REQUIRE(h.bucket.size() == 34);
  CHECK(h.bucket[2].upper_bound == Approx(0.002));
  CHECK(h.bucket[2].cumulative_count == 0);
  CHECK(h.bucket[3].upper_bound == Approx(0.004));
  CHECK(h.bucket[3].cumulative_count == 1);
  CHECK(h.bucket[11].upper_bound == Approx(1.024));
  CHECK(h.bucket[11].cumulative_count == 2);
  CHECK(std::isinf(h.bucket.back().upper_bound));

  const auto& lengths = family(families, "replayd_table_episode_length_steps");
  REQUIRE(lengths.metric.size() == 1);
  CHECK(lengths.metric[0].label[0].value == "episodes");
  CHECK(family(families, "replayd_table_resets_total").metric[0].counter.value == 2);
  CHECK(family(families, "replayd_table_reset_items_total").metric[0].counter.value == 30);
  CHECK(family(families, "replayd_table_samples_per_insert").metric[0].gauge.value == 0.25);
  CHECK(family(families, "replayd_table_samples_per_insert").metric[1].gauge.value == 0);
}
