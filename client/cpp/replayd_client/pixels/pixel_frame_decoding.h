// Decoding of the frame fields of sample replies (docs/PROTOCOL.md, "Frame fields"): the
// "frames" metadata, the frame columns after every other column, zstd decompression (a
// libzstd context per thread) and the per-draw layout of n-step and sequence replies.
// Threading: runs on a connection's reader thread, inside a reply decoder.
#pragma once

#include <boost/json/object.hpp>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "replayd_client/wire/buffer.h"
#include "replayd_client/pixels/pixel_frame_results.h"

namespace replayd::client {

// Where a frame field's columns lie in the payload.
struct FrameColumn {
  std::uint64_t offset = 0;
  std::uint64_t bytes = 0;
  std::uint64_t rows = 0;  // the column's first dimension
};

// The frame fields a reply describes and their columns (the last `column_count` of its
// column list). Empty for a reply without "frames".
struct FrameColumns {
  std::string table;  // the reply's "table", for error messages
  std::vector<FrameFieldSpec> specs;
  std::vector<FrameColumn> columns;  // per spec: frames, or sizes then zstd
  std::size_t column_count = 0;
};

// Parses "frames" and the frame columns; throws Error(bad_reply) for metadata that breaks
// the protocol or columns past `payload_bytes`.
FrameColumns frame_columns_of(const boost::json::object& meta, std::uint64_t payload_bytes);

using DecodedFrameFields = std::shared_ptr<const std::vector<DecodedFrames>>;

// The frames of an n-step reply whose draws have these keys and steps h. Throws
// Error(data_loss) naming the table, field and key of the draw of a frame that does not
// decompress to one value of its field; Error(bad_reply) for frame counts that do not
// match the draws. `payload` must outlive the result (raw frames are viewed in it).
DecodedFrameFields decode_nstep_frames(const FrameColumns& columns, const Buffer& payload,
                                       std::span<const std::uint64_t> keys,
                                       std::span<const std::uint32_t> steps);
// The same for a sequence reply of T steps per sequence.
DecodedFrameFields decode_sequence_frames(const FrameColumns& columns, const Buffer& payload,
                                          std::span<const std::uint64_t> keys, std::uint64_t steps);

}  // namespace replayd::client
