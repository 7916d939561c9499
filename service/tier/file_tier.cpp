#include "service/tier/file_tier.h"

#include <spdlog/spdlog.h>
#include <algorithm>
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/experimental/as_tuple.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <functional>

#include "core/selectors/selector.h"
#include "service/table_registry.h"

namespace replayd::service {
namespace {

// How long the writer waits after a failed write before it tries again.
constexpr auto kRetryAfterError = std::chrono::seconds(1);

// Where a field of 0 record bytes (not written out) points: copied from or to for 0 bytes.
std::byte kNothing{};

}  // namespace

FileTier::FileTier(std::string dir, IoPool& pool, asio::any_io_executor executor,
                   std::uint64_t segment_bytes, std::map<std::uint32_t, AdoptedSegment> adopted,
                   std::shared_ptr<SnapshotGate> gate)
    : dir_(std::move(dir)),
      pool_(pool),
      executor_(std::move(executor)),
      segment_bytes_limit_(segment_bytes),
      gate_(std::move(gate)) {
  for (auto& [id, segment] : adopted) {
    segments_[id] = std::move(segment.file);
    segment_bytes_[id] = segment.bytes;
    next_segment_ = std::max(next_segment_, id + 1);
    rescan_ = true;  // one may hold no live row
  }
}

FileTier::~FileTier() {
  // Reads in flight hold their segments' descriptors: unlinking under them is safe. The
  // segments go with the job, so that their descriptors are closed on the pool too (a close
  // may wait for the file's writeback).
  std::function<void()> remove = [&pool = pool_, dir = dir_,
                                  segments = std::move(segments_)]() mutable {
    pool.submit([dir, segments = std::move(segments)]() mutable {
      const auto started = std::chrono::steady_clock::now();
      const std::size_t count = segments.size();
      segments.clear();
      std::error_code ignored;
      std::filesystem::remove_all(dir, ignored);
      if (count == 0) return;
      // Deleting gigabytes of files takes seconds: logged.
      spdlog::info(
          "{}: {} segment files deleted in {:.0f} ms", dir, count,
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started)
              .count());
    });
  };
  if (gate_) {
    gate_->after_writing(std::move(remove));
  } else {
    remove();
  }
}

std::vector<std::pair<std::uint32_t, std::string>> FileTier::segment_paths() const {
  std::vector<std::pair<std::uint32_t, std::string>> paths;
  for (const auto& [id, segment] : segments_)
    paths.emplace_back(id, segment->path);
  return paths;
}

std::uint64_t FileTier::file_bytes() const {
  std::uint64_t total = 0;
  for (const auto& [id, bytes] : segment_bytes_)
    total += bytes;
  return total;
}

void FileTier::poke(HostedTable& hosted) {
  const Table& table = *hosted.table;
  const TierIndex* tier = table.tier();
  if (tier == nullptr || hosted.dropped) return;
  if (rescan_ || tier->segments_emptied() != emptied_seen_) delete_dead_segments(table);
  if (writing_) return;
  bool due = tier->hot_rows() - tier->spilling_rows() > tier->ram_rows();
  if (!due && tier->cold_released() != released_seen_) {
    released_seen_ = tier->cold_released();
    due = compaction_victim(table).has_value();
  }
  if (!due) return;
  writing_ = true;
  asio::co_spawn(executor_, write_out(hosted.shared_from_this()), asio::detached);
}

FileTier::WriteTarget FileTier::write_target() const {
  if (!has_open_segment_ || open_bytes_ >= segment_bytes_limit_) return {next_segment_, nullptr, 0};
  return {open_segment_, segments_.at(open_segment_), open_bytes_};
}

