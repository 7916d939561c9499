#include "replayd_client/results.h"

namespace replayd::client {

ColumnView SampleBatch::field(std::string_view name) const {
  if (layout_) {
    const std::size_t end = layout_->columns.size() - layout_->trailing_columns();
    for (std::size_t i = 4; i < end; ++i) {
      if (layout_->columns[i].name == name) return column(i);
    }
  }
  throw Error(ErrorCode::invalid_argument, "the sample has no field '" + std::string(name) + "'");
}

}  // namespace replayd::client

namespace replayd::client {

NStepFrames SampleBatch::frames(std::string_view name) const {
  return NStepFrames(frame_field_named(frames_.get(), name));
}

const DecodedFrames& frame_field_named(const std::vector<DecodedFrames>* frames,
                                       std::string_view name) {
  if (frames) {
    for (const DecodedFrames& field : *frames) {
      if (field.spec.name == name) return field;
    }
  }
  throw Error(ErrorCode::invalid_argument,
              "the sample has no frame field '" + std::string(name) + "'");
}

}  // namespace replayd::client
