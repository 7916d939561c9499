#include "service/tier/tier_setup.h"

#include <filesystem>
#include <system_error>

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
  if (context.snapshots != nullptr && context.snapshots->enabled()) {
    return make_error(ErrorCode::failed_precondition,
                      who +
                          "a file tier's rows are not kept in snapshots yet, and this server "
                          "takes snapshots (--data-dir): run file-tier tables on a server "
                          "without --data-dir, or leave file_tier out");
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

void attach_file_tier(ServiceContext& context, HostedTable& hosted, std::string dir,
                      asio::any_io_executor executor) {
  hosted.tier = std::make_shared<FileTier>(std::move(dir), *context.io_pool, std::move(executor),
                                           context.limits.tier_segment_bytes);
}

}  // namespace replayd::service
