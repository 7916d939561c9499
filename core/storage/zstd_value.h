// Checks that bytes are exactly one zstd frame of a given decompressed size, by reading its
// frame and block headers only (RFC 8878): nothing is decompressed, so the check costs
// O(blocks), a few per frame. Corruption inside a block is not seen here; the frame's
// content checksum (when the writer added one) lets the reader that decompresses it find it.
// Pure function; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "core/result.h"

namespace replayd {

// The most bytes a zstd frame of content_bytes may take here: above what zstd's compressor
// ever makes (ZSTD_COMPRESSBOUND), so that replies can be bounded before drawing.
constexpr std::uint64_t max_zstd_frame_bytes(std::uint64_t content_bytes) {
  return content_bytes + content_bytes / 128 + 128;
}

// Ok when `frame` is one whole zstd frame (no skippable frame, no dictionary, no trailing
// bytes), of at most max_zstd_frame_bytes(content_bytes), whose header declares
// `content_bytes` decompressed bytes. Errors
// (invalid_argument) say which part of the frame is wrong.
Status check_zstd_frame(std::span<const std::byte> frame, std::uint64_t content_bytes);

}  // namespace replayd
