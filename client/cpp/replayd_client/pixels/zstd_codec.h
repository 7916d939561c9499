// zstd frames of frame fields (docs/PROTOCOL.md, "Frame fields"): one frame per value, with
// its content size and a content checksum. Each object holds a libzstd context and belongs
// to one thread at a time (the writer's, or a connection's reader thread).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace replayd::client {

class ZstdCompressor {
 public:
  ZstdCompressor();
  ~ZstdCompressor();
  ZstdCompressor(const ZstdCompressor&) = delete;
  ZstdCompressor& operator=(const ZstdCompressor&) = delete;

  // Appends one zstd frame of `value` (level 1..19, checksum and content size written) to
  // `out`; returns its size in bytes. Throws Error(invalid_argument) when libzstd fails.
  // Cost: one libzstd compression of the value; allocates only when `out` must grow.
  std::uint32_t compress(std::span<const std::byte> value, int level, std::vector<std::byte>& out);

 private:
  struct Context;
  std::unique_ptr<Context> context_;
};

// The largest frame ZstdCompressor makes of `bytes` bytes (libzstd's bound).
std::size_t max_compressed_bytes(std::size_t bytes);

// Whether `frame` is exactly one zstd frame declaring a content size of `content_bytes`
// (headers only: its blocks are not decoded). O(blocks).
bool is_zstd_frame_of(std::span<const std::byte> frame, std::size_t content_bytes);

class ZstdDecompressor {
 public:
  ZstdDecompressor();
  ~ZstdDecompressor();
  ZstdDecompressor(const ZstdDecompressor&) = delete;
  ZstdDecompressor& operator=(const ZstdDecompressor&) = delete;

  // Decompresses one frame into exactly `out`: empty on success, else why it failed
  // (libzstd's error, a checksum mismatch, or a frame of another size). `out` is then
  // unspecified.
  std::string decompress(std::span<const std::byte> frame, std::span<std::byte> out);

 private:
  struct Context;
  std::unique_ptr<Context> context_;
};

}  // namespace replayd::client