void FileTier::record_write(const WriteTarget& target, std::shared_ptr<SegmentFile> created,
                            std::uint64_t bytes) {
  if (created) {
    rescan_ = rescan_ || has_open_segment_;  // the last open segment may be empty already
    next_segment_ = target.id + 1;
    segments_[target.id] = std::move(created);
    segment_bytes_[target.id] = 0;
    open_segment_ = target.id;
    has_open_segment_ = true;
    open_bytes_ = 0;
  }
  open_bytes_ += bytes;
  segment_bytes_[target.id] += bytes;
}

namespace {

// What a write job did: where its records lie, and the segment it created (if any).
struct Written {
  Result<std::vector<ColdLocation>> locations = std::vector<ColdLocation>{};
  std::shared_ptr<SegmentFile> created;
};

// On the pool: the segment a job appends to, `open` or a new one `id` (then also in
// written.created); null, with written.locations the error, when it cannot be created.
std::shared_ptr<SegmentFile> target_file(const std::string& dir, std::uint32_t id,
                                         std::shared_ptr<SegmentFile> open, Written& written) {
  if (open) return open;
  auto made = create_segment(dir, id);
  if (!made) {
    written.locations = made.error();
    return nullptr;
  }
  written.created = std::move(made).value();
  return written.created;
}

std::uint64_t total_bytes(const std::vector<ColdLocation>& where) {
  std::uint64_t bytes = 0;
  for (const ColdLocation& location : where)
    bytes += location.bytes;
  return bytes;
}

}  // namespace

asio::awaitable<Result<std::vector<ColdLocation>>> FileTier::write_records(RecordWrite write) {
  const WriteTarget target = write_target();
  std::function<Written()> job = [dir = dir_, target, write = std::move(write)]() -> Written {
    Written written;
    auto file = target_file(dir, target.id, target.segment, written);
    if (file) written.locations = write(*file, target.offset);
    return written;
  };
  Written written = co_await run_on_pool(pool_, std::move(job));
  record_write(target, std::move(written.created),
               written.locations ? total_bytes(written.locations.value()) : 0);
  if (!written.locations) ++stats_.write_errors;
  co_return std::move(written.locations);
}

asio::awaitable<void> FileTier::pause_after_error() {
  // A full disk must not make the writer spin.
  asio::steady_timer pause(executor_, kRetryAfterError);
  co_await pause.async_wait(asio::experimental::as_tuple(asio::use_awaitable));
}

asio::awaitable<void> FileTier::write_out(std::shared_ptr<HostedTable> hosted) {
  Table& table = *hosted->table;
  const auto written_fields = table.tier_field_bytes();
  const std::vector<std::uint64_t> field_bytes(written_fields.begin(), written_fields.end());
  while (!hosted->dropped) {
    const std::vector<SpillRow> rows = table.choose_spill(kWriteBatchRows);
    if (rows.empty()) {
      // Every row past the budget is written out: compaction's turn, a job at a time,
      // looking again for rows to write out between jobs.
      if (!co_await move_some(*hosted)) break;
      continue;
    }
    // The job reads the rows' cells while this thread goes on: they stay unchanged until
    // finish_spill unless a row is removed (then its copy is discarded).
    std::vector<const std::byte*> cells;
    for (const SpillRow& row : rows) {
      for (std::size_t f = 0; f < field_bytes.size(); ++f)  // a field of 0 bytes is not read
        cells.push_back(field_bytes[f] != 0 ? table.storage().cell(f, row.slot) : &kNothing);
    }
    RecordWrite append = [cells = std::move(cells), field_bytes](const SegmentFile& file,
                                                                 std::uint64_t offset) {
      return append_rows(file, offset, cells, field_bytes);
    };
    const Result<std::vector<ColdLocation>> written = co_await write_records(std::move(append));
    if (!written) {
      if (auto line = errors_logged_.occur()) {
        spdlog::error(
            "table '{}': writing rows out to its file tier failed: {}; they stay in "
            "RAM and inserts wait while more than {} rows past the RAM budget are "
            "held{}",
            table.name(), written.error().message, kFileTierSlackRows, line->suffix());
      }
      table.abandon_spill(rows);
      co_await pause_after_error();  // the next change of the table tries again
      break;
    }
    const std::vector<ColdLocation>& where = written.value();
    const std::uint64_t bytes = total_bytes(where);
    stats_.rows_written += rows.size();
    stats_.bytes_written += bytes;
    if (!hosted->dropped) {
      table.finish_spill(rows, where);
      table_changed(*hosted);  // inserts waiting for the writer may go on
    }
  }
  writing_ = false;
  if (!hosted->dropped) poke(*hosted);  // rows stored while the last write ran
}

