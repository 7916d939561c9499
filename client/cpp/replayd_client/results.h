// What the operations return. Keys and SampleBatch own the received payload and expose
// typed views into it without copying: a span they hand out stays valid as long as the
// object (or whatever it was moved into) lives. Immutable once built; safe to read from
// several threads.
#pragma once

#include <boost/json/object.hpp>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "replayd_client/dtype.h"
#include "replayd_client/error.h"
#include "replayd_client/pixels/pixel_frame_results.h"
#include "replayd_client/wire/buffer.h"

namespace replayd::client {

// Reply of hello: the protocol version, the server's name, its tables and limits.
struct ServerHello {
  std::uint64_t protocol = 0;
  std::string server;  // e.g. "replayd 0.1.0"
  std::vector<std::string> tables;
  boost::json::object limits;  // max_frame_bytes, max_batch_items, ... (docs/PROTOCOL.md)
  // The shared-memory data plane (docs/SHM.md): offered to this connection, or why not.
  bool shm_offered = false;
  std::string shm_reason;
};

// The keys of inserted items, in item order, viewed in the reply buffer.
class Keys {
 public:
  Keys() = default;
  Keys(Buffer buffer, std::size_t n) : buffer_(std::move(buffer)), n_(n) {}
  std::span<const std::uint64_t> span() const { return {buffer_.as<std::uint64_t>(0), n_}; }
  std::size_t size() const { return n_; }
  std::uint64_t operator[](std::size_t i) const { return span()[i]; }
  const std::uint64_t* begin() const { return span().data(); }
  const std::uint64_t* end() const { return span().data() + n_; }

 private:
  Buffer buffer_;
  std::size_t n_ = 0;
};

struct UpdateResult {
  std::uint64_t applied = 0;  // priorities changed
  std::uint64_t stale = 0;    // keys no longer stored, ignored
};

struct DeleteResult {
  std::uint64_t deleted = 0;
  std::uint64_t stale = 0;  // keys no longer stored
};

// One column of a sample reply as the reply's metadata describes it.
struct ColumnSpec {
  std::string name;
  DType dtype = DType::uint8;
  std::vector<std::uint64_t> shape;  // [n] followed by the field's shape
  std::uint64_t offset = 0;          // from the start of the payload, a multiple of 8
  std::uint64_t bytes = 0;           // n * item size
};

// The column layout of a sample reply: the four per-draw columns (key, probability,
// weight, times_sampled), then the table's fields, then for an n-step sample `discount`
// (float64) and `steps` (uint32). Shared by every reply with the same metadata text.
struct SampleLayout {
  std::uint64_t n = 0;
  std::vector<ColumnSpec> columns;
  std::uint64_t payload_bytes = 0;  // the least payload size the columns need
  // k of an n-step sample (the reply's "nstep"); nullopt for a plain sample.
  std::optional<std::uint64_t> nstep;
  // Whether the last column is each draw's policy version (the reply's "versions": true).
  bool versions = false;
  // Columns after the fields: 2 (discount, steps) for an n-step sample, 1 more with versions.
  std::size_t trailing_columns() const { return (nstep ? 2 : 0) + (versions ? 1 : 0); }
};

// The layout of the same columns with n rows, offsets as the protocol lays them out (a batch
// of some rows of `layout`'s, or of the rows of several such batches).
std::shared_ptr<SampleLayout> layout_with_rows(const SampleLayout& layout, std::uint64_t n);

// A sampled table as the draws saw it, just before the first (the reply's "state"): its
// item count and sampling mass (item count for uniform tables, sum of priority^alpha for
// prioritized ones) and the smallest positive mass of one item. Combines shards' samples.
struct TableState {
  std::uint64_t size = 0;
  double mass = 0;
  double min_mass = 0;
};

// A typed view of one column: valid while the SampleBatch it came from lives.
class ColumnView {
 public:
  ColumnView(const ColumnSpec& spec, std::span<const std::byte> bytes)
      : spec_(&spec), bytes_(bytes) {}
  const std::string& name() const { return spec_->name; }
  DType dtype() const { return spec_->dtype; }
  // [n] followed by the field's shape.
  const std::vector<std::uint64_t>& shape() const { return spec_->shape; }
  std::span<const std::byte> bytes() const { return bytes_; }
  // Every value of the column, row-major. Throws Error(invalid_argument) when T does not
  // match the column's dtype. O(1).
  template <typename T>
  std::span<const T> as() const {
    if (dtype_of<T> != spec_->dtype) {
      throw Error(ErrorCode::invalid_argument, "column '" + spec_->name + "' holds " +
                                                   std::string(dtype_name(spec_->dtype)) +
                                                   ", not " + std::string(dtype_name(dtype_of<T>)));
    }
    return {reinterpret_cast<const T*>(bytes_.data()), bytes_.size() / sizeof(T)};
  }

