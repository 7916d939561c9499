// Frame fields through the C++ client against the real server (docs/PROTOCOL.md, "Frame
// fields"): episodes with a zstd-compressed, stacked, next_of observation written with
// EpisodeWriter (with and without final observations), then n-step and sequence samples
// whose stacks are checked exactly against a reference built from what was written, and a
// frame corrupted past its header, which the reader reports naming the table and the key.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstring>
#include <map>
#include <random>
#include <vector>

#include "replayd_client/episodes/episode_writer.h"
#include "replayd_client/pixels/zstd_codec.h"
#include "server_process.h"
#include "test_support.h"

namespace replayd::testing {
namespace {

constexpr const char* kTable = "pixels";
constexpr std::uint64_t kStack = 3;
constexpr std::size_t kObsBytes = 6 * 5;

boost::json::object pixels_table() {
  return json_object(R"({"name": "pixels", "capacity": 4096, "seed": 5, "episodic": true,
      "reward": "rew",
      "fields": [{"name": "obs", "dtype": "uint8", "shape": [6, 5], "stack": 3,
                  "next_of": true, "compression": "zstd", "compression_level": 5},
                 {"name": "act", "dtype": "int32", "shape": []},
                 {"name": "rew", "dtype": "float32", "shape": []}],
      "sampler": "uniform",
      "rate_limiter": {"kind": "min_size", "min_size_to_sample": 1}})");
}

rc::NStepOptions nstep(std::uint64_t k, bool raw = false) {
  rc::NStepOptions options;
  options.nstep = k;
  options.gamma = 0.9;
  options.raw = raw;
  return options;
}

// The observation numbered `id`: a small image that differs from every other id.
std::vector<std::uint8_t> image(std::uint32_t id) {
  std::vector<std::uint8_t> pixels(kObsBytes);
  for (std::size_t i = 0; i < pixels.size(); ++i)
    pixels[i] = static_cast<std::uint8_t>(i < 8 ? (id >> (i % 4 * 8)) & 0xff : (id * 7 + i) % 5);
  return pixels;
}

// An episode as stored: its observations in order, then its final observation when one was
// given (ended without one, its last step stands in).
struct RefEpisode {
  std::vector<std::uint32_t> observations;  // ids; stored steps, the final one included
  std::size_t appended = 0;                 // steps written with append
  bool ended = false;
};

struct Reference {
  std::map<std::uint64_t, RefEpisode> episodes;                          // by server id
  std::map<std::uint64_t, std::pair<std::uint64_t, std::size_t>> steps;  // key -> (episode, pos)

