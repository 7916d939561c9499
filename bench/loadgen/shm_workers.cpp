#include "shm_workers.h"

#include <cstring>
#include <deque>
#include <future>
#include <iostream>
#include <memory>
#include <vector>

#include "in_flight.h"
#include "replayd_client/client.h"
#include "replayd_client/shm/plane_sampler.h"

namespace replayd::loadgen {
namespace {

// Bytes a column of `bytes` takes in a payload (8-aligned, docs/PROTOCOL.md).
std::uint64_t padded(std::uint64_t bytes) {
  return (bytes + 7) / 8 * 8;
}

std::unique_ptr<client::Client> connect(const WorkerPlan& plan, const char* name) {
  auto client = std::make_unique<client::Client>(plan.address, client_options(plan, name));
  if (!client->shm_offered()) {
    throw client::Error(client::ErrorCode::permission_denied,
                        "--shm: the server does not offer shared memory here: " +
                            client->server_hello().shm_reason);
  }
  return client;
}

// One staging slot: the columns of a batch of `n` items laid out as an insert payload.
struct Slot {
  std::uint64_t offset = 0;
  std::vector<std::span<std::byte>> columns;
  client::InsertBatch batch;
};

}  // namespace

WorkerResult run_shm_explorer(const WorkerPlan& plan, void (*wait_for_start)(void*),
                              void* context) {
  const auto connected = connect(plan, "replayd_loadgen explorer (shm)");
  client::Client& client = *connected;
  const std::uint64_t n = plan.insert_chunk_items;
  RandomBatch data(plan.workload, n, plan.seed);
  std::uint64_t slot_bytes = 0;
  for (const auto& field : plan.workload.fields)
    slot_bytes += padded(n * field.item_bytes);
  slot_bytes = (slot_bytes + 63) / 64 * 64;
  const std::size_t slot_count = plan.depth + 1;
  auto arena = client.map_staging(slot_bytes * slot_count);
  std::vector<Slot> slots(slot_count);
  for (std::size_t k = 0; k < slot_count; ++k) {
    Slot& slot = slots[k];
    slot.offset = k * slot_bytes;
    slot.batch.clear(n);
    std::uint64_t at = slot.offset;
    for (const auto& field : plan.workload.fields) {
      slot.columns.push_back(arena->bytes().subspan(at, n * field.item_bytes));
      slot.batch.add(field.name, field.dtype, std::span<const std::uint64_t>(field.shape),
                     slot.columns.back());
      at += padded(n * field.item_bytes);
    }
  }
  const auto& source = data.columns();  // the items each request writes, one column per field
  wait_for_start(context);

  WorkerResult result;
  std::deque<InFlight<client::Keys>> in_flight;
  std::size_t next = 0;
  const auto start = Clock::now();
  const auto end = start + std::chrono::duration<double>(plan.duration_s);
  while (Clock::now() < end) {
    while (in_flight.size() < plan.depth) {
      Slot& slot = slots[next];
      next = (next + 1) % slot_count;
      for (std::size_t f = 0; f < slot.columns.size(); ++f)
        std::memcpy(slot.columns[f].data(), source[f].data(), source[f].size());
      const auto sent_at = Clock::now();
      in_flight.push_back(
          {client.insert_staged_async(plan.table, slot.batch, {arena.get(), slot.offset, n}),
           sent_at});
    }
    finish_oldest(in_flight, result.insert, n, result);
  }
  while (!in_flight.empty())
    finish_oldest(in_flight, result.insert, n, result);
  result.elapsed_s = std::chrono::duration<double>(Clock::now() - start).count();
  return result;
}

WorkerResult run_shm_learner(const WorkerPlan& plan, void (*wait_for_start)(void*), void* context) {
  const auto connected = connect(plan, "replayd_loadgen learner (shm)");
  client::Client& client = *connected;
  client::PlaneSampler sampler(client, plan.table);
  const std::uint64_t n = plan.sample_batch_items;
  wait_for_start(context);

  WorkerResult result;
  std::deque<InFlight<client::DrawnKeys>> in_flight;
  auto take = [&] {
    auto drawn = finish_oldest(in_flight, result.sample, n, result);
    if (!drawn) return;
    try {
      sampler.complete(std::move(*drawn));  // the rows gathered, changed ones drawn again
    } catch (const client::Error& e) {
      count_error(result, e);
    }
  };
  const auto start = Clock::now();
  const auto end = start + std::chrono::duration<double>(plan.duration_s);
  while (Clock::now() < end) {
    while (in_flight.size() < plan.depth) {
      const auto sent_at = Clock::now();
      in_flight.push_back({client.sample_keys_async(plan.table, n), sent_at});
    }
    take();
  }
  while (!in_flight.empty())
    take();
  result.elapsed_s = std::chrono::duration<double>(Clock::now() - start).count();
  return result;
}

}  // namespace replayd::loadgen
