#include "replayd_client/results.h"

#include "replayd_client/wire/wire_frame_codec.h"

namespace replayd::client {

std::shared_ptr<SampleLayout> layout_with_rows(const SampleLayout& layout, std::uint64_t n) {
  auto resized = std::make_shared<SampleLayout>();
  resized->n = n;
  resized->nstep = layout.nstep;
  resized->versions = layout.versions;
  std::uint64_t offset = 0;
  for (const ColumnSpec& column : layout.columns) {
    ColumnSpec spec = column;
    spec.shape.front() = n;
    spec.bytes = layout.n ? column.bytes / layout.n * n : 0;
    spec.offset = offset;
    offset += spec.bytes + padding_after(spec.bytes);
    resized->columns.push_back(std::move(spec));
  }
  resized->payload_bytes = offset;
  return resized;
}

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
