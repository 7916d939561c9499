#include "service/tier/segment_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
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
constexpr std::uint32_t kRawFlag = 1u << 31;
// Records read by one preadv at most (each takes its header and one piece per field).
constexpr std::size_t kRecordsPerVectorRead = 32;

Status io_error(const std::string& what, const std::string& path) {
  return make_error(ErrorCode::unavailable,
                    "file tier: " + what + " " + path + ": " + std::strerror(errno));
}

Status damaged(const SegmentFile& segment, const char* how) {
  return make_error(ErrorCode::unavailable,
                    "file tier: a record of " + segment.path + " is damaged (" + how + ")");
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

// The CRC of a row scattered over its fields.
std::uint32_t row_crc(const ColdRead& read, std::span<const std::uint64_t> field_bytes) {
  std::uint32_t crc = 0;
  for (std::size_t f = 0; f < field_bytes.size(); ++f)
    crc = crc32c_extend(crc, {read.into[f], field_bytes[f]});
  return crc;
}

// Reads exactly `bytes` at `offset` into `buffer`; an error when the file is shorter.
Status read_exactly(const SegmentFile& segment, std::byte* buffer, std::uint64_t bytes,
                    std::uint64_t offset) {
  for (std::uint64_t done = 0; done < bytes;) {
    const ssize_t n =
        ::pread(segment.fd, buffer + done, bytes - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return io_error("cannot read", segment.path);
    if (n == 0) return damaged(segment, "the file ends before it");
    done += static_cast<std::uint64_t>(n);
  }
  return Ok{};
}

// Writes `bytes` of `buffer` at `offset`, all of them.
Status write_exactly(const SegmentFile& segment, const std::byte* buffer, std::uint64_t bytes,
                     std::uint64_t offset) {
  for (std::uint64_t done = 0; done < bytes;) {
    const ssize_t n =
        ::pwrite(segment.fd, buffer + done, bytes - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return io_error("cannot write to", segment.path);
    done += static_cast<std::uint64_t>(n);
  }
  return Ok{};
}

// Records reads[begin, end): raw, distinct and end to end in one segment. One preadv puts
// every field where it goes; false when the read came back short (the caller reads again
// the slow way).
Result<bool> read_raw_run(std::span<ColdRead> run, std::span<const std::uint64_t> field_bytes) {
  const SegmentFile& segment = *run.front().segment;
  std::vector<std::byte> headers(run.size() * kRecordHeaderBytes);
  std::vector<iovec> pieces;
  std::uint64_t total = 0;
  for (std::size_t r = 0; r < run.size(); ++r) {
    pieces.push_back({headers.data() + r * kRecordHeaderBytes, kRecordHeaderBytes});
    for (std::size_t f = 0; f < field_bytes.size(); ++f)
      pieces.push_back({run[r].into[f], field_bytes[f]});
    total += run[r].where.bytes;
  }
  ssize_t n;
  do {
    n = ::preadv(segment.fd, pieces.data(), static_cast<int>(pieces.size()),
                 static_cast<off_t>(run.front().where.offset));
  } while (n < 0 && errno == EINTR);
  if (n < 0) return io_error("cannot read", segment.path).error();
  if (static_cast<std::uint64_t>(n) != total) return false;
  for (std::size_t r = 0; r < run.size(); ++r) {
    const std::byte* header = headers.data() + r * kRecordHeaderBytes;
    if (get_u32(header) != (kRawFlag | (run[r].where.bytes - kRecordHeaderBytes)))
      return damaged(segment, "its length does not match").error();
    if (row_crc(run[r], field_bytes) != get_u32(header + 4))
      return damaged(segment, "its CRC does not match").error();
  }
  return true;
}

// Reads records reads[begin, end) (end to end or repeated, in one segment) with one pread
// into a buffer and puts each row in place (decompressing those that are not raw).
Status read_buffered_run(std::span<ColdRead> run, std::span<const std::uint64_t> field_bytes,
                         std::uint64_t row_bytes) {
  const SegmentFile& segment = *run.front().segment;
  const std::uint64_t first = run.front().where.offset;
  std::uint64_t last = first;
  for (const ColdRead& read : run)
    last = std::max(last, read.where.offset + read.where.bytes);
  std::vector<std::byte> buffer(last - first);
  REPLAYD_RETURN_IF_ERROR(read_exactly(segment, buffer.data(), buffer.size(), first));
  std::vector<std::byte> row(row_bytes);
  for (ColdRead& read : run) {
    const std::byte* record = buffer.data() + (read.where.offset - first);
    const std::uint32_t length = get_u32(record);
    const std::uint32_t payload = length & ~kRawFlag;
    if (kRecordHeaderBytes + payload != read.where.bytes)
      return damaged(segment, "its length does not match");
    const std::byte* bytes = record + kRecordHeaderBytes;
    if ((length & kRawFlag) == 0) {
      const std::size_t size =
          ZSTD_decompressDCtx(decompressor(), row.data(), row_bytes, bytes, payload);
      if (ZSTD_isError(size) || size != row_bytes)
        return damaged(segment, "it does not decompress to a row");
      bytes = row.data();
    } else if (payload != row_bytes) {
      return damaged(segment, "its length does not match");
    }
    for (std::size_t f = 0; f < field_bytes.size(); ++f) {
      std::memcpy(read.into[f], bytes, field_bytes[f]);
      bytes += field_bytes[f];
    }
    if (row_crc(read, field_bytes) != get_u32(record + 4))
      return damaged(segment, "its CRC does not match");
  }
  return Ok{};
}

}  // namespace

SegmentFile::~SegmentFile() {
  ::close(fd);
}

Result<std::shared_ptr<SegmentFile>> create_segment(const std::string& dir, std::uint32_t id) {
  const std::string path = dir + "/segment-" + std::to_string(id);
  // A new file, never truncated: ext4 flushes a truncated file's dirty pages when it is
  // closed (auto_da_alloc), which would make a close wait on the disk.
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return io_error("cannot create", path).error();
  return std::make_shared<SegmentFile>(id, fd, path);
}

Result<std::shared_ptr<SegmentFile>> open_segment(const std::string& path, std::uint32_t id,
                                                  std::uint64_t& bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return io_error("cannot open", path).error();
  auto segment = std::make_shared<SegmentFile>(id, fd, path);
  struct stat info {};
  if (::fstat(fd, &info) != 0) return io_error("cannot stat", path).error();
  bytes = static_cast<std::uint64_t>(info.st_size);
  return segment;
}

Result<std::vector<ColdLocation>> append_rows(const SegmentFile& segment, std::uint64_t offset,
                                              std::span<const std::byte* const> cells,
                                              std::span<const std::uint64_t> field_bytes) {
  std::uint64_t row_bytes = 0;
  for (std::uint64_t bytes : field_bytes)
    row_bytes += bytes;
  const std::size_t fields = field_bytes.size();
  const std::size_t rows = cells.size() / fields;
  const std::uint64_t bound = std::max<std::uint64_t>(ZSTD_compressBound(row_bytes), row_bytes);
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
    std::size_t payload = ZSTD_compressCCtx(compressor(), record + kRecordHeaderBytes, bound,
                                            row.data(), row_bytes, kCompressionLevel);
    if (ZSTD_isError(payload)) {
      return make_error(
          ErrorCode::unavailable,
          std::string("file tier: compressing a row failed: ") + ZSTD_getErrorName(payload));
    }
    const bool raw = payload > row_bytes - row_bytes / 8;  // saves less than an eighth
    if (raw) {
      std::memcpy(record + kRecordHeaderBytes, row.data(), row_bytes);
      payload = row_bytes;
    }
    put_u32(record, static_cast<std::uint32_t>(payload) | (raw ? kRawFlag : 0));
    put_u32(record + 4, crc32c(row));
    const std::uint64_t bytes = kRecordHeaderBytes + payload;
    ColdLocation location;
    location.segment = segment.id;
    location.bytes = static_cast<std::uint32_t>(bytes);
    location.raw = raw ? 1 : 0;
    location.offset = offset + used;
    locations.push_back(location);
    used += bytes;
  }
  REPLAYD_RETURN_IF_ERROR(write_exactly(segment, buffer.data(), used, offset));
  return locations;
}

Result<std::vector<ColdLocation>> copy_records(const SegmentFile& source,
                                               std::span<const ColdLocation> from,
                                               const SegmentFile& target, std::uint64_t offset) {
  std::uint64_t total = 0;
  for (const ColdLocation& record : from)
    total += record.bytes;
  std::vector<std::byte> buffer(total);
  std::vector<ColdLocation> copies;
  copies.reserve(from.size());
  std::uint64_t used = 0;
  for (std::size_t begin = 0; begin < from.size();) {
    // A run of records that lie end to end: one read.
    std::size_t end = begin + 1;
    std::uint64_t run = from[begin].bytes;
    while (end < from.size() && from[end].offset == from[end - 1].offset + from[end - 1].bytes) {
      run += from[end].bytes;
      ++end;
    }
    REPLAYD_RETURN_IF_ERROR(read_exactly(source, buffer.data() + used, run, from[begin].offset));
    for (std::size_t r = begin; r < end; ++r) {
      const std::uint32_t length = get_u32(buffer.data() + used);
      if ((length & ~kRawFlag) + kRecordHeaderBytes != from[r].bytes ||
          ((length & kRawFlag) != 0) != (from[r].raw != 0)) {
        return damaged(source, "its length does not match").error();
      }
      ColdLocation copy = from[r];
      copy.segment = target.id;
      copy.offset = offset + used;
      copies.push_back(copy);
      used += from[r].bytes;
    }
    begin = end;
  }
  REPLAYD_RETURN_IF_ERROR(write_exactly(target, buffer.data(), used, offset));
  return copies;
}

Status read_rows(std::vector<ColdRead>& reads, std::span<const std::uint64_t> field_bytes) {
  std::uint64_t row_bytes = 0;
  for (std::uint64_t bytes : field_bytes)
    row_bytes += bytes;
  std::sort(reads.begin(), reads.end(), [](const ColdRead& a, const ColdRead& b) {
    return a.segment->id != b.segment->id ? a.segment->id < b.segment->id
                                          : a.where.offset < b.where.offset;
  });
  // Every record's pages asked for first: the disk gets the whole batch at once (the
  // kernel reads ahead asynchronously) instead of one record per round trip.
  for (const ColdRead& read : reads) {
    ::posix_fadvise(read.segment->fd, static_cast<off_t>(read.where.offset), read.where.bytes,
                    POSIX_FADV_WILLNEED);
  }
  for (std::size_t begin = 0; begin < reads.size();) {
    // A run of distinct records that lie end to end in one segment, all raw or not.
    const bool raw = reads[begin].where.raw != 0;
    std::size_t end = begin + 1;
    while (end < reads.size() && end - begin < kRecordsPerVectorRead &&
           reads[end].segment == reads[begin].segment &&
           reads[end].where.offset == reads[end - 1].where.offset + reads[end - 1].where.bytes &&
           (reads[end].where.raw != 0) == raw) {
      ++end;
    }
    const std::span<ColdRead> run(reads.data() + begin, end - begin);
    bool done = false;
    if (raw) {
      REPLAYD_ASSIGN_OR_RETURN(done, read_raw_run(run, field_bytes));
    }
    if (!done) REPLAYD_RETURN_IF_ERROR(read_buffered_run(run, field_bytes, row_bytes));
    // A row drawn again right after: the same record, copied from the first.
    while (end < reads.size() && reads[end].segment == reads[end - 1].segment &&
           reads[end].where.offset == reads[end - 1].where.offset) {
      for (std::size_t f = 0; f < field_bytes.size(); ++f)
        std::memcpy(reads[end].into[f], reads[end - 1].into[f], field_bytes[f]);
      ++end;
    }
    begin = end;
  }
  return Ok{};
}

}  // namespace replayd::service
