#include "service/snapshot/snapshot_files.h"

#include "service/snapshot/segment_links.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <thread>

namespace replayd::service {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kPrefix = "snapshot-";
constexpr std::string_view kSuffix = ".rsnap";
constexpr std::string_view kTemporarySuffix = ".tmp";
constexpr std::string_view kSegmentsSuffix = ".segments";

std::string snapshot_name(std::uint64_t sequence) {
  std::string digits = std::to_string(sequence);
  return std::string(kPrefix) + std::string(20 - std::min<std::size_t>(20, digits.size()), '0') +
         digits + std::string(kSuffix);
}

class FileSink final : public SnapshotSink {
 public:
  FileSink(int fd, std::string path, std::uint32_t pause_ms)
      : fd_(fd), path_(std::move(path)), pause_ms_(pause_ms) {}
  Status write(std::span<const std::byte> bytes) override {
    while (!bytes.empty()) {
      const ssize_t n = ::write(fd_, bytes.data(), bytes.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return file_error("write '" + path_ + "'", errno);
      bytes = bytes.subspan(static_cast<std::size_t>(n));
    }
    if (pause_ms_ != 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms_));
      pause_ms_ = 0;
    }
    return Ok{};
  }

 private:
  int fd_;
  std::string path_;
  std::uint32_t pause_ms_;
};

Status fsync_directory(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return file_error("open directory '" + dir + "'", errno);
  const int rc = ::fsync(fd);
  const int error_number = errno;
  ::close(fd);
  if (rc != 0) return file_error("fsync directory '" + dir + "'", error_number);
  return Ok{};
}

}  // namespace

Error file_error(const std::string& what, int error_number) {
  const bool exhausted = error_number == ENOSPC || error_number == EDQUOT || error_number == EFBIG;
  return make_error(exhausted ? ErrorCode::resource_exhausted : ErrorCode::failed_precondition,
                    what + ": " + std::strerror(error_number));
}

std::string snapshot_path(const std::string& dir, std::uint64_t sequence) {
  return (fs::path(dir) / snapshot_name(sequence)).string();
}

Status ensure_snapshot_dir(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    return make_error(ErrorCode::failed_precondition,
                      "cannot create data_dir '" + dir + "': " + ec.message());
  }
  if (!fs::is_directory(dir, ec)) {
    return make_error(ErrorCode::failed_precondition, "data_dir '" + dir + "' is not a directory");
  }
  return Ok{};
}

Result<std::vector<SnapshotFile>> list_snapshots(const std::string& dir) {
  std::vector<SnapshotFile> files;
  std::error_code ec;
  if (!fs::exists(dir, ec)) return files;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() != kPrefix.size() + 20 + kSuffix.size() || !name.starts_with(kPrefix) ||
        !name.ends_with(kSuffix)) {
      continue;
    }
    std::uint64_t sequence = 0;
    const char* digits = name.data() + kPrefix.size();
    auto [end_digits, parse_error] = std::from_chars(digits, digits + 20, sequence);
    if (parse_error != std::errc() || end_digits != digits + 20) continue;
    files.push_back(SnapshotFile{it->path().string(), sequence});
  }
  if (ec) {
    return make_error(ErrorCode::failed_precondition,
                      "cannot list data_dir '" + dir + "': " + ec.message());
  }
  std::sort(files.begin(), files.end(),
            [](const auto& a, const auto& b) { return a.sequence > b.sequence; });
  return files;
}

std::size_t remove_snapshot_temporaries(const std::string& dir) {
  std::size_t removed = 0;
  std::error_code ec;
  std::vector<fs::path> doomed;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.starts_with(kPrefix) && name.ends_with(kTemporarySuffix)) doomed.push_back(it->path());
    // Segments kept for a snapshot whose image was never completed (or was removed).
    if (name.starts_with(kPrefix) && name.ends_with(kSegmentsSuffix)) {
      const std::string image =
          name.substr(0, name.size() - kSegmentsSuffix.size()) + std::string(kSuffix);
      if (!fs::exists(it->path().parent_path() / image, ec)) doomed.push_back(it->path());
    }
  }
  for (const auto& path : doomed)
    removed += fs::remove_all(path, ec) > 0 ? 1 : 0;
  return removed;
}

