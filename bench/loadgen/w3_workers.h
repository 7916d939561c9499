// W3 (Atari-like episodes): the frame pool explorers write from, the episode stream they
// write, and the W3 explorer and learner loops (workers.h runs them for workload W3).
// Explorers write through the C++ EpisodeWriter, from frames compressed once when the pool
// is built (the run measures the server and the transport, not the explorers' zstd), or,
// with live compression, compressing each frame as they append it. The learner samples
// n-step k = 1 and, unless told to decode, only counts the replies.
// Threading: each object belongs to one worker process's main thread.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "replayd_client/episodes/episode_writer.h"
#include "w3_frames.h"
#include "workers.h"

namespace replayd::loadgen {

// A pool of W3 frames (w3_frames.h), each also as one zstd frame (level 3, checksum).
class W3FramePool {
 public:
  // Builds `count` frames from `seed` and compresses each once; keeps the raw frames only
  // with `keep_raw` (live compression). O(count) frame draws and compressions.
  W3FramePool(std::uint64_t seed, std::size_t count, bool keep_raw);

  std::size_t size() const { return sizes_.size(); }
  std::span<const std::byte> compressed(std::size_t i) const {
    return std::span(frames_).subspan(offsets_[i], sizes_[i]);
  }
  std::span<const std::uint8_t> raw(std::size_t i) const {
    return std::span(raw_).subspan(i * kW3FrameBytes, kW3FrameBytes);
  }
  bool has_raw() const { return !raw_.empty(); }
  // Raw bytes over compressed bytes of the whole pool.
  double compression_ratio() const;

 private:
  std::vector<std::uint8_t> raw_;
  std::vector<std::byte> frames_;
  std::vector<std::size_t> offsets_;
  std::vector<std::uint32_t> sizes_;
};

// Writes W3 episodes of 200..2000 steps (one env) through a writer, cycling through the
// pool: step t's obs is the next pool frame, the final observation the one after; act
// uniform in [0, 18), rew 0 or 1.
class W3EpisodeStream {
 public:
  W3EpisodeStream(const W3FramePool& pool, bool live_compression, std::uint64_t seed);
  // Appends one step to env 0 (and ends its episode, with the final observation, after
  // its last step). Returns whether the writer sent a request. Throws client::Error.
  bool write_step(client::EpisodeWriter& writer);

 private:
  client::StepValue obs(std::size_t frame) const;

  const W3FramePool& pool_;
  bool live_;
  std::mt19937_64 random_;
  std::size_t next_frame_ = 0;
  std::size_t left_ = 0;  // steps left in the current episode
};

// The W3 explorer: an EpisodeWriter (batch insert_chunk_items, depth requests in flight)
// appending steps for duration_s. Inserts count steps and append_steps requests; no
// per-request latency (the writer pipelines them).
WorkerResult run_w3_explorer(const WorkerPlan& plan, void (*wait_for_start)(void*), void* context);
// The W3 learner: n-step (k = 1) samples of sample_batch_items, depth in flight; with
// plan.w3_decode the client decodes and decompresses each reply, else it is counted only.
WorkerResult run_w3_learner(const WorkerPlan& plan, void (*wait_for_start)(void*), void* context);

}  // namespace replayd::loadgen
