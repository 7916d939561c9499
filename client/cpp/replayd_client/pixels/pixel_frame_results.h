// The frame fields of an n-step or sequence sample (docs/PROTOCOL.md, "Frame fields"),
// decoded: each field's unique frames in one buffer (the reply's payload for raw frames,
// decompressed once for zstd ones), and the stacks of every draw as FrameViews over them,
// without copies. Owned by the SampleBatch or SequenceBatch that decoded them; a handle or
// view is valid as long as that batch lives. Immutable once built; safe to read from
// several threads.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "replayd_client/wire/buffer.h"
#include "replayd_client/pixels/pixel_frame_view.h"

namespace replayd::client {

// One field's frames as decoded from one reply.
struct DecodedFrames {
  FrameFieldSpec spec;
  Buffer decompressed;              // the frames of a zstd field; empty for raw ones
  const std::byte* data = nullptr;  // frame_count * spec.item_bytes bytes
  std::uint64_t frame_count = 0;
  // n-step replies: per draw, its first frame and m = min(h, stack) (0 without next_of).
  std::vector<std::uint64_t> starts;
  std::vector<std::uint64_t> shifts;
  bool uniform = true;  // every draw has the same shift
  // Sequence replies: T, the steps of each sequence.
  std::uint64_t steps = 0;

  std::span<const std::byte> frames() const { return {data, frame_count * spec.item_bytes}; }
};

// A frame field of an n-step sample.
class NStepFrames {
 public:
  explicit NStepFrames(const DecodedFrames& frames) : frames_(&frames) {}

  const FrameFieldSpec& spec() const { return frames_->spec; }
  // Every unique frame of the reply, [frame_count] + shape, back to back.
  std::span<const std::byte> frames() const { return frames_->frames(); }
  std::uint64_t frame_count() const { return frames_->frame_count; }

  // The stack of draw i's step t: [stack] values, oldest first (the episode's first step
  // stands in for steps before it). Throws std::out_of_range past the last draw.
  FrameView stack(std::size_t draw) const;
  // Draw i's next_<name>: the stack of step t+h. Throws Error(invalid_argument) for a
  // field without next_of.
  FrameView next_stack(std::size_t draw) const;
  // Every draw's stack as one [n, stack] view (and next_<name>'s), when every draw has the
  // same layout (always with nstep 1); nullopt otherwise (use stack(i)).
  std::optional<FrameView> stacks() const;
  std::optional<FrameView> next_stacks() const;

 private:
  const DecodedFrames* frames_;
};

// A frame field of a sequence sample.
class SequenceFrames {
 public:
  explicit SequenceFrames(const DecodedFrames& frames) : frames_(&frames) {}

  const FrameFieldSpec& spec() const { return frames_->spec; }
  std::span<const std::byte> frames() const { return frames_->frames(); }
  std::uint64_t frame_count() const { return frames_->frame_count; }

  // [n, T, stack]: row j of sequence i is the stack of frames j .. j+stack-1 of the
  // sequence's T + stack - 1 frames (zeros for padding rows).
  FrameView stacks() const;
  // Row j of sequence i: [stack] values. Throws std::out_of_range.
  FrameView stack(std::size_t sequence, std::size_t row) const { return stacks()[sequence][row]; }

 private:
  const DecodedFrames* frames_;
};

}  // namespace replayd::client
