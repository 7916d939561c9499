// Tests for frame fields in core (docs/PIXELS.md): the zstd frame check against libzstd's
// own frames and reading of them, the compressed values' byte budget (eviction before an
// append would exceed it, a batch that cannot fit refused with the table unchanged, the
// table's bytes never above what table_bytes reserved) and final observations. Stacks and
// next_obs themselves are checked against a reference model in
// tests/python/test_pixels_model.py.
#include <zstd.h>
#include <catch2/catch.hpp>

#include <cstring>
#include <random>
#include <vector>

#include "core/storage/zstd_value.h"
#include "core/table/episodic_table.h"

namespace replayd {
namespace {

using Catch::Matchers::Contains;
using Bytes = std::vector<std::byte>;

Bytes compress(const Bytes& content, int level, bool checksum) {
  ZSTD_CCtx* context = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(context, ZSTD_c_compressionLevel, level);
  ZSTD_CCtx_setParameter(context, ZSTD_c_checksumFlag, checksum ? 1 : 0);
  Bytes out(ZSTD_compressBound(content.size()));
  const std::size_t n =
      ZSTD_compress2(context, out.data(), out.size(), content.data(), content.size());
  ZSTD_freeCCtx(context);
  REQUIRE_FALSE(ZSTD_isError(n));
  out.resize(n);
  return out;
}

Bytes game_like(std::size_t bytes, std::mt19937& rng) {
  Bytes content(bytes, std::byte{0});
  for (std::size_t i = 0; i < bytes; i += 1 + rng() % 64)
    content[i] = static_cast<std::byte>(rng() % 4 * 60);
  return content;
}

TEST_CASE("zstd frames made by libzstd pass the check, with their exact size", "[frames]") {
  std::mt19937 rng(1);
  for (std::size_t bytes : {1u, 100u, 7056u, 300000u}) {  // 300000: several blocks
    for (int level : {1, 3, 19}) {
      for (bool checksum : {false, true}) {
        const Bytes content = game_like(bytes, rng);
        const Bytes frame = compress(content, level, checksum);
        INFO("bytes " << bytes << " level " << level << " checksum " << checksum);
        CHECK(check_zstd_frame(frame, bytes).ok());
        CHECK(ZSTD_findFrameCompressedSize(frame.data(), frame.size()) == frame.size());
        const auto wrong = check_zstd_frame(frame, bytes + 1);
        REQUIRE_FALSE(wrong.ok());
        CHECK_THAT(wrong.error().message, Contains("declares " + std::to_string(bytes)));
      }
    }
  }
}

TEST_CASE("incompressible content stays within max_zstd_frame_bytes", "[frames]") {
  std::mt19937 rng(2);
  for (std::size_t bytes : {1u, 64u, 7056u, 131072u, 500000u}) {
    Bytes content(bytes);
    for (auto& b : content)
      b = static_cast<std::byte>(rng());
    const Bytes frame = compress(content, 3, true);
    CHECK(frame.size() <= max_zstd_frame_bytes(bytes));
    CHECK(check_zstd_frame(frame, bytes).ok());
  }
}

TEST_CASE("every cut and every header byte flip of a frame is judged as libzstd judges it",
          "[frames]") {
  std::mt19937 rng(3);
  const Bytes content = game_like(7056, rng);
  const Bytes frame = compress(content, 3, true);
  for (std::size_t cut = 0; cut < frame.size(); ++cut) {
    CHECK_FALSE(check_zstd_frame(std::span(frame).first(cut), content.size()).ok());
  }
  // Flipped bits in the header and block headers: accepted only if libzstd would find a
  // frame of exactly these bytes declaring the same content size.
  for (std::size_t at = 0; at < 12 && at < frame.size(); ++at) {
    for (int bit = 0; bit < 8; ++bit) {
      Bytes spoiled = frame;
      spoiled[at] ^= static_cast<std::byte>(1 << bit);
      const bool ours = check_zstd_frame(spoiled, content.size()).ok();
      const bool theirs =
          ZSTD_findFrameCompressedSize(spoiled.data(), spoiled.size()) == spoiled.size() &&
          ZSTD_getFrameContentSize(spoiled.data(), spoiled.size()) == content.size() &&
          ZSTD_getDictID_fromFrame(spoiled.data(), spoiled.size()) == 0;
      INFO("byte " << at << " bit " << bit);
      CHECK((!ours || theirs));
    }
  }
}

// ---- An episodic table whose obs (u8[64]) is next_of and compressed.

constexpr std::size_t kObsBytes = 64;

TableConfig pixel_config(std::uint32_t capacity, std::uint64_t budget) {
  TableConfig config;
  config.name = std::string("pixels");
  Field obs{"obs", DType::uint8, {kObsBytes}};
  obs.next_of = true;
  obs.compression = Compression::zstd;
  auto schema = Schema::create({obs, Field{"rew", DType::float32, {}}});
  REQUIRE(schema.ok());
  config.schema = schema.value();
  config.capacity = capacity;
  config.episodes.enabled = true;
  config.episodes.bootstrap_fields = {};
  config.max_compressed_bytes = budget;
  config.seed = 3;
  return config;
}

std::unique_ptr<Table> make(const TableConfig& config) {
  auto table = Table::create(config);
  INFO((table.ok() ? std::string() : table.error().message));
  REQUIRE(table.ok());
  return std::move(table).value();
}

// Appends one step per frame to `episode` of writer 1.
Status append(Table& table, std::uint64_t episode, const std::vector<Bytes>& frames) {
  Bytes joined;
  std::vector<std::uint32_t> sizes;
  for (const auto& frame : frames) {
    joined.insert(joined.end(), frame.begin(), frame.end());
    sizes.push_back(static_cast<std::uint32_t>(frame.size()));
  }
  const std::vector<float> rew(frames.size(), 1.0f);
  const std::vector<std::uint64_t> episodes(frames.size(), episode);
  std::vector<std::uint64_t> keys(frames.size());
  const std::vector<std::span<const std::byte>> columns{joined, std::as_bytes(std::span(rew))};
  const std::vector<std::span<const std::uint32_t>> frame_sizes{sizes, {}};
  return table.episodic()->append_steps(1, episodes, columns, frames.size(), {}, keys, frame_sizes);
}

Bytes obs_frame(std::uint8_t value) {
  return compress(Bytes(kObsBytes, static_cast<std::byte>(value)), 3, true);
}

TEST_CASE("appends evict steps before the compressed values would exceed their budget",
          "[frames]") {
  const std::uint64_t cost = BlobColumn::cost(obs_frame(1).size());
  auto table = make(pixel_config(1000, 10 * cost));  // room for 10 values, not 1000
  const std::uint64_t episode = table->episodic()->open_episode(1).value();
  for (int i = 0; i < 25; ++i) {
    REQUIRE(append(*table, episode, {obs_frame(static_cast<std::uint8_t>(i))}).ok());
    CHECK(table->storage().blob_bytes() <= 10 * cost);
  }
  CHECK(table->size() == 10);
  CHECK(table->info().counters.evictions == 15);
  CHECK(table->allocated_bytes() <=
        static_cast<std::uint64_t>(table_bytes(table->config()).total()));
}

TEST_CASE("a batch whose values exceed the budget, or with a bad frame, stores nothing",
          "[frames]") {
  const std::uint64_t cost = BlobColumn::cost(obs_frame(1).size());
  auto table = make(pixel_config(100, 3 * cost));
  const std::uint64_t episode = table->episodic()->open_episode(1).value();
  REQUIRE(append(*table, episode, {obs_frame(1)}).ok());
  const auto too_many =
      append(*table, episode, {obs_frame(2), obs_frame(3), obs_frame(4), obs_frame(5)});
  REQUIRE_FALSE(too_many.ok());
  CHECK_THAT(too_many.error().message, Contains("max_compressed_bytes"));
  Bytes bad = obs_frame(6);
  bad[0] = std::byte{0};
  const auto spoiled = append(*table, episode, {obs_frame(7), bad});
  REQUIRE_FALSE(spoiled.ok());
  CHECK_THAT(spoiled.error().message, Contains("field 'obs', row 1: not a zstd frame"));
  CHECK(table->size() == 1);
  CHECK(table->info().counters.inserts == 1);
}

TEST_CASE("a final observation is one more step; wrong ones change nothing", "[frames]") {
  auto table = make(pixel_config(100, 0));
  const std::uint64_t episode = table->episodic()->open_episode(1).value();
  REQUIRE(append(*table, episode, {obs_frame(1), obs_frame(2)}).ok());
  const Bytes final_frame = obs_frame(3);
  const std::vector<std::span<const std::byte>> wrong_field{final_frame, final_frame};
  CHECK_THAT(table->episodic()
                 ->end_episode(1, episode, EpisodeEnd::terminated, wrong_field)
                 .error()
                 .message,
             Contains("'rew' is not next_of"));
  Bytes short_frame = final_frame;
  short_frame.pop_back();
  const std::vector<std::span<const std::byte>> cut{short_frame, {}};
  CHECK_FALSE(table->episodic()->end_episode(1, episode, EpisodeEnd::terminated, cut).ok());
  CHECK(table->size() == 2);
  CHECK_FALSE(table->episodic()->episodes().find(episode)->ended());

  const std::vector<std::span<const std::byte>> good{final_frame, {}};
  REQUIRE(table->episodic()->end_episode(1, episode, EpisodeEnd::terminated, good).ok());
  CHECK(table->size() == 3);
  CHECK(table->episodic()->episodes().find(episode)->length == 3);
  // Two transitions: steps 0 and 1; the final observation is no start.
  CHECK(table->episodic()->nstep_starts(NStepRequest{1, 1.0, 0.0}).value() == 2);
}

TEST_CASE("frame options need an episodic table, and the reward field is no frame field",
          "[frames]") {
  TableConfig config = pixel_config(10, 0);
  config.episodes.enabled = false;
  CHECK_THAT(validate_table_config(config, UINT64_MAX).error().message,
             Contains("need an episodic table"));
  config = pixel_config(10, 0);
  config.episodes.reward_field = "obs";
  CHECK_THAT(validate_table_config(config, UINT64_MAX).error().message, Contains("no frame field"));
}

}  // namespace
}  // namespace replayd
