#include "replayd_client/shm/plane_sampler.h"

#include <chrono>
#include <cstring>
#include <utility>

#include "replayd_client/wire/buffer.h"
#include "replayd_client/wire/wire_frame_codec.h"

namespace replayd::client {
namespace {

constexpr std::size_t kDrawColumns = 4;  // key, probability, weight, times_sampled

}  // namespace

PlaneSampler::PlaneSampler(Client& client, std::string table)
    : client_(client), table_(std::move(table)), mapping_(client_.map_table(table_)) {
  redrawn_rows_.resize(mapping_->columns().size());
}

void PlaneSampler::check_region(const DrawnKeys& drawn) const {
  if (drawn.region != mapping_->region()) {
    throw Error(ErrorCode::not_found, "table '" + table_ +
                                          "' was dropped or replaced since it was mapped: "
                                          "make a new PlaneSampler");
  }
}

std::shared_ptr<const SampleLayout> PlaneSampler::layout_of(const SampleBatch& draws) {
  const std::uint64_t n = draws.size();
  if (layout_ && layout_->n == n) return layout_;
  const SampleLayout* drawn = draws.layout();
  if (drawn == nullptr || drawn->columns.size() < kDrawColumns) {
    throw Error(ErrorCode::bad_reply, "a keys-only sample reply without its draw columns");
  }
  auto layout = std::make_shared<SampleLayout>();
  layout->n = n;
  std::uint64_t offset = 0;
  const auto add = [&](ColumnSpec column, std::uint64_t item_bytes) {
    column.offset = offset;
    column.bytes = n * item_bytes;
    offset += column.bytes + padding_after(column.bytes);
    layout->columns.push_back(std::move(column));
  };
  for (std::size_t c = 0; c < kDrawColumns; ++c)
    add(drawn->columns[c], dtype_bytes(drawn->columns[c].dtype));
  for (const TableMapping::Column& column : mapping_->columns()) {
    ColumnSpec spec{column.name, column.dtype, {n}, 0, 0};
    spec.shape.insert(spec.shape.end(), column.shape.begin(), column.shape.end());
    add(std::move(spec), column.item_bytes);
  }
  layout->payload_bytes = offset;
  layout_ = std::move(layout);
  return layout_;
}

SampleBatch PlaneSampler::complete(DrawnKeys drawn, SampleOptions options) {
  check_region(drawn);
  const SampleBatch& draws = drawn.draws;
  std::shared_ptr<const SampleLayout> layout = layout_of(draws);
  Buffer payload(layout->payload_bytes);
  std::vector<std::byte*> rows;  // each field's destination
  for (std::size_t c = 0; c < layout->columns.size(); ++c) {
    std::byte* at = payload.data() + layout->columns[c].offset;
    if (c < kDrawColumns) {
      const std::span<const std::byte> source = draws.column(c).bytes();
      std::memcpy(at, source.data(), source.size());
    } else {
      rows.push_back(at);
    }
  }
  std::vector<std::size_t> changed = mapping_->gather(draws.keys(), rows);
  // Redraws end by the call's timeout, or after kMaxRedrawRounds rounds without one: rows
  // that never settle (stamps a process of the server's uid keeps changing) are an error,
  // never an endless loop.
  const auto started = std::chrono::steady_clock::now();
  std::uint64_t rounds = 0;
  while (!changed.empty()) {  // rows overwritten under the copy: as many drawn again
    const auto waited = std::chrono::steady_clock::now() - started;
    if (options.timeout_ms ? waited >= std::chrono::milliseconds(*options.timeout_ms)
                           : rounds >= kMaxRedrawRounds) {
      throw Error(options.timeout_ms ? ErrorCode::timeout : ErrorCode::resource_exhausted,
                  "table '" + table_ + "': " + std::to_string(changed.size()) +
                      " drawn rows kept changing under the copy for " + std::to_string(rounds) +
                      " redraws: their slots' stamps never settle (a writer rewrites them "
                      "without end, or a process of the server's uid writes the mapping); "
                      "sample through the socket (shared_memory = false) to rule it out");
    }
    ++rounds;
    changed_rows_ += changed.size();
    DrawnKeys again = client_.sample_keys_async(table_, changed.size(), options).get();
    check_region(again);
    std::vector<std::byte*> redrawn;
    for (std::size_t f = 0; f < rows.size(); ++f) {
      redrawn_rows_[f].resize(changed.size() * mapping_->columns()[f].item_bytes);
      redrawn.push_back(redrawn_rows_[f].data());
    }
    const std::vector<std::size_t> changed_again = mapping_->gather(again.draws.keys(), redrawn);
    // Each changed position takes the new draw's row and its key and statistics.
    for (std::size_t c = 0; c < layout->columns.size(); ++c) {
      const bool field = c >= kDrawColumns;
      const std::uint64_t bytes = field ? mapping_->columns()[c - kDrawColumns].item_bytes
                                        : dtype_bytes(layout->columns[c].dtype);
      const std::byte* source =
          field ? redrawn[c - kDrawColumns] : again.draws.column(c).bytes().data();
      std::byte* target = payload.data() + layout->columns[c].offset;
      for (std::size_t i = 0; i < changed.size(); ++i)
        std::memcpy(target + changed[i] * bytes, source + i * bytes, bytes);
    }
    std::vector<std::size_t> left;
    for (const std::size_t i : changed_again)
      left.push_back(changed[i]);
    changed = std::move(left);
  }
  return SampleBatch(std::move(layout), std::move(payload), draws.state());
}

}  // namespace replayd::client