 private:
  const ColumnSpec* spec_;
  std::span<const std::byte> bytes_;
};

// A sampled batch: per-draw information and the table's fields, all viewing one buffer.
class SampleBatch {
 public:
  SampleBatch() = default;
  // Precondition (checked by the decoder): the layout fits in the payload.
  SampleBatch(std::shared_ptr<const SampleLayout> layout, Buffer payload,
              std::optional<TableState> state = std::nullopt,
              std::shared_ptr<const std::vector<DecodedFrames>> frames = nullptr)
      : layout_(std::move(layout)),
        payload_(std::move(payload)),
        state_(state),
        frames_(std::move(frames)) {}

  std::size_t size() const { return layout_ ? layout_->n : 0; }
  std::span<const std::uint64_t> keys() const { return typed<std::uint64_t>(0); }
  std::span<const double> probabilities() const { return typed<double>(1); }
  std::span<const double> weights() const { return typed<double>(2); }
  std::span<const std::uint32_t> times_sampled() const { return typed<std::uint32_t>(3); }
  // Each draw's policy version (SampleOptions::versions); empty when not asked for.
  std::span<const std::uint64_t> versions() const {
    if (!layout_ || !layout_->versions) return {};
    return typed<std::uint64_t>(layout_->columns.size() - 1);
  }
  // The table as the draws saw it; nullopt from a server that does not report it (and for
  // a batch combined from several shards).
  const std::optional<TableState>& state() const { return state_; }
  const SampleLayout* layout() const { return layout_.get(); }

  // n-step samples (Client::sample_nstep): k, then per draw the discount (gamma^h, or 0
  // when the episode terminated within the window) and the steps h summed into the return
  // (the reward field holds the return, the bootstrap fields the values of step t+h-1).
  // nullopt and empty spans for a plain sample.
  std::optional<std::uint64_t> nstep() const { return layout_ ? layout_->nstep : std::nullopt; }
  std::span<const double> discounts() const { return trailing<double>(0); }
  std::span<const std::uint32_t> steps() const { return trailing<std::uint32_t>(1); }

  // Frame fields of an n-step sample (docs/PROTOCOL.md, "Frame fields": stacked, next_of
  // or compressed), which are not among the fields below: how many, each one's
  // description, and one by name (throws Error(invalid_argument) when there is none).
  // Compressed values were decompressed when the reply was decoded.
  std::size_t frame_field_count() const { return frames_ ? frames_->size() : 0; }
  const FrameFieldSpec& frame_field(std::size_t index) const { return frames_->at(index).spec; }
  NStepFrames frames(std::string_view name) const;

  // The table's fields (but frame fields), in field order.
  std::size_t field_count() const {
    return layout_ ? layout_->columns.size() - 4 - layout_->trailing_columns() : 0;
  }
  ColumnView field(std::size_t index) const { return column(4 + index); }
  // The field named `name`; throws Error(invalid_argument) if there is none. O(fields).
  ColumnView field(std::string_view name) const;
  // Any column by position: 0..3 are key, probability, weight, times_sampled, then the
  // fields (then discount and steps of an n-step sample). Throws std::out_of_range past the last.
  ColumnView column(std::size_t column) const {
    const ColumnSpec& spec = layout_->columns.at(column);
    return ColumnView(spec, payload_.span().subspan(spec.offset, spec.bytes));
  }

 private:
  template <typename T>
  std::span<const T> typed(std::size_t column) const {
    if (!layout_) return {};
    return {payload_.as<T>(layout_->columns[column].offset), layout_->n};
  }

  template <typename T>
  std::span<const T> trailing(std::size_t index) const {
    if (!layout_ || !layout_->nstep) return {};
    return typed<T>(layout_->columns.size() - 2 + index);
  }

  std::shared_ptr<const SampleLayout> layout_;
  Buffer payload_;
  std::optional<TableState> state_;
  std::shared_ptr<const std::vector<DecodedFrames>> frames_;  // null without frame fields
};

// A keys-only sample reply (Client::sample_keys_async): the draws (keys, probabilities,
// weights, times sampled; no rows) and the table block their slots name (TableMapping::
// region(): another block means the table was dropped or replaced since it was mapped).
struct DrawnKeys {
  SampleBatch draws;
  std::uint64_t region = 0;
};

// The decoded frame field named `name` in `frames` (null: none); throws
// Error(invalid_argument) when there is none.
const DecodedFrames& frame_field_named(const std::vector<DecodedFrames>* frames,
                                       std::string_view name);

}  // namespace replayd::client