std::optional<std::uint32_t> FileTier::compaction_victim(const Table& table) const {
  if (table.config().remover == SelectorKind::fifo || (gate_ && gate_->writing())) {
    return std::nullopt;
  }
  const TierIndex& tier = *table.tier();
  std::optional<std::uint32_t> victim;
  double smallest = 0.5;
  for (const auto& [id, bytes] : segment_bytes_) {
    if ((has_open_segment_ && id == open_segment_) || bytes == 0) continue;
    const std::uint64_t live = tier.live_bytes(id);
    if (live == 0) continue;  // deleted, not copied
    const double share = static_cast<double>(live) / static_cast<double>(bytes);
    if (share < smallest) {
      smallest = share;
      victim = id;
    }
  }
  return victim;
}

asio::awaitable<bool> FileTier::move_some(HostedTable& hosted) {
  Table& table = *hosted.table;
  const std::optional<std::uint32_t> victim = compaction_victim(table);
  if (!victim) co_return false;
  std::vector<MoveRow> rows = table.choose_moves(*victim, kMoveBatchRows, kMoveBatchBytes);
  if (rows.empty()) co_return false;
  // Read in the order the records lie.
  std::sort(rows.begin(), rows.end(),
            [](const MoveRow& a, const MoveRow& b) { return a.from.offset < b.from.offset; });
  std::vector<ColdLocation> from;
  from.reserve(rows.size());
  for (const MoveRow& row : rows)
    from.push_back(row.from);
  // The job holds the victim's descriptor: a victim deleted meanwhile (its rows all
  // removed) stays readable.
  RecordWrite copy = [source = segments_.at(*victim), from = std::move(from)](
                         const SegmentFile& file, std::uint64_t offset) {
    return copy_records(*source, from, file, offset);
  };
  const Result<std::vector<ColdLocation>> written = co_await write_records(std::move(copy));
  if (!written) {
    if (auto line = errors_logged_.occur()) {
      spdlog::error(
          "table '{}': compacting its file tier failed: {}; its segments stay as they "
          "are{}",
          table.name(), written.error().message, line->suffix());
    }
    if (!hosted.dropped) table.abandon_moves(rows);
    // Tried again at the next removal of a cold row, after the pause (the writer holds its
    // turn meanwhile): a full disk must not make every insert start a failing copy.
    co_await pause_after_error();
    co_return false;
  }
  const std::vector<ColdLocation>& where = written.value();
  const std::uint64_t bytes = total_bytes(where);
  stats_.rows_moved += rows.size();
  stats_.bytes_moved += bytes;
  if (hosted.dropped) co_return false;
  table.finish_moves(rows, where);
  // The victim empties with its last row moved: deleted now, not at the next change.
  if (table.tier()->segments_emptied() != emptied_seen_) delete_dead_segments(table);
  co_return true;
}

void FileTier::delete_dead_segments(const Table& table) {
  // A snapshot being written links the segments of its image: none may go meanwhile. The
  // next change after it ends deletes them.
  if (gate_ && gate_->writing()) {
    rescan_ = true;
    return;
  }
  emptied_seen_ = table.tier()->segments_emptied();
  rescan_ = false;
  for (auto it = segments_.begin(); it != segments_.end();) {
    const std::uint32_t id = it->first;
    if ((has_open_segment_ && id == open_segment_) || table.tier()->live_rows(id) != 0) {
      ++it;
      continue;
    }
    // The job holds the last reference: the descriptor is closed on the pool.
    pool_.submit([segment = std::move(it->second)] { ::unlink(segment->path.c_str()); });
    segment_bytes_.erase(id);
    it = segments_.erase(it);
    ++stats_.segments_deleted;
  }
}

