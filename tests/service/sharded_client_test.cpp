// ShardedClient against three real servers: the union samples like one table holding every
// item (chi-square against the exact distribution, exact probabilities and weights), inserts
// go round-robin, updates and deletes reach the shard that owns the key.
#include <catch2/catch.hpp>
#include <cmath>
#include <map>
#include <numeric>
#include <set>

#include "replayd_client/sharded/shard_keys.h"
#include "replayd_client/sharded/sharded_client.h"
#include "replayd_client/sharded/union_sample.h"
#include "server_process.h"
#include "test_support.h"

namespace replayd::testing {
namespace {

// 99.9% quantiles of the chi-square distribution by degrees of freedom.
const std::map<std::size_t, double> kChiSquare999{{1, 10.828}, {8, 26.124}, {11, 31.264}};

struct Shards {
  ServerProcess servers[3];
  std::vector<std::string> addresses{servers[0].unix_address(), servers[1].unix_address(),
                                     servers[2].unix_address()};
  rc::ShardedClient client{addresses, {}, /*seed=*/5};
};

boost::json::object union_table(std::string_view sampler) {
  auto description = json_object(R"({"name": "union", "capacity": 300, "seed": 1,
      "fields": [{"name": "item", "dtype": "int64", "shape": []}],
      "rate_limiter": {"kind": "min_size", "min_size_to_sample": 1}})");
  boost::json::object kind{{"kind", sampler}};
  if (sampler == "prioritized") kind["priority_exponent"] = 1.0;
  description["sampler"] = std::move(kind);
  return description;
}

// Stores items 0..N-1 spread over the shards as given (each shard's items with these
// priorities); returns each item's exact probability in one table holding them all.
std::vector<double> fill(Shards& shards, const std::vector<std::vector<double>>& priorities,
                         bool prioritized) {
  shards.client.create_table(union_table(prioritized ? "prioritized" : "uniform"));
  std::int64_t item = 0;
  std::vector<double> exact;
  for (std::size_t s = 0; s < priorities.size(); ++s) {
    std::vector<std::int64_t> ids(priorities[s].size());
    std::iota(ids.begin(), ids.end(), item);
    item += static_cast<std::int64_t>(ids.size());
    rc::InsertBatch batch(ids.size());
    batch.add("item", ids).priorities(priorities[s]);
    shards.client.shard(s).insert("union", batch);
    exact.insert(exact.end(), priorities[s].begin(), priorities[s].end());
  }
  const double total = std::accumulate(exact.begin(), exact.end(), 0.0);
  for (double& p : exact)
    p = prioritized ? p / total : 1.0 / static_cast<double>(exact.size());
  return exact;
}

double chi_square(const std::vector<double>& counts, const std::vector<double>& probabilities) {
  const double draws = std::accumulate(counts.begin(), counts.end(), 0.0);
  double statistic = 0;
  for (std::size_t i = 0; i < counts.size(); ++i) {
    const double expected = probabilities[i] * draws;
    statistic += (counts[i] - expected) * (counts[i] - expected) / expected;
  }
  return statistic;
}

struct Drawn {
  std::vector<double> counts;
  std::map<std::int64_t, std::pair<double, double>> reported;  // item -> (probability, weight)
  std::map<std::int64_t, std::uint64_t> key_of;                // item -> global key
};

Drawn draw(rc::ShardedClient& client, std::size_t items, int calls, double beta) {
  Drawn drawn{std::vector<double>(items, 0.0), {}, {}};
  for (int call = 0; call < calls; ++call) {
    const rc::SampleBatch sample = client.sample("union", 512, {.beta = beta, .timeout_ms = 30000});
    REQUIRE(sample.size() == 512);
    const auto item = sample.field("item").as<std::int64_t>();
    for (std::size_t i = 0; i < sample.size(); ++i) {
      drawn.counts.at(static_cast<std::size_t>(item[i])) += 1;
      drawn.reported[item[i]] = {sample.probabilities()[i], sample.weights()[i]};
      drawn.key_of[item[i]] = sample.keys()[i];
    }
  }
  return drawn;
}

}  // namespace

TEST_CASE("the union of prioritized shards samples like one table holding every item",
          "[sharded]") {
  Shards shards;
  const auto exact = fill(shards, {{1, 2, 3}, {4, 0.5}, {1, 1, 1, 6}}, /*prioritized=*/true);
  const Drawn drawn = draw(shards.client, exact.size(), 60, /*beta=*/0.5);
  CHECK(chi_square(drawn.counts, exact) < kChiSquare999.at(exact.size() - 1));
  const double smallest = *std::min_element(exact.begin(), exact.end());
  for (const auto& [item, reported] : drawn.reported) {
    INFO("item " << item);
    CHECK(reported.first == Approx(exact[item]).epsilon(1e-9));
    CHECK(reported.second == Approx(std::pow(exact[item] / smallest, -0.5)).epsilon(1e-9));
  }
}

