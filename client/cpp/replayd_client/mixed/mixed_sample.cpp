#include "replayd_client/mixed/mixed_sample.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <set>

#include "replayd_client/error.h"
#include "replayd_client/wire/wire_frame_codec.h"

namespace replayd::client {
namespace {

constexpr double kSumTolerance = 1e-6;

Error bad(const std::string& message) {
  return Error(ErrorCode::invalid_argument, "mixed batch: " + message);
}

template <typename Options, typename Send>
MixedBatch draw(Client& client, std::span<const TableShare> shares, std::uint64_t n,
                const Options& options, Send send) {
  const std::vector<std::uint64_t> counts = mixed_counts(shares, n);
  std::vector<std::future<SampleBatch>> pending(shares.size());
  for (std::size_t t = 0; t < shares.size(); ++t) {
    if (counts[t] > 0) pending[t] = send(client, shares[t].table, counts[t], options);
  }
  std::vector<std::string> tables;
  std::vector<SampleBatch> parts(shares.size());
  for (std::size_t t = 0; t < shares.size(); ++t) {
    tables.push_back(shares[t].table);
    // Every request is on the wire already: waiting on them in turn costs one round trip.
    if (pending[t].valid()) parts[t] = pending[t].get();
  }
  return MixedBatch(std::move(tables), std::move(parts));
}

// Rows [begin, begin + count) of `batch` as a batch of their own (each column's rows
// copied, laid out as a reply of count rows would be).
SampleBatch rows_of(const SampleBatch& batch, std::uint64_t begin, std::uint64_t count) {
  const SampleLayout& whole = *batch.layout();
  auto layout = layout_with_rows(whole, count);
  const std::uint64_t offset = layout->payload_bytes;
  Buffer payload(offset);
  if (offset) std::memset(payload.data(), 0, offset);  // padding zeroed
  for (std::size_t c = 0; c < whole.columns.size(); ++c) {
    const auto bytes = batch.column(c).bytes();
    const std::uint64_t row_bytes = whole.n ? whole.columns[c].bytes / whole.n : 0;
    if (row_bytes == 0) continue;
    std::memcpy(payload.data() + layout->columns[c].offset, bytes.data() + begin * row_bytes,
                count * row_bytes);
  }
  return SampleBatch(std::move(layout), std::move(payload));
}

// A plain mixed batch of two or more tables: one sample_mixed request, its rows split into
// each table's part.
MixedBatch draw_in_one_request(Client& client, std::span<const TableShare> shares,
                               const std::vector<std::uint64_t>& counts,
                               const SampleOptions& options) {
  std::vector<std::string> wanted;
  std::vector<std::uint64_t> wanted_counts;
  for (std::size_t t = 0; t < shares.size(); ++t) {
    if (counts[t] == 0) continue;  // a table of 0 rows is not requested
    wanted.push_back(shares[t].table);
    wanted_counts.push_back(counts[t]);
  }
  const SampleBatch whole = client.sample_tables_async(wanted, wanted_counts, options).get();
  std::vector<std::string> tables;
  std::vector<SampleBatch> parts(shares.size());
  std::uint64_t begin = 0;
  for (std::size_t t = 0; t < shares.size(); ++t) {
    tables.push_back(shares[t].table);
    if (counts[t] == 0) continue;
    parts[t] = rows_of(whole, begin, counts[t]);
    begin += counts[t];
  }
  return MixedBatch(std::move(tables), std::move(parts));
}

}  // namespace

std::vector<std::uint64_t> mixed_counts(std::span<const TableShare> shares, std::uint64_t n) {
  if (shares.empty()) throw bad("no table given");
  std::set<std::string> seen;
  double sum = 0;
  for (const TableShare& share : shares) {
    if (!seen.insert(share.table).second) throw bad("table '" + share.table + "' is named twice");
    if (!std::isfinite(share.fraction) || share.fraction < 0) {
      throw bad("table '" + share.table + "': its fraction must be finite and >= 0, got " +
                std::to_string(share.fraction));
    }
    sum += share.fraction;
  }
  if (std::abs(sum - 1.0) > kSumTolerance) {
    throw bad("the fractions sum to " + std::to_string(sum) +
              ", not 1 (divide weights by their total to use them as fractions)");
  }
  std::vector<std::uint64_t> counts(shares.size());
  std::vector<double> remainders(shares.size());
  std::uint64_t given = 0;
  for (std::size_t t = 0; t < shares.size(); ++t) {
    const double exact = shares[t].fraction * static_cast<double>(n);
    counts[t] = static_cast<std::uint64_t>(std::floor(exact));
    remainders[t] = exact - std::floor(exact);
    given += counts[t];
  }
  std::vector<std::size_t> order(shares.size());
  std::iota(order.begin(), order.end(), 0);
  // Largest remainder first; ties to the table given first (a stable sort keeps the order).
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return remainders[a] > remainders[b]; });
  for (std::size_t i = 0; given < n; i = (i + 1) % order.size(), ++given)
    ++counts[order[i]];
  // Fractions summing a little above 1 may floor to more than n: the excess leaves the
  // smallest remainders first (the reverse order).
  for (std::size_t i = order.size(); given > n;) {
    i = (i == 0 ? order.size() : i) - 1;
    if (counts[order[i]] > 0) {
      --counts[order[i]];
      --given;
    }
  }
  return counts;
}

