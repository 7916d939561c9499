// Published values through the C++ client against the real server: a value published in
// parts comes back byte for byte, versions increase and a lower one is refused, a fetch
// waits on the server for a newer version (and answers without bytes when none comes), the
// budgets are checked before anything is held, and a connection's unfinished publish is
// dropped with it.
#include <catch2/catch.hpp>
#include <chrono>
#include <future>
#include <numeric>

#include "replayd_client/values/published_values.h"
#include "server_process.h"
#include "test_support.h"

namespace replayd::testing {
namespace {

std::uint64_t values_bytes(rc::Client& client) {
  return client.info().at("server").at("values_bytes").to_number<std::uint64_t>();
}

}  // namespace

TEST_CASE("a value published in parts is fetched byte for byte, newer versions on the server") {
  ServerProcess server;
  rc::Client learner(server.unix_address());
  rc::Client explorer(server.tcp_address());
  std::vector<float> weights(300'001);
  std::iota(weights.begin(), weights.end(), 0.5f);
  const std::vector<std::int64_t> step{42};
  const std::vector<rc::ValueArrayIn> value{
      {"w", rc::DType::float32, {300'001}, std::as_bytes(std::span(weights))},
      {"step", rc::DType::int64, {}, std::as_bytes(std::span(step))}};
  // Parts of 64 KiB: the value goes in 19 of them.
  CHECK(rc::publish(learner, "policy", value, {.version = std::nullopt, .part_bytes = 64 << 10}) ==
        1);
  const rc::FetchedValue first = rc::fetch(explorer, "policy");
  REQUIRE(first.changed());
  CHECK(first.version() == 1);
  const auto fetched = first.array("w").bytes;
  REQUIRE(fetched.size() == weights.size() * sizeof(float));
  CHECK(std::memcmp(fetched.data(), weights.data(), fetched.size()) == 0);
  CHECK(first.array("step").shape.empty());
  CHECK(std::memcmp(first.array("step").bytes.data(), step.data(), 8) == 0);

  // Nothing newer: the wait ends without a value.
  const rc::FetchedValue same = rc::fetch(explorer, "policy", 1, 100);
  CHECK_FALSE(same.changed());
  CHECK(same.version() == 1);
  CHECK(same.arrays().empty());

  // A fetch waiting on the server is answered by the next publish.
  auto waiting = std::async(std::launch::async, [&] { return rc::fetch(explorer, "policy", 1); });
  CHECK(waiting.wait_for(std::chrono::milliseconds(200)) == std::future_status::timeout);
  CHECK(rc::publish(learner, "policy", value) == 2);
  CHECK(waiting.get().version() == 2);

  CHECK(rc::publish(learner, "policy", value, {.version = 7, .part_bytes = 4 << 20}) == 7);
  CHECK_THROWS_WITH(rc::publish(learner, "policy", value, {.version = 5, .part_bytes = 4 << 20}),
                    Catch::Contains("is not above the current version 7"));
  CHECK_THROWS_WITH(rc::fetch(explorer, "bad name!", std::nullopt, 0),
                    Catch::Contains("is not a value name"));
}

TEST_CASE(
    "value budgets are checked before anything is held, and a closed connection's "
    "publish is dropped") {
  ServerOptions options;
  options.config_json =
      R"({"limits": {"max_value_bytes": 4096, "max_values_bytes": 8192, "max_values": 2}})";
  ServerProcess server(options);
  rc::Client client(server.unix_address());
  std::vector<double> big(1000);
  const std::vector<rc::ValueArrayIn> too_big{
      {"x", rc::DType::float64, {1000}, std::as_bytes(std::span(big))}};
  CHECK_THROWS_WITH(rc::publish(client, "v", too_big), Catch::Contains("max_value_bytes = 4096"));
  const std::vector<rc::ValueArrayIn> fits{
      {"x", rc::DType::float64, {500}, std::as_bytes(std::span(big).first(500))}};
  CHECK(rc::publish(client, "a", fits) == 1);
  CHECK(rc::publish(client, "b", fits) == 1);
  CHECK(values_bytes(client) == 8000);
  CHECK_THROWS_WITH(rc::publish(client, "c", fits), Catch::Contains("max_values = 2"));
  CHECK_THROWS_WITH(rc::publish(client, "a", fits), Catch::Contains("max_values_bytes = 8192"));

  {
    rc::Client leaving(server.unix_address());
    const auto begun = leaving
                           .request_async(R"({"op": "publish_begin", "name": "a", "arrays": [
                               {"name": "x", "dtype": "uint8", "shape": [100]}]})")
                           .get();
    CHECK(begun.meta.find("\"bytes\":104") != std::string::npos);
    CHECK(values_bytes(client) == 8104);
  }
  // The server drops the upload when it sees the connection close.
  for (int i = 0; i < 100 && values_bytes(client) != 8000; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(values_bytes(client) == 8000);
}

}  // namespace replayd::testing

namespace replayd::testing {

TEST_CASE("published values and their versions survive a restart from the data directory") {
  ServerProcess server(ServerOptions{.config_json = "", .extra_args = {}, .data_dir = true});
  std::vector<std::uint16_t> weights(70'000);
  std::iota(weights.begin(), weights.end(), std::uint16_t{3});
  const std::vector<rc::ValueArrayIn> value{
      {"w", rc::DType::uint16, {7, 10'000}, std::as_bytes(std::span(weights))}};
  {
    rc::Client client(server.unix_address());
    CHECK(rc::publish(client, "policy", value, {.version = 41, .part_bytes = 4096}) == 41);
    CHECK(rc::publish(client, "critic", value) == 1);
  }
  server.restart();  // SIGTERM: the final snapshot holds the values
  rc::Client client(server.unix_address());
  const rc::FetchedValue policy = rc::fetch(client, "policy", std::nullopt, 0);
  REQUIRE(policy.changed());
  CHECK(policy.version() == 41);
  CHECK(policy.array("w").shape == std::vector<std::uint64_t>{7, 10'000});
  REQUIRE(policy.array("w").bytes.size() == weights.size() * 2);
  CHECK(std::memcmp(policy.array("w").bytes.data(), weights.data(), weights.size() * 2) == 0);
  CHECK(rc::fetch(client, "critic", std::nullopt, 0).version() == 1);
  CHECK(rc::publish(client, "policy", value) == 42);  // versions go on from the restored one
}

}  // namespace replayd::testing