TEST_CASE("the union of uniform shards is uniform over every item", "[sharded]") {
  Shards shards;
  const auto exact =
      fill(shards,
           {std::vector<double>(2, 1.0), std::vector<double>(4, 1.0), std::vector<double>(6, 1.0)},
           /*prioritized=*/false);
  const Drawn drawn = draw(shards.client, exact.size(), 40, /*beta=*/0.4);
  CHECK(chi_square(drawn.counts, exact) < kChiSquare999.at(exact.size() - 1));
  for (const auto& [item, reported] : drawn.reported) {
    CHECK(reported.first == Approx(1.0 / 12));
    CHECK(reported.second == Approx(1.0));
  }
}

TEST_CASE("sharded inserts go round-robin and their keys name their shard", "[sharded]") {
  Shards shards;
  auto description = union_table("uniform");
  shards.client.create_table(description);
  const std::vector<std::int64_t> ids{0, 1, 2, 3};
  rc::InsertBatch batch(4);
  batch.add("item", ids);
  std::vector<std::size_t> shard_of;
  for (int i = 0; i < 6; ++i)
    shard_of.push_back(rc::shard_of_key(shards.client.insert("union", batch)[0]));
  CHECK(shard_of == std::vector<std::size_t>{0, 1, 2, 0, 1, 2});
  for (std::size_t s = 0; s < 3; ++s)
    CHECK(table_size(shards.client.shard(s), "union") == 8);
  CHECK(shards.client.size("union") == 24);
  // capacity 300 over three shards: 100 each.
  const auto info = shards.client.shard(1).info("union");
  CHECK(info.at("tables").as_array().at(0).at("capacity").to_number<int>() == 100);
}

TEST_CASE("priority updates and deletes reach the shard that owns each key", "[sharded]") {
  Shards shards;
  const auto exact = fill(shards, {{1, 1}, {1, 1}, {1, 1}}, /*prioritized=*/true);
  Drawn seen;
  REQUIRE(eventually([&] {
    const Drawn more = draw(shards.client, exact.size(), 1, 0.4);
    seen.key_of.insert(more.key_of.begin(), more.key_of.end());
    return seen.key_of.size() == exact.size();
  }));
  std::vector<std::uint64_t> keys;
  for (const auto& [item, key] : seen.key_of)
    keys.push_back(key);
  // Item 5 (on shard 2) gets all the mass.
  std::vector<double> priorities(keys.size(), 0.0);
  priorities[5] = 10.0;
  const rc::UpdateResult updated = shards.client.update_priorities("union", keys, priorities);
  CHECK(updated.applied == 6);
  CHECK(updated.stale == 0);
  const auto sample = shards.client.sample("union", 64);
  const auto items = sample.field("item").as<std::int64_t>();
  CHECK(std::set<std::int64_t>(items.begin(), items.end()) == std::set<std::int64_t>{5});

  const std::vector<std::uint64_t> doomed{keys[0], keys[3]};
  CHECK(shards.client.delete_keys("union", doomed).deleted == 2);
  CHECK(table_size(shards.client.shard(0), "union") == 1);
  CHECK(table_size(shards.client.shard(1), "union") == 1);
  CHECK(table_size(shards.client.shard(2), "union") == 2);
  CHECK(shards.client.delete_keys("union", std::vector<std::uint64_t>{keys[0]}).stale == 1);

  const std::vector<std::uint64_t> foreign{std::uint64_t{7} << rc::kLocalKeyBits};
  const auto code = error_code_of([&] { shards.client.delete_keys("union", foreign); });
  CHECK(code == rc::ErrorCode::invalid_argument);
}

TEST_CASE("draws split among shards as a multinomial over their shares", "[sharded]") {
  const std::vector<rc::TableState> states{{10, 5.0, 0.5}, {0, 0.0, 0.0}, {30, 15.0, 0.1}};
  const auto shares = rc::draw_shares(states);
  CHECK(shares == std::vector<double>{0.25, 0.0, 0.75});
  std::mt19937_64 random(3);
  std::vector<double> counts(3, 0.0);
  for (int i = 0; i < 200; ++i) {
    const auto split = rc::split_draws(40, shares, random);
    CHECK(std::accumulate(split.begin(), split.end(), std::uint64_t{0}) == 40);
    for (std::size_t s = 0; s < 3; ++s)
      counts[s] += static_cast<double>(split[s]);
  }
  CHECK(counts[1] == 0);
  CHECK(chi_square({counts[0], counts[2]}, {0.25, 0.75}) < kChiSquare999.at(1));
  // No mass anywhere (all priorities 0): by size; nothing stored: evenly.
  CHECK(rc::draw_shares(std::vector<rc::TableState>{{1, 0, 0}, {3, 0, 0}}) ==
        std::vector<double>{0.25, 0.75});
  CHECK(rc::draw_shares(std::vector<rc::TableState>{{0, 0, 0}, {0, 0, 0}}) ==
        std::vector<double>{0.5, 0.5});
}

}  // namespace replayd::testing
