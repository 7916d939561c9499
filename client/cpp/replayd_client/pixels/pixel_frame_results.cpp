#include "replayd_client/pixels/pixel_frame_results.h"

#include <stdexcept>

namespace replayd::client {

FrameView NStepFrames::stack(std::size_t draw) const {
  const DecodedFrames& f = *frames_;
  const std::uint64_t item = f.spec.item_bytes;
  return FrameView(f.data + f.starts.at(draw) * item, {f.spec.stack}, {item}, f.spec);
}

FrameView NStepFrames::next_stack(std::size_t draw) const {
  const DecodedFrames& f = *frames_;
  if (!f.spec.next_of) {
    throw Error(ErrorCode::invalid_argument, "field '" + f.spec.name + "' is not next_of");
  }
  const std::uint64_t item = f.spec.item_bytes;
  return FrameView(f.data + (f.starts.at(draw) + f.shifts.at(draw)) * item, {f.spec.stack}, {item},
                   f.spec);
}

std::optional<FrameView> NStepFrames::stacks() const {
  const DecodedFrames& f = *frames_;
  if (!f.uniform) return std::nullopt;
  const std::uint64_t item = f.spec.item_bytes;
  const std::uint64_t per_draw = f.spec.stack + (f.shifts.empty() ? 0 : f.shifts.front());
  return FrameView(f.data, {f.starts.size(), f.spec.stack}, {per_draw * item, item}, f.spec);
}

std::optional<FrameView> NStepFrames::next_stacks() const {
  const DecodedFrames& f = *frames_;
  if (!f.spec.next_of) {
    throw Error(ErrorCode::invalid_argument, "field '" + f.spec.name + "' is not next_of");
  }
  if (!f.uniform) return std::nullopt;
  const std::uint64_t item = f.spec.item_bytes;
  const std::uint64_t shift = f.shifts.empty() ? 0 : f.shifts.front();
  return FrameView(f.data + shift * item, {f.starts.size(), f.spec.stack},
                   {(f.spec.stack + shift) * item, item}, f.spec);
}

FrameView SequenceFrames::stacks() const {
  const DecodedFrames& f = *frames_;
  const std::uint64_t item = f.spec.item_bytes;
  const std::uint64_t per_sequence = f.steps + f.spec.stack - 1;
  const std::uint64_t n = per_sequence ? f.frame_count / per_sequence : 0;
  return FrameView(f.data, {n, f.steps, f.spec.stack}, {per_sequence * item, item, item}, f.spec);
}

}  // namespace replayd::client