  // The observation ids of the stack of step `position`: the episode's first step stands
  // in for steps before it; nullopt (zeros) past its stored steps.
  std::vector<std::optional<std::uint32_t>> stack(const RefEpisode& episode,
                                                  std::int64_t position) const {
    std::vector<std::optional<std::uint32_t>> ids;
    for (std::int64_t i = position - static_cast<std::int64_t>(kStack) + 1; i <= position; ++i) {
      const auto at = static_cast<std::size_t>(std::max<std::int64_t>(i, 0));
      if (at < episode.observations.size()) {
        ids.emplace_back(episode.observations[at]);
      } else {
        ids.emplace_back(std::nullopt);
      }
    }
    return ids;
  }
};

// Observation `id` as the writer takes it: raw for odd ids, for even ones one zstd frame
// made here (in `frame`), as a writer that compresses ahead of time gives it.
rc::StepValue obs_value(std::uint32_t id, const std::vector<std::uint8_t>& pixels,
                        std::vector<std::byte>& frame) {
  if (id % 2 == 1) return rc::step_value("obs", pixels);
  static rc::ZstdCompressor compressor;
  frame.clear();
  compressor.compress(std::as_bytes(std::span(pixels)), 1, frame);
  return rc::compressed_step_value("obs", rc::DType::uint8, frame);
}

// Writes `count` episodes of 1..9 steps over two envs; ends them with a final observation,
// without one, or leaves the last of each env open.
Reference write_episodes(rc::EpisodeWriter& writer, std::size_t count, std::uint64_t seed) {
  std::mt19937_64 random(seed);
  std::vector<std::byte> frame;
  Reference ref;
  std::uint32_t next_id = 1;
  std::vector<std::uint64_t> keys_written;
  std::vector<std::pair<std::uint64_t, std::size_t>> key_owners;
  for (std::size_t e = 0; e < count; ++e) {
    const std::size_t env = e % 2;
    const std::size_t length = 1 + random() % 9;
    RefEpisode* episode = nullptr;
    std::uint64_t episode_id = 0;
    for (std::size_t p = 0; p < length; ++p) {
      const std::uint32_t id = next_id++;
      const auto obs = image(id);
      const std::int32_t act = static_cast<std::int32_t>(id);
      const float rew = 0.5F;
      writer.append(
          env, {obs_value(id, obs, frame), rc::step_value("act", act), rc::step_value("rew", rew)});
      episode_id = *writer.episode(env);
      episode = &ref.episodes[episode_id];
      episode->observations.push_back(id);
      key_owners.emplace_back(episode_id, p);
    }
    episode->appended = length;
    if (e + 2 >= count) continue;  // the last episode of each env stays open
    episode->ended = true;
    const bool terminated = random() % 2 == 0;
    if (random() % 3 != 0) {
      const std::uint32_t final_id = next_id++;
      const auto final_obs = image(final_id);
      writer.end_episode(env, terminated, {obs_value(final_id, final_obs, frame)});
      episode->observations.push_back(final_id);
    } else {  // the last step stands in as the final observation
      writer.end_episode(env, terminated);
    }
  }
  writer.flush();
  REQUIRE(writer.keys().size() == key_owners.size());
  for (std::size_t i = 0; i < key_owners.size(); ++i)
    ref.steps[writer.keys()[i]] = key_owners[i];
  return ref;
}

void check_stack(const rc::FrameView& view,
                 const std::vector<std::optional<std::uint32_t>>& expected) {
  REQUIRE(view.rank() == 1);
  REQUIRE(view.dim(0) == expected.size());
  for (std::size_t j = 0; j < expected.size(); ++j) {
    const auto got = view.value<std::uint8_t>({j});
    const std::vector<std::uint8_t> want =
        expected[j] ? image(*expected[j]) : std::vector<std::uint8_t>(kObsBytes, 0);
    INFO("stack entry " << j << " should be observation " << (expected[j] ? *expected[j] : 0));
    CHECK(std::equal(got.begin(), got.end(), want.begin(), want.end()));
  }
}

// Checks n-step draws of k: valid starts only, and the stacks of t and t+h exactly.
void check_nstep(const Reference& ref, const rc::SampleBatch& batch, std::uint64_t k) {
  REQUIRE(batch.frame_field_count() == 1);
  REQUIRE(batch.frame_field(0).name == "obs");
  REQUIRE(batch.frame_field(0).stack == kStack);
  REQUIRE(batch.frame_field(0).next_of);
  const rc::NStepFrames obs = batch.frames("obs");
  const auto act = batch.field("act").as<std::int32_t>();
  for (std::size_t i = 0; i < batch.size(); ++i) {
    const auto [episode_id, position] = ref.steps.at(batch.keys()[i]);
    const RefEpisode& episode = ref.episodes.at(episode_id);
    const std::size_t stored = episode.observations.size();
    INFO("draw " << i << ": episode " << episode_id << " position " << position << " of "
                 << episode.appended << (episode.ended ? " (ended)" : " (open)") << ", k " << k);
    CHECK(static_cast<std::uint32_t>(act[i]) == episode.observations[position]);
    const std::uint64_t h = batch.steps()[i];
    if (episode.ended) {
      REQUIRE(position + 1 < stored);  // the last stored step is no transition
      CHECK(h == std::min<std::uint64_t>(k, stored - 1 - position));
    } else {
      REQUIRE(position + k < stored);  // the step after the window is stored
      CHECK(h == k);
    }
    const auto p = static_cast<std::int64_t>(position);
    check_stack(obs.stack(i), ref.stack(episode, p));
    check_stack(obs.next_stack(i), ref.stack(episode, p + static_cast<std::int64_t>(h)));
  }
}

TEST_CASE("the episode writer compresses frame fields and samples return exact stacks",
          "[frames]") {
  ServerProcess server;
  rc::Client client(server.unix_address());
  client.create_table(pixels_table());
  rc::EpisodeWriterOptions options;
  options.envs = 2;
  options.batch = 5;
  options.max_in_flight = 2;
  options.keep_keys = true;
  rc::EpisodeWriter writer(server.unix_address(), kTable, options);
  REQUIRE(writer.fields().size() == 3);
  CHECK(writer.fields()[0].stack == kStack);
  CHECK(writer.fields()[0].next_of);
  CHECK(writer.fields()[0].compression == rc::Compression::zstd);
  CHECK(writer.fields()[0].compression_level == 5);
  CHECK_FALSE(writer.fields()[1].is_frame());
  CHECK_FALSE(writer.staged());  // frame fields go through the socket
  const Reference ref = write_episodes(writer, 40, 11);
  // A value that is not one zstd frame of the field's size is refused, nothing buffered.
  const auto small = std::vector<std::byte>(10, std::byte{1});
  const std::int32_t act = 0;
  const float rew = 0;
  CHECK(error_code_of([&] {
          writer.append(0, {rc::compressed_step_value("obs", rc::DType::uint8, small),
                            rc::step_value("act", act), rc::step_value("rew", rew)});
        }) == rc::ErrorCode::invalid_argument);
  CHECK(writer.buffered() == 0);

  SECTION("n-step, k = 1: both stacks are strided views over one array") {
    const rc::SampleBatch batch = client.sample_nstep(kTable, 64, nstep(1));
    check_nstep(ref, batch, 1);
    const rc::NStepFrames obs = batch.frames("obs");
    CHECK(obs.frame_count() == 64 * (kStack + 1));
    const auto stacks = obs.stacks();
    const auto next = obs.next_stacks();
    REQUIRE(stacks);
    REQUIRE(next);
    CHECK(stacks->dim(0) == 64);
    CHECK(stacks->dim(1) == kStack);
    for (std::size_t i = 0; i < batch.size(); ++i) {
      CHECK((*stacks)[i].data() == obs.stack(i).data());
      CHECK((*next)[i].data() == obs.next_stack(i).data());
      CHECK(obs.next_stack(i).data() == obs.stack(i).data() + kObsBytes);  // shifted by one
    }
  }
  SECTION("n-step, k = 3: the next stack is that of step t + h") {
    const rc::SampleBatch batch = client.sample_nstep(kTable, 64, nstep(3));
    check_nstep(ref, batch, 3);
  }
  SECTION("n-step with raw: the server decompresses, the stacks are the same") {
    const rc::SampleBatch batch = client.sample_nstep(kTable, 32, nstep(2, /*raw=*/true));
    CHECK_FALSE(batch.frame_field(0).zstd);
    check_nstep(ref, batch, 2);
  }
  SECTION("sequences: row j's stack is frames j .. j + stack - 1 of its sequence") {
    constexpr std::uint64_t kLength = 3;
    for (const bool raw : {false, true}) {
      rc::SequenceOptions options;
      options.pad = true;
      options.raw = raw;
      const rc::SequenceBatch batch = client.sample_sequences(kTable, 24, kLength, options);
      REQUIRE(batch.frame_field_count() == 1);
      CHECK(batch.frame_field(0).zstd == !raw);
      const rc::SequenceFrames obs = batch.frames("obs");
      CHECK(obs.frame_count() == 24 * (kLength + kStack - 1));
      const rc::FrameView stacks = obs.stacks();
      REQUIRE(stacks.rank() == 3);
      CHECK(stacks.dim(1) == kLength);
      for (std::size_t i = 0; i < batch.size(); ++i) {
        const auto [episode_id, position] = ref.steps.at(batch.keys()[i]);
        const RefEpisode& episode = ref.episodes.at(episode_id);
        INFO("sequence " << i << ": episode " << episode_id << " position " << position);
        for (std::uint64_t j = 0; j < kLength; ++j) {
          check_stack(obs.stack(i, j), ref.stack(episode, static_cast<std::int64_t>(position + j)));
        }
      }
    }
  }
}

TEST_CASE("a frame corrupted past its header fails the reader's sample, naming table and key",
          "[frames]") {
  ServerProcess server;
  rc::Client client(server.unix_address());
  client.create_table(pixels_table());
  const std::uint64_t episode = client.open_episodes(kTable, 1).at(0);

  // Two steps, the first with a frame whose byte before the checksum is flipped: its
  // headers are intact, so the server stores it.
  rc::ZstdCompressor compressor;
  const auto obs = image(1);
  std::vector<std::byte> frame;
  const std::uint32_t size = compressor.compress(std::as_bytes(std::span(obs)), 3, frame);
  REQUIRE(size > 8);
  frame[size - 5] ^= std::byte{0x5a};
  const auto good = image(2);
  const std::uint32_t good_size = compressor.compress(std::as_bytes(std::span(good)), 3, frame);
  const std::vector<std::uint32_t> sizes{size, good_size};
  const std::vector<std::int32_t> act{1, 2};
  const std::vector<float> rew{0.5F, 0.5F};
  const std::vector<std::uint64_t> shape{6, 5};
  rc::InsertBatch batch(2);
  batch.add_compressed("obs", rc::DType::uint8, shape, sizes, frame);
  batch.add("act", act);
  batch.add("rew", rew);
  const std::vector<std::uint64_t> ids{episode, episode};
  const rc::Keys keys = client.append_steps(kTable, batch, ids);
  REQUIRE(keys.size() == 2);
  client.end_episode(kTable, episode);  // the second step stands in as the final one

  const std::string key = std::to_string(keys[0]);
  try {
    (void)client.sample_nstep(kTable, 1, nstep(1));
    FAIL("a corrupt frame was decoded");
  } catch (const rc::Error& error) {
    CHECK(error.code() == rc::ErrorCode::data_loss);
    CHECK_THAT(error.message(), Catch::Contains("table 'pixels'") &&
                                    Catch::Contains("field 'obs'") &&
                                    Catch::Contains("key " + key));
  }
  try {
    (void)client.sample_nstep(kTable, 1, nstep(1, /*raw=*/true));
    FAIL("a corrupt frame was decompressed by the server");
  } catch (const rc::Error& error) {
    CHECK(error.code() == rc::ErrorCode::invalid_argument);
    CHECK_THAT(error.message(), Catch::Contains("table 'pixels'") && Catch::Contains("key " + key));
  }
  // The connection and the server go on.
  client.ping();
}

}  // namespace
}  // namespace replayd::testing