std::vector<ColdRead> FileTier::take_cold_reads(
    const Table& table, const std::vector<ColdDraw>& cold,
    std::span<const std::span<std::byte>> columns,
    std::span<const std::span<std::byte>> bootstrap) const {
  const std::size_t fields = table.schema().size();
  const auto field_bytes = table.tier_field_bytes();
  // The bootstrap span of each field (-1: not a bootstrap field).
  std::vector<int> bootstrap_of(fields, -1);
  const auto& names = table.config().episodes.bootstrap_fields;
  for (std::size_t b = 0; b < bootstrap.size() && b < names.size(); ++b)
    bootstrap_of[static_cast<std::size_t>(table.schema().find(names[b]))] = static_cast<int>(b);
  std::vector<ColdRead> reads;
  reads.reserve(cold.size());
  for (const ColdDraw& draw : cold) {
    ColdRead read{segments_.at(draw.where.segment), draw.where, {}, {}};
    read.into.reserve(fields);
    for (std::size_t f = 0; f < fields; ++f) {
      const std::uint64_t bytes = table.storage().item_bytes(f);
      std::span<std::byte> target;
      if (draw.target == ColdTarget::columns) {
        target = columns[f];
      } else if (bootstrap_of[f] >= 0) {
        target = bootstrap[static_cast<std::size_t>(bootstrap_of[f])];
      }
      if (field_bytes[f] == 0) {
        read.into.push_back(&kNothing);
      } else if (!target.empty()) {
        read.into.push_back(target.data() + draw.row * bytes);
      } else {  // a field this read does not need: into its own scratch (set below)
        read.into.push_back(nullptr);
        read.scratch.resize(read.scratch.size() + bytes);
      }
    }
    std::uint64_t at = 0;
    for (std::size_t f = 0; f < fields; ++f) {
      if (read.into[f] != nullptr) continue;
      read.into[f] = read.scratch.data() + at;
      at += field_bytes[f];
    }
    reads.push_back(std::move(read));
  }
  return reads;
}

asio::awaitable<Status> FileTier::read_cold_into(const Table& table,
                                                 const std::vector<ColdDraw>& cold,
                                                 std::span<const std::span<std::byte>> columns,
                                                 std::span<const std::span<std::byte>> bootstrap) {
  std::vector<ColdRead> reads = take_cold_reads(table, cold, columns, bootstrap);
  co_return co_await read_cold(table, std::move(reads));
}

asio::awaitable<Status> FileTier::read_cold(const Table& table, std::vector<ColdRead> reads) {
  const auto written = table.tier_field_bytes();
  const std::vector<std::uint64_t> field_bytes(written.begin(), written.end());
  const std::uint64_t rows = reads.size();
  const auto started = std::chrono::steady_clock::now();
  // The destinations are the reply's columns, which nothing else touches until this
  // coroutine resumes; the server joins the pool before its io_context (and the suspended
  // coroutines with it) goes.
  std::function<Status()> job = [reads = std::move(reads), field_bytes]() mutable {
    return read_rows(reads, field_bytes);
  };
  const Status read = co_await run_on_pool(pool_, std::move(job));
  stats_.read_seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  ++stats_.read_batches;
  if (!read) {
    if (auto line = errors_logged_.occur()) {
      spdlog::error("table '{}': reading cold rows back failed: {}{}", table.name(),
                    read.error().message, line->suffix());
    }
    co_return read;
  }
  stats_.cold_reads += rows;
  co_return Ok{};
}

}  // namespace replayd::service
