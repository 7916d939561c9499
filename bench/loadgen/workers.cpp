#include "workers.h"

#include <deque>
#include <future>
#include <iostream>
#include <random>
#include <utility>
#include <vector>

#include "in_flight.h"
#include "replayd_client/client.h"
#include "shm_workers.h"
#include "w3_workers.h"

namespace replayd::loadgen {

client::ClientOptions client_options(const WorkerPlan& plan, const char* name) {
  client::ClientOptions options;
  options.max_in_flight = 2 * plan.depth + 16;
  options.client_name = name;
  options.shared_memory = plan.shm;
  return options;
}

WorkerResult run_explorer(const WorkerPlan& plan, void (*wait_for_start)(void*), void* context) {
  if (plan.workload.episodic) return run_w3_explorer(plan, wait_for_start, context);
  if (plan.shm) return run_shm_explorer(plan, wait_for_start, context);
  client::Client client(plan.address, client_options(plan, "replayd_loadgen explorer"));
  RandomBatch data(plan.workload, plan.insert_chunk_items, plan.seed);
  wait_for_start(context);

  WorkerResult result;
  std::deque<InFlight<client::Keys>> in_flight;
  const auto start = Clock::now();
  const auto end = start + std::chrono::duration<double>(plan.duration_s);
  while (Clock::now() < end) {
    while (in_flight.size() < plan.depth) {
      const auto sent_at = Clock::now();
      in_flight.push_back({client.insert_async(plan.table, data.batch()), sent_at});
    }
    finish_oldest(in_flight, result.insert, plan.insert_chunk_items, result);
  }
  while (!in_flight.empty())
    finish_oldest(in_flight, result.insert, plan.insert_chunk_items, result);
  result.elapsed_s = std::chrono::duration<double>(Clock::now() - start).count();
  return result;
}

WorkerResult run_learner(const WorkerPlan& plan, void (*wait_for_start)(void*), void* context) {
  if (plan.workload.episodic) return run_w3_learner(plan, wait_for_start, context);
  if (plan.shm) return run_shm_learner(plan, wait_for_start, context);
  client::Client client(plan.address, client_options(plan, "replayd_loadgen learner"));
  std::mt19937_64 random(plan.seed);
  std::uniform_real_distribution<double> priority(0.01, 10.0);
  std::vector<double> priorities(plan.sample_batch_items);
  wait_for_start(context);

  WorkerResult result;
  std::deque<InFlight<client::SampleBatch>> samples;
  std::deque<InFlight<client::UpdateResult>> updates;
  const auto start = Clock::now();
  const auto end = start + std::chrono::duration<double>(plan.duration_s);
  auto issue_sample = [&] {
    const auto sent_at = Clock::now();
    samples.push_back({client.sample_async(plan.table, plan.sample_batch_items), sent_at});
  };
  auto take_sample = [&] {
    auto batch = finish_oldest(samples, result.sample, plan.sample_batch_items, result);
    if (!batch || !plan.update_priorities) return;
    const auto keys = batch->keys();
    priorities.resize(keys.size());
    for (auto& p : priorities)
      p = priority(random);
    if (updates.size() >= plan.depth) finish_oldest(updates, result.update, keys.size(), result);
    const auto sent_at = Clock::now();
    updates.push_back({client.update_priorities_async(plan.table, keys, priorities), sent_at});
  };
  while (Clock::now() < end) {
    while (samples.size() < plan.depth)
      issue_sample();
    take_sample();
  }
  while (!samples.empty())
    take_sample();
  while (!updates.empty())
    finish_oldest(updates, result.update, plan.sample_batch_items, result);
  result.elapsed_s = std::chrono::duration<double>(Clock::now() - start).count();
  return result;
}

}  // namespace replayd::loadgen
