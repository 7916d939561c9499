#include "replayd_client/sharded/union_sample.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <optional>
#include <utility>

#include "replayd_client/sharded/shard_keys.h"
#include "replayd_client/wire/wire_frame_codec.h"

namespace replayd::client {
namespace {

bool same_item_shape(const ColumnSpec& a, const ColumnSpec& b) {
  return a.name == b.name && a.dtype == b.dtype &&
         std::equal(a.shape.begin() + 1, a.shape.end(), b.shape.begin() + 1, b.shape.end());
}

// One part as the combination reads it: its layout, each column's bytes and its state
// (Columns: a SampleBatch or a ColumnSet, anything with column(index).bytes()).
struct PartView {
  std::size_t shard = 0;
  const SampleLayout* layout = nullptr;
  std::vector<std::span<const std::byte>> columns;
  std::optional<TableState> state;
};

template <typename Columns>
PartView view_of(std::size_t shard, const Columns& columns, const SampleLayout* layout,
                 const std::optional<TableState>& state) {
  PartView view{shard, layout, {}, state};
  for (std::size_t c = 0; c < layout->columns.size(); ++c)
    view.columns.push_back(columns.column(c).bytes());
  return view;
}

// The layout of the union: the first part's columns with n rows in all, offsets as the
// protocol lays them out. Checks every part has the same columns.
std::shared_ptr<SampleLayout> union_layout(std::span<const PartView> parts, std::uint64_t n) {
  const SampleLayout& first = *parts.front().layout;
  for (const auto& part : parts) {
    const SampleLayout& other = *part.layout;
    bool same = other.columns.size() == first.columns.size();
    for (std::size_t c = 0; same && c < first.columns.size(); ++c) {
      same = same_item_shape(first.columns[c], other.columns[c]);
    }
    if (!same) {
      throw Error(ErrorCode::invalid_argument, "shards " + std::to_string(parts.front().shard) +
                                                   " and " + std::to_string(part.shard) +
                                                   " hold the table with different fields");
    }
  }
  return layout_with_rows(first, n);
}

// The smallest probability a draw on one shard gives any of its items.
double smallest_local_probability(const TableState& state) {
  return state.mass > 0 ? state.min_mass / state.mass : 1.0 / static_cast<double>(state.size);
}

}  // namespace

std::vector<double> draw_shares(std::span<const TableState> shards) {
  std::vector<double> weights(shards.size());
  auto normalised = [&weights]() {
    const double total = std::accumulate(weights.begin(), weights.end(), 0.0);
    if (!(total > 0)) return false;
    for (double& weight : weights)
      weight /= total;
    return true;
  };
  for (std::size_t s = 0; s < shards.size(); ++s)
    weights[s] = shards[s].size ? shards[s].mass : 0;
  if (normalised()) return weights;
  for (std::size_t s = 0; s < shards.size(); ++s)
    weights[s] = static_cast<double>(shards[s].size);
  if (normalised()) return weights;
  std::fill(weights.begin(), weights.end(), 1.0);
  normalised();
  return weights;
}

std::vector<std::uint64_t> split_draws(std::uint64_t n, std::span<const double> shares,
                                       std::mt19937_64& random) {
  // Sequential binomials: shard s gets Binomial(draws left, share_s / share left).
  std::vector<std::uint64_t> counts(shares.size(), 0);
  double share_left = 1.0;
  std::uint64_t left = n;
  for (std::size_t s = 0; s < shares.size() && left > 0; ++s) {
    if (s + 1 == shares.size() || share_left <= 0) {
      counts[s] = left;
      break;
    }
    const double p = std::clamp(shares[s] / share_left, 0.0, 1.0);
    counts[s] = std::binomial_distribution<std::uint64_t>(left, p)(random);
    left -= counts[s];
    share_left -= shares[s];
  }
  return counts;
}

namespace {

// The union of the parts (see combine_shard_samples): its layout and payload.
std::pair<std::shared_ptr<SampleLayout>, Buffer> combine(std::span<const PartView> parts,
                                                         std::span<const double> shares,
                                                         std::span<const TableState> known,
                                                         double beta) {
  std::uint64_t n = 0;
  for (const auto& part : parts)
    n += part.layout->n;
  auto layout = union_layout(parts, n);
  Buffer payload(layout->payload_bytes);
  std::memset(payload.data(), 0, payload.size());  // padding goes out as zeros

  // Per-draw columns: global keys, union probabilities, times_sampled as drawn.
  auto* keys = reinterpret_cast<std::uint64_t*>(payload.data() + layout->columns[0].offset);
  auto* probabilities = reinterpret_cast<double*>(payload.data() + layout->columns[1].offset);
  auto* weights = reinterpret_cast<double*>(payload.data() + layout->columns[2].offset);
  std::uint64_t row = 0;
  for (const auto& part : parts) {
    const auto* local_keys = reinterpret_cast<const std::uint64_t*>(part.columns[0].data());
    const auto* local_probabilities = reinterpret_cast<const double*>(part.columns[1].data());
    for (std::size_t i = 0; i < part.layout->n; ++i, ++row) {
      keys[row] = global_key(part.shard, local_keys[i]);
      probabilities[row] = shares[part.shard] * local_probabilities[i];
    }
  }
  // Every other column (times_sampled, mask, the fields...) is the parts' bytes in order.
  for (std::size_t c = 3; c < layout->columns.size(); ++c) {
    std::byte* out = payload.data() + layout->columns[c].offset;
    for (const auto& part : parts) {
      const auto bytes = part.columns[c];
      if (!bytes.empty()) std::memcpy(out, bytes.data(), bytes.size());
      out += bytes.size();
    }
  }

  // The smallest probability any stored item had over the union, per shard as its own
  // draw saw it (shards that served no draw: as last known).
  std::vector<TableState> states(known.begin(), known.end());
  for (const auto& part : parts) {
    if (part.state) states[part.shard] = *part.state;
  }
  double smallest = std::numeric_limits<double>::infinity();
  for (std::size_t s = 0; s < states.size(); ++s) {
    if (shares[s] > 0 && states[s].size > 0) {
      smallest = std::min(smallest, shares[s] * smallest_local_probability(states[s]));
    }
  }
  const bool weighted = beta > 0 && std::isfinite(smallest) && smallest > 0;
  for (std::uint64_t i = 0; i < n; ++i) {
    weights[i] = weighted ? std::pow(probabilities[i] / smallest, -beta) : 1.0;
  }
  return {std::move(layout), std::move(payload)};
}

// Frame fields are not combined across shards yet: refused rather than dropped.
[[noreturn]] void frames_not_combined() {
  throw Error(ErrorCode::invalid_argument,
              "sharded samples of tables with frame fields (stack, next_of, compression) are "
              "not supported; sample each shard's table with a Client");
}

}  // namespace

SampleBatch combine_shard_samples(std::span<const ShardSample> parts,
                                  std::span<const double> shares, std::span<const TableState> known,
                                  double beta) {
  if (parts.empty()) return {};
  std::vector<PartView> views;
  for (const auto& part : parts) {
    if (part.sample.frame_field_count() > 0) frames_not_combined();
    views.push_back(view_of(part.shard, part.sample, part.sample.layout(), part.sample.state()));
  }
  auto [layout, payload] = combine(views, shares, known, beta);
  return SampleBatch(std::move(layout), std::move(payload));
}

SequenceBatch combine_shard_sequences(std::span<const ShardSequences> parts,
                                      std::span<const double> shares,
                                      std::span<const TableState> known, double beta) {
  if (parts.empty()) return {};
  std::vector<PartView> views;
  for (const auto& part : parts) {
    if (part.sequences.frame_field_count() > 0) frames_not_combined();
    const ColumnSet& columns = part.sequences.columns();
    views.push_back(view_of(part.shard, columns, columns.layout().get(), part.sequences.state()));
  }
  auto [layout, payload] = combine(views, shares, known, beta);
  const SequenceBatch& first = parts.front().sequences;
  return SequenceBatch(ColumnSet(std::move(layout), std::move(payload)), first.length(),
                       first.burn_in());
}

}  // namespace replayd::client
