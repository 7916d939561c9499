#include "w3_workers.h"

#include <chrono>
#include <deque>
#include <future>
#include <iostream>
#include <string>

#include "replayd_client/client.h"
#include "replayd_client/pixels/zstd_codec.h"

namespace replayd::loadgen {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

W3FramePool::W3FramePool(std::uint64_t seed, std::size_t count, bool keep_raw)
    : raw_(w3_frame_pool(seed, count)) {
  client::ZstdCompressor compressor;
  for (std::size_t i = 0; i < count; ++i) {
    offsets_.push_back(frames_.size());
    sizes_.push_back(compressor.compress(std::as_bytes(raw(i)), 3, frames_));
  }
  if (!keep_raw) {
    raw_.clear();
    raw_.shrink_to_fit();
  }
}

double W3FramePool::compression_ratio() const {
  return frames_.empty()
             ? 0
             : static_cast<double>(size() * kW3FrameBytes) / static_cast<double>(frames_.size());
}

W3EpisodeStream::W3EpisodeStream(const W3FramePool& pool, bool live_compression, std::uint64_t seed)
    : pool_(pool), live_(live_compression), random_(seed), next_frame_(seed % pool.size()) {}

client::StepValue W3EpisodeStream::obs(std::size_t frame) const {
  if (live_) return client::step_value("obs", pool_.raw(frame));
  return client::compressed_step_value("obs", client::DType::uint8, pool_.compressed(frame));
}

bool W3EpisodeStream::write_step(client::EpisodeWriter& writer) {
  if (left_ == 0) left_ = 200 + random_() % 1801;
  const std::size_t frame = next_frame_;
  next_frame_ = (next_frame_ + 1) % pool_.size();
  const auto act = static_cast<std::int32_t>(random_() % 18);
  const float rew = random_() % 16 == 0 ? 1.0F : 0.0F;
  const std::size_t before = writer.buffered();
  writer.append(0, {obs(frame), client::step_value("act", act), client::step_value("rew", rew)});
  bool sent = writer.buffered() <= before;
  if (--left_ == 0) {
    const bool buffered = writer.buffered() > 0;
    writer.end_episode(0, /*terminated=*/true, {obs(next_frame_)});
    sent = sent || !buffered;  // an end with nothing buffered is a request of its own
  }
  return sent;
}

WorkerResult run_w3_explorer(const WorkerPlan& plan, void (*wait_for_start)(void*), void* context) {
  const W3FramePool pool(plan.seed, plan.w3_pool_frames, plan.w3_live_compression);
  client::EpisodeWriterOptions options;
  options.batch = plan.insert_chunk_items;
  options.max_in_flight = plan.depth;
  options.client = client_options(plan, "replayd_loadgen W3 explorer");
  client::EpisodeWriter writer(plan.address, plan.table, options);
  W3EpisodeStream stream(pool, plan.w3_live_compression, plan.seed);
  wait_for_start(context);

  WorkerResult result;
  const auto start = Clock::now();
  const auto end = start + std::chrono::duration<double>(plan.duration_s);
  try {
    while (Clock::now() < end) {
      if (stream.write_step(writer)) ++result.insert.calls;
      ++result.insert.items;
    }
    writer.flush();
  } catch (const client::Error& e) {
    if (result.errors++ == 0)
      std::cerr << "replayd_loadgen: W3 append failed: " << e.what() << "\n";
  }
  result.elapsed_s = std::chrono::duration<double>(Clock::now() - start).count();
  return result;
}

WorkerResult run_w3_learner(const WorkerPlan& plan, void (*wait_for_start)(void*), void* context) {
  client::Client client(plan.address, client_options(plan, "replayd_loadgen W3 learner"));
  const std::string meta = "{\"op\":\"sample\",\"table\":\"" + plan.table +
                           "\",\"n\":" + std::to_string(plan.sample_batch_items) +
                           ",\"nstep\":1,\"gamma\":0.99}";
  client::NStepOptions nstep;
  nstep.gamma = 0.99;
  wait_for_start(context);

  WorkerResult result;
  struct Call {
    std::future<client::Reply> raw;
    std::future<client::SampleBatch> decoded;
    Clock::time_point sent_at;
  };
  std::deque<Call> in_flight;
  auto finish_oldest = [&] {
    Call call = std::move(in_flight.front());
    in_flight.pop_front();
    try {
      if (plan.w3_decode) {
        call.decoded.get();
      } else {
        call.raw.get();
      }
      result.sample.latency.record(static_cast<std::uint64_t>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - call.sent_at)
              .count()));
      ++result.sample.calls;
      result.sample.items += plan.sample_batch_items;
    } catch (const client::Error& e) {
      if (result.errors++ == 0)
        std::cerr << "replayd_loadgen: W3 sample failed: " << e.what() << "\n";
    }
  };
  const auto start = Clock::now();
  const auto end = start + std::chrono::duration<double>(plan.duration_s);
  while (Clock::now() < end) {
    while (in_flight.size() < plan.depth) {
      Call call;
      call.sent_at = Clock::now();
      if (plan.w3_decode) {
        call.decoded = client.sample_nstep_async(plan.table, plan.sample_batch_items, nstep);
      } else {
        call.raw = client.request_async(meta);
      }
      in_flight.push_back(std::move(call));
    }
    finish_oldest();
  }
  while (!in_flight.empty())
    finish_oldest();
  result.elapsed_s = std::chrono::duration<double>(Clock::now() - start).count();
  return result;
}

}  // namespace replayd::loadgen