std::size_t prune_snapshots(const std::string& dir, std::uint32_t keep,
                            std::uint64_t kept_through) {
  auto files = list_snapshots(dir);
  if (!files) return 0;
  std::size_t removed = 0;
  std::size_t kept = 0;
  for (const SnapshotFile& file : *files) {  // newest first
    if (file.sequence <= kept_through) continue;
    if (++kept <= std::max<std::uint32_t>(keep, 1)) continue;
    std::error_code ec;
    removed += fs::remove(file.path, ec) ? 1 : 0;
    remove_segments_of(file.path);
  }
  return removed;
}

namespace {
constexpr std::string_view kKeptThroughName = "snapshots-kept-through";
}  // namespace

std::uint64_t read_kept_through(const std::string& dir) {
  const std::string path = (fs::path(dir) / kKeptThroughName).string();
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char text[32] = {};
  const ssize_t n = ::read(fd, text, sizeof text - 1);
  ::close(fd);
  std::uint64_t sequence = 0;
  if (n > 0) std::from_chars(text, text + n, sequence);
  return sequence;
}

Status write_kept_through(const std::string& dir, std::uint64_t sequence) {
  const std::string path = (fs::path(dir) / kKeptThroughName).string();
  if (sequence == 0) {
    if (::unlink(path.c_str()) != 0 && errno != ENOENT)
      return file_error("remove '" + path + "'", errno);
    return fsync_directory(dir);
  }
  const std::string temporary = path + ".new";
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return file_error("create '" + temporary + "'", errno);
  const std::string text = std::to_string(sequence) + "\n";
  Status status = Ok{};
  if (::write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
    status = file_error("write '" + temporary + "'", errno);
  } else if (::fsync(fd) != 0) {
    status = file_error("fsync '" + temporary + "'", errno);
  }
  ::close(fd);
  if (status && ::rename(temporary.c_str(), path.c_str()) != 0) {
    status = file_error("rename '" + temporary + "'", errno);
  }
  if (!status) {
    ::unlink(temporary.c_str());
    return status;
  }
  return fsync_directory(dir);
}

Result<WrittenSnapshot> write_snapshot_file(
    const std::string& dir, std::uint64_t sequence,
    const std::function<Result<SnapshotStats>(SnapshotSink&)>& produce, std::uint32_t pause_ms) {
  const std::string path = snapshot_path(dir, sequence);
  const std::string temporary = path + std::string(kTemporarySuffix);
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return file_error("create '" + temporary + "'", errno);
  FileSink sink(fd, temporary, pause_ms);
  auto stats = produce(sink);
  Status status = Ok{};
  if (!stats) {
    status = stats.error();
  } else if (::fsync(fd) != 0) {
    status = file_error("fsync '" + temporary + "'", errno);
  }
  if (::close(fd) != 0 && status) status = file_error("close '" + temporary + "'", errno);
  if (status && ::rename(temporary.c_str(), path.c_str()) != 0) {
    status = file_error("rename '" + temporary + "'", errno);
  }
  if (!status) {
    ::unlink(temporary.c_str());
    return status.error();
  }
  REPLAYD_RETURN_IF_ERROR(fsync_directory(dir));
  return WrittenSnapshot{path, *stats};
}

Result<std::size_t> FileSource::read(std::span<std::byte> out) {
  std::size_t total = 0;
  while (total < out.size()) {
    const ssize_t n = ::read(fd_, out.data() + total, out.size() - total);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return file_error("read", errno);
    if (n == 0) break;
    total += static_cast<std::size_t>(n);
  }
  return total;
}

Result<DecodedSnapshot> read_snapshot_file(const std::string& path, const SnapshotLimits& limits) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return file_error("open '" + path + "'", errno);
  FileSource source(fd);
  auto decoded = read_snapshot(source, limits);
  ::close(fd);
  if (!decoded) return make_error(decoded.error().code, path + ": " + decoded.error().message);
  return decoded;
}

}  // namespace replayd::service
