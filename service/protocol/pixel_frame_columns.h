// Frame fields in replies (docs/PROTOCOL.md, "Frame fields"). After a draw, each frame
// field's frames (the slots core listed in NStepBuffers::frames, SequenceBuffers::frames or
// per row read) go out as one column of values, "<name>.frames" ([frames] + field shape),
// or, for a compressed field, as the zstd frames the writer made, untouched:
// "<name>.sizes" (uint32 per frame; 0 means all zeros) and "<name>.zstd" (uint8, the frames
// back to back). With `raw`, the server decompresses compressed frames into "<name>.frames"
// instead, for clients without zstd. The metadata member "frames" tells the client each
// field's stack, next_of and encoding, so it can build the stacked arrays.
// Threading: io_context thread only (reads the table's storage).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/table/episodic_table.h"
#include "service/protocol/sample_reply.h"

namespace replayd::service::commands {

// Upper bound of the reply bytes `frames` frames of `field` add (both encodings).
std::uint64_t frame_columns_bound(const Field& field, std::uint64_t frames);

// Adds the frame columns of every frame field of `table` (frames[f] lists field f's frames;
// fields that are no frame fields are skipped) after the reply's columns and fills them.
// `stacked`: samples (each frame field, its stack and next_of apply) or read rows (only
// compressed fields; single values: stack 1, no next_of). Returns the metadata member
// `,"frames":[...]`. Errors (raw only): a stored frame that does not decompress, naming the table,
// the field and the step's key.
Result<std::string> add_frame_columns(ColumnReply& reply, const Table& table,
                                      std::span<const std::vector<std::uint32_t>> frames, bool raw,
                                      bool stacked);
// The frame columns of an n-step or sequence draw (stacked): add_frame_columns, or nothing
// (an empty member) when the table has no frame fields (`frames` empty).
Result<std::string> add_draw_frame_columns(ColumnReply& reply, const Table& table,
                                           std::span<const std::vector<std::uint32_t>> frames,
                                           bool raw);

}  // namespace replayd::service::commands
