// What the episodic operations return (docs/PROTOCOL.md, "Episodic tables"): a batch of
// sampled sequences and a page of stored steps. Like SampleBatch they own the received
// payload and view their columns in place: a span or ColumnView they hand out stays valid
// as long as the object (or whatever it was moved into) lives. Immutable once built; safe
// to read from several threads.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string_view>

#include "replayd_client/results.h"
#include "replayd_client/wire/buffer.h"

namespace replayd::client {

// The columns of one reply, by position or name. Precondition (checked by the decoder):
// the layout fits in the payload.
class ColumnSet {
 public:
  ColumnSet() = default;
  ColumnSet(std::shared_ptr<const SampleLayout> layout, Buffer payload)
      : layout_(std::move(layout)), payload_(std::move(payload)) {}

  // The reply's n: its first dimension shared by every column.
  std::size_t rows() const { return layout_ ? layout_->n : 0; }
  std::size_t column_count() const { return layout_ ? layout_->columns.size() : 0; }
  // Throws std::out_of_range past the last column.
  ColumnView column(std::size_t index) const {
    const ColumnSpec& spec = layout_->columns.at(index);
    return ColumnView(spec, payload_.span().subspan(spec.offset, spec.bytes));
  }
  // The first column named `name` at or after position `first`; throws
  // Error(invalid_argument) naming it when there is none. O(columns).
  ColumnView column(std::string_view name, std::size_t first = 0) const;
  // The layout (null for an empty set) and the whole payload the columns view.
  const std::shared_ptr<const SampleLayout>& layout() const { return layout_; }
  std::span<const std::byte> payload() const { return payload_.span(); }

 private:
  std::shared_ptr<const SampleLayout> layout_;
  Buffer payload_;
};

// n sequences of T = burn_in + length consecutive steps of one episode each
// (Client::sample_sequences). Per sequence: key, probability, weight and times sampled of
// its start step (the first of the `length` steps, at row burn_in). Per step: `mask`
// (1 a stored step, 0 padding: burn-in rows before the episode's first step and, with pad,
// rows past its end) and each field, shape [n, T] + field shape, padding rows zero.
class SequenceBatch {
 public:
  SequenceBatch() = default;
  SequenceBatch(ColumnSet columns, std::uint64_t length, std::uint64_t burn_in,
                std::optional<TableState> state = std::nullopt,
                std::shared_ptr<const std::vector<DecodedFrames>> frames = nullptr)
      : columns_(std::move(columns)),
        length_(length),
        burn_in_(burn_in),
        state_(state),
        frames_(std::move(frames)) {}

  std::size_t size() const { return columns_.rows(); }
  std::uint64_t length() const { return length_; }
  std::uint64_t burn_in() const { return burn_in_; }
  // T = burn_in + length: the second dimension of mask and fields.
  std::uint64_t time_steps() const { return burn_in_ + length_; }

  std::span<const std::uint64_t> keys() const { return columns_.column(0).as<std::uint64_t>(); }
  std::span<const double> probabilities() const { return columns_.column(1).as<double>(); }
  std::span<const double> weights() const { return columns_.column(2).as<double>(); }
  std::span<const std::uint32_t> times_sampled() const {
    return columns_.column(3).as<std::uint32_t>();
  }
  // n * T bytes, row-major: mask()[i * T + t].
  std::span<const std::uint8_t> mask() const { return columns_.column(4).as<std::uint8_t>(); }

  // Frame fields (docs/PROTOCOL.md, "Frame fields"), not among the fields below: how many,
  // each one's description, one by name (throws Error(invalid_argument) when there is none).
  std::size_t frame_field_count() const { return frames_ ? frames_->size() : 0; }
  const FrameFieldSpec& frame_field(std::size_t index) const { return frames_->at(index).spec; }
  SequenceFrames frames(std::string_view name) const {
    return SequenceFrames(frame_field_named(frames_.get(), name));
  }

  std::size_t field_count() const { return size_or_zero(columns_.column_count(), 5); }
  ColumnView field(std::size_t index) const { return columns_.column(5 + index); }
  ColumnView field(std::string_view name) const { return columns_.column(name, 5); }

  // The shard's window index for this request's sequence shape as the draws saw it (the
  // reply's "state": valid starts, their mass and smallest positive mass); nullopt from a
  // server that does not report it and for a batch combined from several shards.
  const std::optional<TableState>& state() const { return state_; }
  // Every column: key, probability, weight, times_sampled, mask, then the fields.
  const ColumnSet& columns() const { return columns_; }

 private:
  static std::size_t size_or_zero(std::size_t count, std::size_t leading) {
    return count > leading ? count - leading : 0;
  }

  ColumnSet columns_;
  std::uint64_t length_ = 0;
  std::uint64_t burn_in_ = 0;
  std::optional<TableState> state_;
  std::shared_ptr<const std::vector<DecodedFrames>> frames_;  // null without frame fields
};

// One page of read_steps: stored steps in insertion order, each with its key, episode,
// position in the episode (0 for the first step), insertion sequence number and how its
// episode ended there (ends()), then the fields, shape [rows] + field shape. next() is the
// cursor of the following page.
class StepPage {
 public:
  StepPage() = default;
  StepPage(ColumnSet columns, std::uint64_t next) : columns_(std::move(columns)), next_(next) {}

  // Steps on this page; 0 once every stored step has been read.
  std::size_t size() const { return columns_.rows(); }
  bool empty() const { return size() == 0; }
  // Pass as `after` to read the next page: the last step's sequence (or the `after` this
  // page was read with, when it is empty).
  std::uint64_t next() const { return next_; }

  std::span<const std::uint64_t> keys() const { return columns_.column(0).as<std::uint64_t>(); }
  std::span<const std::uint64_t> episodes() const { return columns_.column(1).as<std::uint64_t>(); }
  std::span<const std::uint32_t> positions() const {
    return columns_.column(2).as<std::uint32_t>();
  }
  std::span<const std::uint64_t> sequences() const {
    return columns_.column(3).as<std::uint64_t>();
  }
  // Per step: 1 when it is the last step of an episode that ended terminated, 2 the last
  // of one that ended truncated, 0 otherwise (not the last, or the episode is open).
  std::span<const std::uint8_t> ends() const { return columns_.column(4).as<std::uint8_t>(); }

  std::size_t field_count() const {
    return columns_.column_count() > kLeading ? columns_.column_count() - kLeading : 0;
  }
  ColumnView field(std::size_t index) const { return columns_.column(kLeading + index); }
  ColumnView field(std::string_view name) const { return columns_.column(name, kLeading); }
  // Every column: key, episode, position, sequence, end, then the fields.
  const ColumnSet& columns() const { return columns_; }

 private:
  static constexpr std::size_t kLeading = 5;
  ColumnSet columns_;
  std::uint64_t next_ = 0;
};

}  // namespace replayd::client
