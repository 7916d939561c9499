#include "service/tier/segment_io.h"

#include <fcntl.h>
#include <unistd.h>
#include <zstd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/snapshot/crc32c.h"

namespace replayd::service {
namespace {

// zstd's fastest level: the disk is the bottleneck, not the ratio.
constexpr int kCompressionLevel = 1;

Status io_error(const std::string& what, const std::string& path) {
  return make_error(ErrorCode::unavailable,
                    "file tier: " + what + " " + path + ": " + std::strerror(errno));
}

// Per pool thread, reused across jobs.
ZSTD_CCtx* compressor() {
  thread_local std::unique_ptr<ZSTD_CCtx, decltype(&ZSTD_freeCCtx)> context(ZSTD_createCCtx(),
                                                                            &ZSTD_freeCCtx);
  return context.get();
}
ZSTD_DCtx* decompressor() {
  thread_local std::unique_ptr<ZSTD_DCtx, decltype(&ZSTD_freeDCtx)> context(ZSTD_createDCtx(),
                                                                            &ZSTD_freeDCtx);
  return context.get();
}

void put_u32(std::byte* at, std::uint32_t value) {
  std::memcpy(at, &value, sizeof value);
}
std::uint32_t get_u32(const std::byte* at) {
  std::uint32_t value;
  std::memcpy(&value, at, sizeof value);
  return value;
}

}  // namespace

SegmentFile::~SegmentFile() {
  ::close(fd);
}

Result<std::shared_ptr<SegmentFile>> create_segment(const std::string& dir, std::uint32_t id) {
  const std::string path = dir + "/segment-" + std::to_string(id);
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return io_error("cannot create", path).error();
  return std::make_shared<SegmentFile>(id, fd, path);
}

Result<std::vector<ColdLocation>> append_rows(const SegmentFile& segment, std::uint64_t offset,
                                              std::span<const std::byte* const> cells,
                                              std::span<const std::uint64_t> field_bytes) {
  std::uint64_t row_bytes = 0;
  for (std::uint64_t bytes : field_bytes)
    row_bytes += bytes;
  const std::size_t fields = field_bytes.size();
  const std::size_t rows = cells.size() / fields;
  const std::uint64_t bound = ZSTD_compressBound(row_bytes);
  std::vector<std::byte> buffer(rows * (kRecordHeaderBytes + bound));
  std::vector<std::byte> row(row_bytes);
  std::vector<ColdLocation> locations;
  locations.reserve(rows);
  std::uint64_t used = 0;
  for (std::size_t i = 0; i < rows; ++i) {
    std::uint64_t at = 0;
    for (std::size_t f = 0; f < fields; ++f) {
      std::memcpy(row.data() + at, cells[i * fields + f], field_bytes[f]);
      at += field_bytes[f];
    }
    std::byte* record = buffer.data() + used;
    const std::size_t payload = ZSTD_compressCCtx(compressor(), record + kRecordHeaderBytes, bound,
                                                  row.data(), row_bytes, kCompressionLevel);
    if (ZSTD_isError(payload)) {
      return make_error(
          ErrorCode::unavailable,
          std::string("file tier: compressing a row failed: ") + ZSTD_getErrorName(payload));
    }
    put_u32(record, static_cast<std::uint32_t>(payload));
    put_u32(record + 4, crc32c({record + kRecordHeaderBytes, payload}));
    const std::uint64_t bytes = kRecordHeaderBytes + payload;
    locations.push_back(ColdLocation{segment.id, static_cast<std::uint32_t>(bytes), offset + used});
    used += bytes;
  }
  for (std::uint64_t written = 0; written < used;) {
    const ssize_t n = ::pwrite(segment.fd, buffer.data() + written, used - written,
                               static_cast<off_t>(offset + written));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return io_error("cannot write to", segment.path).error();
    written += static_cast<std::uint64_t>(n);
  }
  return locations;
}

Status read_rows(std::vector<ColdRead>& reads, std::uint64_t row_bytes) {
  std::sort(reads.begin(), reads.end(), [](const ColdRead& a, const ColdRead& b) {
    return a.segment->id != b.segment->id ? a.segment->id < b.segment->id
                                          : a.where.offset < b.where.offset;
  });
  std::vector<std::byte> buffer;
  for (std::size_t begin = 0; begin < reads.size();) {
    // A run of records that lie end to end (or repeat) in one segment: one read.
    std::size_t end = begin + 1;
    std::uint64_t run_end = reads[begin].where.offset + reads[begin].where.bytes;
    while (end < reads.size() && reads[end].segment == reads[begin].segment &&
           reads[end].where.offset <= run_end) {
      run_end = std::max(run_end, reads[end].where.offset + reads[end].where.bytes);
      ++end;
    }
    const std::uint64_t run_begin = reads[begin].where.offset;
    buffer.resize(run_end - run_begin);
    const SegmentFile& segment = *reads[begin].segment;
    for (std::uint64_t done = 0; done < buffer.size();) {
      const ssize_t n = ::pread(segment.fd, buffer.data() + done, buffer.size() - done,
                                static_cast<off_t>(run_begin + done));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return io_error("cannot read", segment.path);
      if (n == 0) {
        return make_error(ErrorCode::unavailable,
                          "file tier: " + segment.path + " ends before a record it should hold");
      }
      done += static_cast<std::uint64_t>(n);
    }
    for (std::size_t i = begin; i < end; ++i) {
      const std::byte* record = buffer.data() + (reads[i].where.offset - run_begin);
      const std::uint32_t payload = get_u32(record);
      const std::span<const std::byte> frame(record + kRecordHeaderBytes, payload);
      if (kRecordHeaderBytes + payload != reads[i].where.bytes ||
          crc32c(frame) != get_u32(record + 4)) {
        return make_error(ErrorCode::unavailable, "file tier: a record of " + segment.path +
                                                      " is damaged (its CRC does not match)");
      }
      const std::size_t size =
          ZSTD_decompressDCtx(decompressor(), reads[i].into, row_bytes, frame.data(), frame.size());
      if (ZSTD_isError(size) || size != row_bytes) {
        return make_error(ErrorCode::unavailable, "file tier: a record of " + segment.path +
                                                      " does not decompress to a row");
      }
    }
    begin = end;
  }
  return Ok{};
}

}  // namespace replayd::service
