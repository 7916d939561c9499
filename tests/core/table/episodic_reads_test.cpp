// Tests for core/table/episodic_reads.cpp (the whole-step reads of an episodic table):
// drawing complete episodes, sizing and reading them with their offsets and position holes,
// reading everything page by page, and the errors each documents (sizes, unknown episodes,
// nothing to draw, the rate limiter), including compressed fields read by slot.
#include <zstd.h>
#include <catch2/catch.hpp>

#include <cstring>
#include <set>
#include <vector>

#include "core/table/episodic_table.h"
#include "tests/core/episode_fixtures.h"

namespace replayd {
namespace {

using Catch::Contains;
using testing::append;
using testing::episodic_config;
using testing::make_table;
using testing::StepRowsOut;

// Appends one step `id` to `episode` of writer 1; returns its key.
std::uint64_t step(Table& table, std::uint64_t episode, std::int64_t id) {
  std::vector<std::uint64_t> keys;
  const Status status = append(table, 1, {episode}, {id}, {1.0f}, keys);
  INFO((status.ok() ? std::string() : status.error().message));
  REQUIRE(status.ok());
  return keys[0];
}

// An episode of writer 1 with steps `ids`, ended (terminated) unless `open`.
std::uint64_t episode_of(Table& table, const std::vector<std::int64_t>& ids, bool open = false) {
  const auto episode = table.episodic()->open_episode(1).value();
  for (auto id : ids)
    step(table, episode, id);
  if (!open) REQUIRE(table.episodic()->end_episode(1, episode, EpisodeEnd::terminated).ok());
  return episode;
}

TEST_CASE("drawing whole episodes draws only complete ones, each with probability 1/complete") {
  auto table = make_table(episodic_config(64));
  const auto a = episode_of(*table, {1, 2, 3});
  const auto b = episode_of(*table, {4, 5});
  episode_of(*table, {6, 7}, /*open=*/true);  // never drawn while open
  std::vector<std::uint64_t> ids(200);
  std::vector<double> probabilities(200);
  REQUIRE(table->episodic()->sample_episodes(200, ids, probabilities).ok());
  std::set<std::uint64_t> drawn(ids.begin(), ids.end());
  CHECK(drawn == std::set<std::uint64_t>{a, b});
  for (double p : probabilities)
    CHECK(p == 0.5);
}

TEST_CASE("an episode with a deleted step is no longer drawn whole") {
  auto table = make_table(episodic_config(64));
  const auto whole = episode_of(*table, {1, 2});
  const auto episode = table->episodic()->open_episode(1).value();
  step(*table, episode, 3);
  const std::uint64_t doomed = step(*table, episode, 4);
  REQUIRE(table->episodic()->end_episode(1, episode, EpisodeEnd::truncated).ok());
  REQUIRE(table->delete_keys(std::span(&doomed, 1)).deleted == 1);
  std::vector<std::uint64_t> ids(50);
  std::vector<double> probabilities(50);
  REQUIRE(table->episodic()->sample_episodes(50, ids, probabilities).ok());
  CHECK(std::set<std::uint64_t>(ids.begin(), ids.end()) == std::set<std::uint64_t>{whole});
  CHECK(probabilities[0] == 1.0);
}

TEST_CASE("drawing whole episodes needs n >= 1 and outputs of n values") {
  auto table = make_table(episodic_config(16));
  episode_of(*table, {1});
  std::vector<std::uint64_t> ids(2);
  std::vector<double> probabilities(2);
  for (auto [n, id_count, p_count] :
       {std::tuple{0, 0, 0}, std::tuple{2, 1, 2}, std::tuple{2, 2, 3}}) {
    CAPTURE(n, id_count, p_count);
    ids.resize(id_count);
    probabilities.resize(p_count);
    const auto status = table->episodic()->sample_episodes(n, ids, probabilities);
    REQUIRE_FALSE(status);
    CHECK(status.error().code == ErrorCode::invalid_argument);
    CHECK_THAT(status.error().message,
               Contains("table 'episodes'") && Contains("needs n >= 1 and outputs of n values"));
  }
}

TEST_CASE("drawing whole episodes would block with no complete episode") {
  auto table = make_table(episodic_config(16));
  std::vector<std::uint64_t> ids(1);
  std::vector<double> probabilities(1);
  auto empty = table->episodic()->sample_episodes(1, ids, probabilities);
  REQUIRE_FALSE(empty);
  CHECK(empty.error().code == ErrorCode::would_block);
  CHECK_THAT(empty.error().message, Contains("no complete episode"));
  episode_of(*table, {1, 2}, /*open=*/true);
  CHECK(table->episodic()->sample_episodes(1, ids, probabilities).error().code ==
        ErrorCode::would_block);
}

TEST_CASE("whole-episode draws are counted by the rate limiter as n samples") {
  TableConfig config = episodic_config(64);
  config.rate_limiter = RateLimiterConfig::sample_to_insert_ratio(1.0, 1, 2.0);
  auto table = make_table(config);
  episode_of(*table, {1, 2, 3});  // three inserts
  const auto samples_before = table->info().counters.samples;
  std::vector<std::uint64_t> ids(3);
  std::vector<double> probabilities(3);
  REQUIRE(table->episodic()->sample_episodes(3, ids, probabilities).ok());
  CHECK(table->info().counters.samples == samples_before + 3);
  // Three inserts allow about three samples (spi 1, error buffer 2): a fourth batch of 3 waits.
  auto held = table->episodic()->sample_episodes(3, ids, probabilities);
  REQUIRE_FALSE(held);
  CHECK(held.error().code == ErrorCode::would_block);
  // A batch larger than the limiter can ever admit is malformed, not a wait.
  std::vector<std::uint64_t> many_ids(100);
  std::vector<double> many_probabilities(100);
  auto never = table->episodic()->sample_episodes(100, many_ids, many_probabilities);
  REQUIRE_FALSE(never);
  CHECK(never.error().code == ErrorCode::invalid_argument);
  CHECK_THAT(never.error().message, Contains("table 'episodes'") && Contains("100 items"));
}

TEST_CASE("drawing whole episodes leaves the steps' times sampled unchanged") {
  auto table = make_table(episodic_config(16));
  episode_of(*table, {1, 2});
  std::vector<std::uint64_t> ids(4);
  std::vector<double> probabilities(4);
  REQUIRE(table->episodic()->sample_episodes(4, ids, probabilities).ok());
  for (std::uint32_t slot = 0; slot < 16; ++slot)
    if (table->storage().occupied(slot)) CHECK(table->storage().times_sampled(slot) == 0);
}

TEST_CASE("episode_steps sums the stored steps and names an unknown episode") {
  auto table = make_table(episodic_config(16));
  const auto a = episode_of(*table, {1, 2, 3});
  const auto b = episode_of(*table, {4}, /*open=*/true);
  CHECK(table->episodic()->episode_steps(std::vector<std::uint64_t>{a, b}).value() == 4);
  CHECK(table->episodic()->episode_steps(std::vector<std::uint64_t>{a, a}).value() == 6);
  CHECK(table->episodic()->episode_steps(std::vector<std::uint64_t>{}).value() == 0);
  auto missing = table->episodic()->episode_steps(std::vector<std::uint64_t>{a, 12345});
  REQUIRE_FALSE(missing);
  CHECK(missing.error().code == ErrorCode::not_found);
  CHECK_THAT(missing.error().message, Contains("episode 12345 has no stored step"));
}

TEST_CASE("read_episodes concatenates episodes in position order with their offsets") {
  auto table = make_table(episodic_config(16));
  const auto a = episode_of(*table, {10, 11, 12});
  const auto b = episode_of(*table, {20, 21}, /*open=*/true);  // open episodes can be read too
  const std::vector<std::uint64_t> ids{b, a, b};
  const auto rows = table->episodic()->episode_steps(ids).value();
  REQUIRE(rows == 7);
  StepRowsOut out(rows);
  std::vector<std::uint64_t> offsets(4);
  REQUIRE(table->episodic()->read_episodes(ids, out.buffers(), offsets).ok());
  CHECK(offsets == std::vector<std::uint64_t>{0, 2, 5, 7});
  CHECK(out.id == std::vector<std::int64_t>{20, 21, 10, 11, 12, 20, 21});
  CHECK(out.positions == std::vector<std::uint32_t>{0, 1, 0, 1, 2, 0, 1});
  CHECK(out.episodes == std::vector<std::uint64_t>{b, b, a, a, a, b, b});
  CHECK(out.obs[3] == 11.0f);
  CHECK(out.next_obs[3] == 11.5f);
  std::set<std::uint64_t> keys(out.keys.begin(), out.keys.begin() + 5);
  CHECK(keys.size() == 5);
}

TEST_CASE("read_episodes shows the holes deletes left in an episode's positions") {
  auto table = make_table(episodic_config(16));
  const auto episode = table->episodic()->open_episode(1).value();
  step(*table, episode, 1);
  const std::uint64_t middle = step(*table, episode, 2);
  step(*table, episode, 3);
  REQUIRE(table->delete_keys(std::span(&middle, 1)).deleted == 1);
  const std::vector<std::uint64_t> ids{episode};
  REQUIRE(table->episodic()->episode_steps(ids).value() == 2);
  StepRowsOut out(2);
  std::vector<std::uint64_t> offsets(2);
  REQUIRE(table->episodic()->read_episodes(ids, out.buffers(), offsets).ok());
  CHECK(out.id == std::vector<std::int64_t>{1, 3});
  CHECK(out.positions == std::vector<std::uint32_t>{0, 2});
  CHECK(offsets == std::vector<std::uint64_t>{0, 2});
}

TEST_CASE("read_episodes of no episode writes only the final offset") {
  auto table = make_table(episodic_config(16));
  StepRowsOut out(0);
  std::vector<std::uint64_t> offsets{99};
  REQUIRE(table->episodic()->read_episodes({}, out.buffers(), offsets).ok());
  CHECK(offsets == std::vector<std::uint64_t>{0});
}

TEST_CASE("read_episodes refuses buffers or offsets of the wrong size and unknown episodes") {
  auto table = make_table(episodic_config(16));
  const auto a = episode_of(*table, {1, 2});
  const std::vector<std::uint64_t> ids{a};
  std::vector<std::uint64_t> offsets(2);

  StepRowsOut too_few(1);
  auto short_buffers = table->episodic()->read_episodes(ids, too_few.buffers(), offsets);
  REQUIRE_FALSE(short_buffers);
  CHECK(short_buffers.error().code == ErrorCode::invalid_argument);
  CHECK_THAT(short_buffers.error().message, Contains("do not hold 2 rows"));

  StepRowsOut ragged(2);
  ragged.columns[1] = ragged.columns[1].first(4);  // obs holds one row, not two
  CHECK_FALSE(table->episodic()->read_episodes(ids, ragged.buffers(), offsets));

  StepRowsOut right(2);
  std::vector<std::uint64_t> short_offsets(1);
  auto bad_offsets = table->episodic()->read_episodes(ids, right.buffers(), short_offsets);
  REQUIRE_FALSE(bad_offsets);
  CHECK_THAT(bad_offsets.error().message, Contains("offsets must hold one value per episode"));

  auto unknown = table->episodic()->read_episodes(std::vector<std::uint64_t>{a + 100},
                                                  right.buffers(), offsets);
  REQUIRE_FALSE(unknown);
  CHECK(unknown.error().code == ErrorCode::not_found);
}

TEST_CASE("reading everything needs room for a step and buffers of one size") {
  auto table = make_table(episodic_config(16));
  episode_of(*table, {1});
  StepRowsOut none(0);
  auto empty = table->episodic()->read_steps(0, none.buffers());
  REQUIRE_FALSE(empty);
  CHECK(empty.error().code == ErrorCode::invalid_argument);
  CHECK_THAT(empty.error().message, Contains("needs room for >= 1 step"));
  StepRowsOut ragged(3);
  ragged.positions.resize(2);
  auto mismatched = table->episodic()->read_steps(0, ragged.buffers());
  REQUIRE_FALSE(mismatched);
  CHECK_THAT(mismatched.error().message, Contains("do not hold 3 rows"));
}

TEST_CASE("reading everything of an empty table, or past the newest step, gives no rows") {
  auto table = make_table(episodic_config(16));
  StepRowsOut page(4);
  CHECK(table->episodic()->read_steps(0, page.buffers()).value() == 0);
  episode_of(*table, {1, 2});
  REQUIRE(table->episodic()->read_steps(0, page.buffers()).value() == 2);
  const auto newest = page.sequences[1];
  CHECK(table->episodic()->read_steps(newest, page.buffers()).value() == 0);
  CHECK(table->episodic()->read_steps(UINT64_MAX, page.buffers()).value() == 0);
}

TEST_CASE("reading everything in pages of any size gives every stored step once, in order") {
  auto table = make_table(episodic_config(8));
  std::vector<std::int64_t> ids;
  for (std::int64_t e = 0; e < 5; ++e) {
    std::vector<std::int64_t> steps;
    for (std::int64_t s = 0; s < 3; ++s)
      steps.push_back(10 * e + s);
    episode_of(*table, steps);
    ids.insert(ids.end(), steps.begin(), steps.end());
  }
  // capacity 8 of 15 steps: the 8 newest stay
  const std::vector<std::int64_t> stored(ids.end() - 8, ids.end());
  for (std::size_t page = 1; page <= 9; ++page) {
    CAPTURE(page);
    CHECK(testing::read_all_ids(*table, page) == stored);
  }
}

TEST_CASE("whole-step reads of a compressed field give each row's slot instead of its bytes") {
  TableConfig config = episodic_config(8);
  Field pixels{"pixels", DType::uint8, {16}};
  pixels.compression = Compression::zstd;
  config.schema =
      Schema::create({Field{"id", DType::int64, {}}, Field{"rew", DType::float32, {}}, pixels})
          .value();
  config.episodes.reward_field = "rew";
  config.episodes.bootstrap_fields = {};
  auto table = make_table(config);
  const auto episode = table->episodic()->open_episode(1).value();

  std::vector<std::int64_t> id{1, 2};
  std::vector<float> rew{0, 1};
  std::vector<std::byte> frames;
  std::vector<std::uint32_t> sizes;
  for (int row = 0; row < 2; ++row) {
    std::vector<std::byte> content(16, std::byte(row + 1));
    std::vector<std::byte> frame(ZSTD_compressBound(content.size()));
    const std::size_t n =
        ZSTD_compress(frame.data(), frame.size(), content.data(), content.size(), 3);
    REQUIRE_FALSE(ZSTD_isError(n));
    frames.insert(frames.end(), frame.begin(), frame.begin() + static_cast<std::ptrdiff_t>(n));
    sizes.push_back(static_cast<std::uint32_t>(n));
  }
  const std::span<const std::byte> columns[] = {std::as_bytes(std::span(id)),
                                                std::as_bytes(std::span(rew)), std::span(frames)};
  const std::span<const std::uint32_t> frame_sizes[] = {{}, {}, sizes};
  std::vector<std::uint64_t> episodes{episode, episode};
  std::vector<std::uint64_t> keys(2);
  const Status appended =
      table->episodic()->append_steps(1, episodes, columns, 2, {}, keys, frame_sizes);
  INFO((appended.ok() ? std::string() : appended.error().message));
  REQUIRE(appended.ok());

  std::vector<std::uint64_t> out_keys(2), out_episodes(2), sequences(2);
  std::vector<std::uint32_t> positions(2), slots(2);
  std::vector<std::int64_t> out_id(2);
  std::vector<float> out_rew(2);
  const std::vector<std::span<std::byte>> out_columns{
      std::as_writable_bytes(std::span(out_id)), std::as_writable_bytes(std::span(out_rew)), {}};
  StepBuffers without_slots{out_keys, out_episodes, positions, sequences, out_columns};
  auto refused = table->episodic()->read_steps(0, without_slots);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().code == ErrorCode::invalid_argument);

  StepBuffers with_slots{out_keys, out_episodes, positions, sequences, out_columns, slots};
  REQUIRE(table->episodic()->read_steps(0, with_slots).value() == 2);
  CHECK(out_id == std::vector<std::int64_t>{1, 2});
  const BlobColumn* blobs = table->storage().blobs(2);
  REQUIRE(blobs != nullptr);
  for (int row = 0; row < 2; ++row) {
    const auto stored = blobs->get(slots[row]);
    const std::span<const std::byte> sent =
        std::span<const std::byte>(frames).subspan(row == 0 ? 0 : sizes[0], sizes[row]);
    CHECK(std::equal(stored.begin(), stored.end(), sent.begin(), sent.end()));
  }

  std::vector<std::uint64_t> offsets(2);
  std::vector<std::uint32_t> episode_slots(2);
  StepBuffers episode_out{out_keys, out_episodes, positions, sequences, out_columns, episode_slots};
  REQUIRE(table->episodic()
              ->read_episodes(std::vector<std::uint64_t>{episode}, episode_out, offsets)
              .ok());
  CHECK(episode_slots == slots);
}

}  // namespace
}  // namespace replayd
