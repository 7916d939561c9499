#include "service/tier/tier_setup.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <spdlog/spdlog.h>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <system_error>

#include "service/snapshot/segment_links.h"
#include "service/snapshot/snapshotter.h"

namespace replayd::service {

Status check_file_tier_allowed(const ServiceContext& context, const TableConfig& config) {
  if (!config.file_tier.enabled()) return Ok{};
  const std::string who = "table '" + config.name + "': file_tier: ";
  if (context.tier_dir.empty() || context.io_pool == nullptr) {
    return make_error(ErrorCode::failed_precondition,
                      who +
                          "this server has no tier directory: start it with --tier-dir DIR "
                          "(config \"tier_dir\") on a local disk, or leave file_tier out");
  }
  if (!context.file_tier_refusal.empty()) {
    return make_error(ErrorCode::failed_precondition, who + context.file_tier_refusal);
  }
  return Ok{};
}

Result<std::string> make_tier_dir(const std::string& root, const std::string& table,
                                  std::uint64_t id) {
  const std::string dir = root + "/" + table + "." + std::to_string(id);
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) {
    return make_error(ErrorCode::unavailable, "table '" + table +
                                                  "': cannot create its tier "
                                                  "directory " +
                                                  dir + ": " + error.message());
  }
  return dir;
}

namespace {

std::shared_ptr<SnapshotGate> gate_of(const ServiceContext& context) {
  if (context.snapshots == nullptr || !context.snapshots->enabled()) return nullptr;
  return context.snapshots->gate();
}

Status restore_failed(const std::string& table, const std::string& why) {
  return make_error(ErrorCode::failed_precondition,
                    "table '" + table + "': its file tier cannot be restored: " + why);
}

// Table directories ("<table name>.<digits>") of an earlier process, holding segments only.
bool is_left_tier_dir(const std::filesystem::path& path) {
  const std::string name = path.filename().string();
  const std::size_t dot = name.rfind('.');
  if (dot == std::string::npos || dot + 1 == name.size() ||
      !is_valid_table_name(name.substr(0, dot)) ||
      name.find_first_not_of("0123456789", dot + 1) != std::string::npos) {
    return false;
  }
  std::error_code ec;
  if (!std::filesystem::is_directory(path, ec)) return false;
  for (std::filesystem::directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec)) {
    if (!it->path().filename().string().starts_with("segment-")) return false;
  }
  return !ec;
}

}  // namespace

void attach_file_tier(ServiceContext& context, HostedTable& hosted, std::string dir,
                      asio::any_io_executor executor) {
  hosted.tier = std::make_shared<FileTier>(
      std::move(dir), *context.io_pool, std::move(executor), context.limits.tier_segment_bytes,
      std::map<std::uint32_t, AdoptedSegment>{}, gate_of(context));
}

Status restore_file_tier(ServiceContext& context, HostedTable& hosted,
                         const std::string& snapshot_path, asio::any_io_executor executor) {
  const Table& table = *hosted.table;
  const std::string& name = table.name();
  REPLAYD_ASSIGN_OR_RETURN(std::string dir,
                           make_tier_dir(context.tier_dir, name, context.next_tier_id++));
  std::map<std::uint32_t, AdoptedSegment> adopted;
  const TierIndex& tier = *table.tier();
  if (tier.cold_rows() > 0) {
    for (const auto& [id, kept] : kept_segments(snapshot_path, name)) {
      const std::string path = dir + "/segment-" + std::to_string(id);
      if (::link(kept.c_str(), path.c_str()) != 0) {
        return restore_failed(name,
                              "cannot link " + kept + " to " + path + ": " + std::strerror(errno));
      }
      AdoptedSegment segment;
      auto opened = open_segment(path, id, segment.bytes);
      if (!opened) return restore_failed(name, opened.error().message);
      segment.file = std::move(opened).value();
      adopted.emplace(id, std::move(segment));
    }
    for (std::uint32_t slot = 0; slot < table.config().capacity; ++slot) {
      if (!tier.cold(slot)) continue;
      const ColdLocation& where = tier.location(slot);
      const auto segment = adopted.find(where.segment);
      if (segment == adopted.end()) {
        return restore_failed(name, "the segment " + std::to_string(where.segment) +
                                        " of the row in slot " + std::to_string(slot) +
                                        " is not in " + segments_dir_of(snapshot_path));
      }
      if (where.offset + where.bytes > segment->second.bytes) {
        return restore_failed(name, "the row in slot " + std::to_string(slot) +
                                        " lies past the end of " + segment->second.file->path);
      }
    }
  }
  hosted.tier = std::make_shared<FileTier>(std::move(dir), *context.io_pool, std::move(executor),
                                           context.limits.tier_segment_bytes, std::move(adopted),
                                           gate_of(context));
  return Ok{};
}

Result<int> claim_tier_dir(const std::string& root) {
  std::error_code error;
  std::filesystem::create_directories(root, error);
  if (error) {
    return make_error(ErrorCode::failed_precondition,
                      "cannot create tier_dir '" + root + "': " + error.message());
  }
  const std::string lock_path = root + "/replayd.lock";
  const int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    return make_error(ErrorCode::failed_precondition,
                      "cannot open " + lock_path + ": " + std::strerror(errno));
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    ::close(fd);
    return make_error(ErrorCode::failed_precondition,
                      "tier_dir '" + root + "' is in use by another replayd process (it holds " +
                          lock_path + "): give each server its own --tier-dir");
  }
  std::vector<std::filesystem::path> left;
  for (std::filesystem::directory_iterator it(root, error), end; !error && it != end;
       it.increment(error)) {
    if (is_left_tier_dir(it->path())) left.push_back(it->path());
  }
  for (const auto& path : left)
    std::filesystem::remove_all(path, error);
  if (!left.empty()) {
    spdlog::warn("tier_dir '{}': removed {} table directories an earlier process left", root,
                 left.size());
  }
  return fd;
}

}  // namespace replayd::service
