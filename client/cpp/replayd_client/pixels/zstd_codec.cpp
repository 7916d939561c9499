#include "replayd_client/pixels/zstd_codec.h"

#include <zstd.h>

#include "replayd_client/error.h"

namespace replayd::client {

struct ZstdCompressor::Context {
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  ~Context() { ZSTD_freeCCtx(cctx); }
};

ZstdCompressor::ZstdCompressor() : context_(std::make_unique<Context>()) {
  if (!context_->cctx) throw std::bad_alloc();
  ZSTD_CCtx_setParameter(context_->cctx, ZSTD_c_checksumFlag, 1);
  ZSTD_CCtx_setParameter(context_->cctx, ZSTD_c_contentSizeFlag, 1);
}

ZstdCompressor::~ZstdCompressor() = default;

std::size_t max_compressed_bytes(std::size_t bytes) {
  return ZSTD_compressBound(bytes);
}

bool is_zstd_frame_of(std::span<const std::byte> frame, std::size_t content_bytes) {
  return ZSTD_getFrameContentSize(frame.data(), frame.size()) == content_bytes &&
         ZSTD_findFrameCompressedSize(frame.data(), frame.size()) == frame.size();
}

std::uint32_t ZstdCompressor::compress(std::span<const std::byte> value, int level,
                                       std::vector<std::byte>& out) {
  const std::size_t before = out.size();
  out.resize(before + ZSTD_compressBound(value.size()));
  ZSTD_CCtx_setParameter(context_->cctx, ZSTD_c_compressionLevel, level);
  const std::size_t made = ZSTD_compress2(context_->cctx, out.data() + before, out.size() - before,
                                          value.data(), value.size());
  if (ZSTD_isError(made)) {
    out.resize(before);
    throw Error(ErrorCode::invalid_argument,
                std::string("zstd compression failed: ") + ZSTD_getErrorName(made));
  }
  out.resize(before + made);
  return static_cast<std::uint32_t>(made);
}

struct ZstdDecompressor::Context {
  ZSTD_DCtx* dctx = ZSTD_createDCtx();
  ~Context() { ZSTD_freeDCtx(dctx); }
};

ZstdDecompressor::ZstdDecompressor() : context_(std::make_unique<Context>()) {
  if (!context_->dctx) throw std::bad_alloc();
}

ZstdDecompressor::~ZstdDecompressor() = default;

std::string ZstdDecompressor::decompress(std::span<const std::byte> frame,
                                         std::span<std::byte> out) {
  const std::size_t got =
      ZSTD_decompressDCtx(context_->dctx, out.data(), out.size(), frame.data(), frame.size());
  if (ZSTD_isError(got)) return ZSTD_getErrorName(got);
  if (got != out.size()) {
    return std::to_string(got) + " bytes where the field holds " + std::to_string(out.size());
  }
  return {};
}

}  // namespace replayd::client