MixedBatch::MixedBatch(std::vector<std::string> tables, std::vector<SampleBatch> parts)
    : tables_(std::move(tables)), parts_(std::move(parts)) {
  offsets_.push_back(0);
  for (const SampleBatch& part : parts_)
    offsets_.push_back(offsets_.back() + part.size());
}

std::size_t MixedBatch::table_of(std::size_t row) const {
  if (row >= size()) throw bad("row " + std::to_string(row) + " is beyond the batch");
  const auto after = std::upper_bound(offsets_.begin(), offsets_.end(), row);
  return static_cast<std::size_t>(after - offsets_.begin()) - 1;
}

MixedBatch sample_mixed(Client& client, std::span<const TableShare> shares, std::uint64_t n,
                        SampleOptions options) {
  const std::vector<std::uint64_t> counts = mixed_counts(shares, n);
  if (std::count_if(counts.begin(), counts.end(), [](std::uint64_t c) { return c > 0; }) > 1)
    return draw_in_one_request(client, shares, counts, options);
  return draw(client, shares, n, options,
              [](Client& c, const std::string& table, std::uint64_t count, const SampleOptions& o) {
                return c.sample_async(table, count, o);
              });
}

MixedBatch sample_mixed_nstep(Client& client, std::span<const TableShare> shares, std::uint64_t n,
                              NStepOptions options) {
  return draw(client, shares, n, options,
              [](Client& c, const std::string& table, std::uint64_t count, const NStepOptions& o) {
                return c.sample_nstep_async(table, count, o);
              });
}

std::vector<UpdateResult> update_mixed_priorities(Client& client, const MixedBatch& batch,
                                                  std::span<const double> priorities) {
  if (priorities.size() != batch.size()) {
    throw bad(std::to_string(priorities.size()) + " priorities for a batch of " +
              std::to_string(batch.size()) + " rows");
  }
  std::vector<std::future<UpdateResult>> pending(batch.tables().size());
  for (std::size_t t = 0; t < batch.tables().size(); ++t) {
    const SampleBatch& part = batch.part(t);
    if (part.size() == 0) continue;
    pending[t] = client.update_priorities_async(batch.tables()[t], part.keys(),
                                                priorities.subspan(batch.offset(t), part.size()));
  }
  std::vector<UpdateResult> results(pending.size());
  for (std::size_t t = 0; t < pending.size(); ++t) {
    if (pending[t].valid()) results[t] = pending[t].get();
  }
  return results;
}

}  // namespace replayd::client
