// quickstart: connect to a replayd server, create a table, insert a batch of transitions,
// sample it and print what came back.
// Usage: replayd_quickstart [ADDRESS]   (default unix:///tmp/replayd.sock)
#include <boost/json/parse.hpp>
#include <cstdint>
#include <exception>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include "replayd_client/client.h"

namespace rc = replayd::client;

// Its own table: the Python quick starts use "quickstart" and "replay" with other fields,
// and a table name already taken by another description is an already_exists error.
constexpr std::string_view kTable = "quickstart_cpp";

int main(int argc, char** argv) {
  const std::string address = argc > 1 ? argv[1] : std::string(rc::kDefaultAddress);
  try {
    rc::Client client(address);
    std::cout << "connected to " << client.server_hello().server << " at " << address << "\n";

    // A prioritized table of CartPole-like transitions; exist_ok makes reruns harmless.
    auto description = boost::json::parse(R"({
      "capacity": 1000,
      "fields": [{"name": "obs", "dtype": "float32", "shape": [4]},
                 {"name": "act", "dtype": "int64", "shape": []},
                 {"name": "rew", "dtype": "float32", "shape": []},
                 {"name": "done", "dtype": "bool", "shape": []}],
      "sampler": {"kind": "prioritized", "priority_exponent": 0.6},
      "remover": "fifo",
      "rate_limiter": {"kind": "min_size", "min_size_to_sample": 1}})")
                           .as_object();
    description["name"] = kTable;
    client.create_table(description, /*exist_ok=*/true);

    // Eight transitions as columns: the batch borrows these vectors, it does not copy them.
    constexpr std::uint64_t n = 8;
    std::vector<float> obs(n * 4);
    std::vector<std::int64_t> act(n);
    std::vector<float> rew(n);
    std::vector<std::uint8_t> done(n);  // bool travels as one byte, 0 or 1
    std::vector<double> priorities(n);
    for (std::uint64_t i = 0; i < n; ++i) {
      for (std::uint64_t j = 0; j < 4; ++j)
        obs[i * 4 + j] = static_cast<float>(i) + 0.25f * j;
      act[i] = static_cast<std::int64_t>(i % 2);
      rew[i] = 1.0f;
      done[i] = i == n - 1;
      priorities[i] = 1.0 + static_cast<double>(i);
    }
    rc::InsertBatch batch(n);
    batch.add("obs", obs, {4})
        .add("act", act)
        .add("rew", rew)
        .add("done", rc::DType::boolean, {}, std::as_bytes(std::span(done)))
        .priorities(priorities);
    const rc::Keys keys = client.insert(kTable, batch);
    std::cout << "inserted " << keys.size() << " items, keys " << keys[0] << ".."
              << keys[keys.size() - 1] << "\n";

    const rc::SampleBatch sample =
        client.sample(kTable, 4, {.beta = 0.4, .timeout_ms = 5000});
    const auto sampled_obs = sample.field("obs").as<float>();
    const auto sampled_act = sample.field("act").as<std::int64_t>();
    std::cout << "sampled " << sample.size() << " items:\n";
    for (std::size_t i = 0; i < sample.size(); ++i) {
      std::cout << "  key " << sample.keys()[i] << "  p=" << sample.probabilities()[i]
                << "  w=" << sample.weights()[i] << "  times_sampled=" << sample.times_sampled()[i]
                << "  obs=[" << sampled_obs[i * 4] << ", " << sampled_obs[i * 4 + 1] << ", "
                << sampled_obs[i * 4 + 2] << ", " << sampled_obs[i * 4 + 3] << "]"
                << "  act=" << sampled_act[i] << "\n";
    }

    // Learner feedback: new priorities for what was sampled.
    std::vector<double> new_priorities(sample.size(), 0.5);
    const auto updated = client.update_priorities(kTable, sample.keys(), new_priorities);
    std::cout << "updated " << updated.applied << " priorities (" << updated.stale << " stale)\n";
    return 0;
  } catch (const rc::Error& e) {
    std::cerr << "quickstart: " << e.what() << "\n";
    if (e.code() == rc::ErrorCode::connection_lost) {
      std::cerr << "is the server running? start it with ./scripts/run\n";
    }
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "quickstart: " << e.what() << "\n";
    return 1;
  }
}
