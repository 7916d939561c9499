// stream_cell: writes one large field value into a table column without pulling the
// destination through the cache. An insert's large cells (observations, frames) are written
// once and not read back by the server; ordinary stores would first read every destination
// line from memory and then leave the lines in the server core's cache for whoever reads
// them next (a learner's gather on another core). Non-temporal stores skip both: on x86-64
// they copy a 28 KiB cell into a cold column 1.4-1.9x as fast (bench/core_bench.cpp,
// BM_StoreLargeCells; docs/BENCHMARKS.md). Cells under kStreamCellBytes take copy_cell; so
// does every cell elsewhere than x86-64. Pure.
#pragma once

#include <cstddef>
#include <cstdint>

namespace replayd {

// Cells of at least this many bytes are streamed; smaller ones stay cached (a table of
// small items is often as small as the cache and is read back by the next sample).
inline constexpr std::uint64_t kStreamCellBytes = 4096;

// Copies `bytes` from `from` to `to` (no overlap, no alignment assumed). A cell of at least
// kStreamCellBytes is written with non-temporal stores between two store fences, so that,
// as with memcpy, other cores see earlier stores (the slot's busy stamp) before the bytes
// and the bytes before later ones (the row's publication).
void stream_cell(std::byte* to, const std::byte* from, std::uint64_t bytes);

}  // namespace replayd
