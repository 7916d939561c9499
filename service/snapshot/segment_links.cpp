#include "service/snapshot/segment_links.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>

#include "service/snapshot/snapshot_files.h"

namespace replayd::service {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kSnapshotSuffix = ".rsnap";
constexpr std::string_view kSegmentsSuffix = ".segments";
constexpr std::string_view kSegmentPrefix = "segment-";

Error link_error(const std::string& what, int error_number) {
  Error error = file_error("file tier segments of a snapshot: " + what, error_number);
  if (error_number == EXDEV) {
    error.message +=
        " (tier_dir and data_dir must be on one filesystem: a snapshot keeps a file "
        "tier's segments as hard links)";
  }
  return error;
}

Status sync_path(const std::string& path, bool directory) {
  const int fd = ::open(path.c_str(), (directory ? O_RDONLY | O_DIRECTORY : O_RDONLY) | O_CLOEXEC);
  if (fd < 0) return link_error("open " + path, errno);
  const int rc = directory ? ::fsync(fd) : ::fdatasync(fd);
  const int error_number = errno;
  ::close(fd);
  if (rc != 0) return link_error("sync " + path, error_number);
  return Ok{};
}

Status make_dir(const std::string& path) {
  if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST)
    return link_error("mkdir " + path, errno);
  return Ok{};
}

}  // namespace

std::string segments_dir_of(const std::string& snapshot_path) {
  std::string base = snapshot_path;
  if (base.ends_with(kSnapshotSuffix)) base.resize(base.size() - kSnapshotSuffix.size());
  return base + std::string(kSegmentsSuffix);
}

Status link_segments(const std::string& snapshot_path, const std::vector<TierSegments>& tables) {
  bool any = false;
  for (const TierSegments& table : tables)
    any = any || !table.segments.empty();
  if (!any) return Ok{};
  const std::string root = segments_dir_of(snapshot_path);
  remove_segments_of(snapshot_path);  // a leftover of an interrupted run with this number
  REPLAYD_RETURN_IF_ERROR(make_dir(root));
  for (const TierSegments& table : tables) {
    if (table.segments.empty()) continue;
    const std::string dir = root + "/" + table.table;
    REPLAYD_RETURN_IF_ERROR(make_dir(dir));
    for (const auto& [id, path] : table.segments) {
      const std::string link = dir + "/" + std::string(kSegmentPrefix) + std::to_string(id);
      if (::link(path.c_str(), link.c_str()) != 0)
        return link_error("link " + path + " to " + link, errno);
      // Rows written by the server's I/O pool are in the page cache: make them durable.
      REPLAYD_RETURN_IF_ERROR(sync_path(link, false));
    }
    REPLAYD_RETURN_IF_ERROR(sync_path(dir, true));
  }
  return sync_path(root, true);
}

void remove_segments_of(const std::string& snapshot_path) {
  std::error_code ignored;
  fs::remove_all(segments_dir_of(snapshot_path), ignored);
}

std::vector<std::pair<std::uint32_t, std::string>> kept_segments(const std::string& snapshot_path,
                                                                 const std::string& table) {
  std::vector<std::pair<std::uint32_t, std::string>> found;
  std::error_code ec;
  const fs::path dir = fs::path(segments_dir_of(snapshot_path)) / table;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!name.starts_with(kSegmentPrefix)) continue;
    std::uint32_t id = 0;
    const char* first = name.data() + kSegmentPrefix.size();
    const char* last = name.data() + name.size();
    auto [end_digits, parse_error] = std::from_chars(first, last, id);
    if (parse_error != std::errc() || end_digits != last || first == last) continue;
    found.emplace_back(id, it->path().string());
  }
  std::sort(found.begin(), found.end());
  return found;
}

Result<bool> same_filesystem(const std::string& a, const std::string& b) {
  struct stat first {};
  struct stat second {};
  if (::stat(a.c_str(), &first) != 0) return link_error("stat " + a, errno);
  if (::stat(b.c_str(), &second) != 0) return link_error("stat " + b, errno);
  return first.st_dev == second.st_dev;
}

}  // namespace replayd::service
