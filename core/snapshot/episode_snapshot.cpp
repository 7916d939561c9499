#include "core/snapshot/episode_snapshot.h"

#include <algorithm>
#include <vector>

namespace replayd {
namespace {

constexpr std::uint32_t kEpisodeHeader = section_tag("TEPH");
constexpr std::uint32_t kEpisodeStream = section_tag("TEPS");
constexpr std::uint32_t kSequenceStream = section_tag("TEPQ");
constexpr std::uint32_t kWindowHeader = section_tag("TWIX");
constexpr std::uint32_t kWindowMembers = section_tag("TWIM");
// id u64, writer u64, state u8, length u32, first u32, slot count u32.
constexpr std::uint64_t kEpisodeRecordBytes = 8 + 8 + 1 + 4 + 4 + 4;

Error bad(const std::string& what) {
  return make_error(ErrorCode::invalid_argument, what);
}

Status write_window_sections(const WindowIndexSet& windows, SectionWriter& writer) {
  ByteWriter header;
  header.u32(static_cast<std::uint32_t>(windows.size()));
  for (std::size_t i = 0; i < windows.size(); ++i) {
    const WindowSpec& spec = windows.at(i).spec();
    header.u32(spec.forward);
    header.u8(spec.allow_short ? 1 : 0);
    header.u32(spec.stride);
    header.u32(spec.backward);
    header.u32(windows.at(i).size());
  }
  REPLAYD_RETURN_IF_ERROR(writer.section(kWindowHeader, header.data()));
  writer.begin_stream(kWindowMembers);
  Status status = Ok{};
  for (std::size_t i = 0; i < windows.size(); ++i) {
    windows.at(i).for_each_member([&](std::uint32_t slot) {
      if (status) status = writer.append_value(slot);
    });
  }
  REPLAYD_RETURN_IF_ERROR(status);
  return writer.end_stream();
}

Status read_window_sections(SectionReader& reader, const Storage& storage,
                            WindowIndexSet& windows) {
  REPLAYD_ASSIGN_OR_RETURN(auto header_bytes, reader.section(kWindowHeader));
  ByteReader header(header_bytes);
  std::uint32_t count = 0;
  if (!header.u32(count) || count > WindowIndexSet::kMaxIndexes) {
    return bad("section TWIX: more window indexes than the limit, or cut short");
  }
  std::vector<WindowSpec> specs(count);
  std::vector<std::uint32_t> members(count);
  std::uint64_t total = 0;
  for (std::uint32_t i = 0; i < count; ++i) {
    std::uint8_t allow_short = 0;
    WindowSpec& spec = specs[i];
    if (!header.u32(spec.forward) || !header.u8(allow_short) || !header.u32(spec.stride) ||
        !header.u32(spec.backward) || !header.u32(members[i])) {
      return bad("section TWIX: cut short");
    }
    spec.allow_short = allow_short == 1;
    if (spec.forward == 0 || spec.forward > storage.capacity() || allow_short > 1 ||
        spec.stride == 0 || spec.backward > storage.capacity() || members[i] > storage.size() ||
        std::find(specs.begin(), specs.begin() + i, spec) != specs.begin() + i) {
      return bad("section TWIX: window index " + std::to_string(i) + " is malformed");
    }
    total += members[i];
  }
  if (header.remaining() != 0) return bad("section TWIX: unexpected bytes");
  reader.begin_stream(kWindowMembers, 4 * total);
  for (std::uint32_t i = 0; i < count; ++i) {
    WindowIndex& index = windows.add_empty(specs[i]);
    for (std::uint32_t m = 0; m < members[i]; ++m) {
      std::uint32_t slot = 0;
      REPLAYD_RETURN_IF_ERROR(reader.read_value(slot));
      if (slot >= storage.capacity() || !storage.occupied(slot) || index.contains(slot) ||
          !index.is_valid(slot)) {
        return bad("section TWIM: window index " + std::to_string(i) + ": slot " +
                   std::to_string(slot) + " is not a valid start or is listed twice");
      }
      index.restore_member(slot);
    }
    if (index.size() != index.count_valid()) {
      return bad("section TWIM: window index " + std::to_string(i) + " misses valid starts");
    }
  }
  return reader.end_stream();
}

}  // namespace

Status write_episode_sections(const EpisodeIndex& episodes, const StepLog& log,
                              const WindowIndexSet& windows, SectionWriter& writer) {
  std::uint64_t count = 0;
  std::uint64_t bytes = 0;
  episodes.for_each([&](std::uint64_t, const Episode& episode) {
    ++count;
    bytes += kEpisodeRecordBytes + 4 * episode.slots.size();
  });
  ByteWriter header;
  header.u64(episodes.next_id());
  header.u64(count);
  header.u64(bytes);
  header.u64(log.last_sequence());
  REPLAYD_RETURN_IF_ERROR(writer.section(kEpisodeHeader, header.data()));
  writer.begin_stream(kEpisodeStream);
  Status status = Ok{};
  episodes.for_each([&](std::uint64_t id, const Episode& episode) {
    const auto state = static_cast<std::uint8_t>(episode.state);
    const auto slots = static_cast<std::uint32_t>(episode.slots.size());
    if (status) status = writer.append_value(id);
    if (status) status = writer.append_value(episode.writer);
    if (status) status = writer.append_value(state);
    if (status) status = writer.append_value(episode.length);
    if (status) status = writer.append_value(episode.first);
    if (status) status = writer.append_value(slots);
    for (auto slot : episode.slots) {
      if (status) status = writer.append_value(slot);
    }
  });
  REPLAYD_RETURN_IF_ERROR(status);
  REPLAYD_RETURN_IF_ERROR(writer.end_stream());
  writer.begin_stream(kSequenceStream);
  for (std::uint32_t slot = 0; slot < episodes.capacity(); ++slot) {
    REPLAYD_RETURN_IF_ERROR(writer.append_value(log.sequence(slot)));
  }
  REPLAYD_RETURN_IF_ERROR(writer.end_stream());
  return write_window_sections(windows, writer);
}

Status read_episode_sections(SectionReader& reader, const Storage& storage,
                             std::size_t max_open_episodes, EpisodeIndex& episodes, StepLog& log,
                             WindowIndexSet& windows) {
  REPLAYD_ASSIGN_OR_RETURN(auto header_bytes, reader.section(kEpisodeHeader));
  ByteReader header(header_bytes);
  std::uint64_t next_id = 0, count = 0, bytes = 0, last_sequence = 0;
  if (!header.u64(next_id) || !header.u64(count) || !header.u64(bytes) ||
      !header.u64(last_sequence) || header.remaining()) {
    return bad("section TEPH: header is cut short or too long");
  }
  // Each live episode owns a stored step or is open; both are bounded.
  const std::uint64_t most = std::uint64_t{storage.capacity()} + max_open_episodes;
  if (count > most || bytes > count * kEpisodeRecordBytes + 4 * (most + storage.capacity()) ||
      next_id == 0) {
    return bad("section TEPH: " + std::to_string(count) + " episodes in " + std::to_string(bytes) +
               " bytes exceed what the table can hold");
  }
  std::vector<std::uint8_t> claimed(storage.capacity(), 0);
  std::uint64_t claimed_count = 0;
  std::size_t open = 0;
  std::uint64_t previous_id = 0;
  reader.begin_stream(kEpisodeStream, bytes);
  for (std::uint64_t e = 0; e < count; ++e) {
    std::uint64_t id = 0;
    Episode episode;
    std::uint8_t state = 0;
    std::uint32_t slots = 0;
    REPLAYD_RETURN_IF_ERROR(reader.read_value(id));
    REPLAYD_RETURN_IF_ERROR(reader.read_value(episode.writer));
    REPLAYD_RETURN_IF_ERROR(reader.read_value(state));
    REPLAYD_RETURN_IF_ERROR(reader.read_value(episode.length));
    REPLAYD_RETURN_IF_ERROR(reader.read_value(episode.first));
    REPLAYD_RETURN_IF_ERROR(reader.read_value(slots));
    const std::string who = "section TEPS: episode " + std::to_string(id) + ": ";
    if (id <= previous_id || id >= next_id) return bad(who + "id out of order or range");
    previous_id = id;
    if (state > 2) return bad(who + "unknown state " + std::to_string(state));
    episode.state = static_cast<EpisodeState>(state);
    if (episode.length > EpisodeIndex::kMaxEpisodeLength || episode.first > episode.length ||
        slots != episode.length - episode.first || slots > storage.capacity()) {
      return bad(who + "positions disagree (length, first stored, slots)");
    }
    for (std::uint32_t i = 0; i < slots; ++i) {
      std::uint32_t slot = 0;
      REPLAYD_RETURN_IF_ERROR(reader.read_value(slot));
      if (slot != EpisodeIndex::kNoSlot) {
        if (slot >= storage.capacity() || !storage.occupied(slot) || claimed[slot]) {
          return bad(who + "slot " + std::to_string(slot) + " is free or claimed twice");
        }
        claimed[slot] = 1;
        ++claimed_count;
        ++episode.stored;
      } else if (i == 0) {
        return bad(who + "its first listed step is not stored");
      }
      episode.slots.push_back(slot);
    }
    if (episode.ended() && episode.stored == 0) return bad(who + "ended with no stored step");
    if (!episode.ended() && ++open > max_open_episodes) return bad(who + "too many open episodes");
    episodes.restore(id, std::move(episode));
  }
  REPLAYD_RETURN_IF_ERROR(reader.end_stream());
  if (claimed_count != storage.size()) {
    return bad("section TEPS: " + std::to_string(storage.size() - claimed_count) +
               " stored steps belong to no episode");
  }
  std::vector<std::uint64_t> sequences(storage.capacity(), 0);
  reader.begin_stream(kSequenceStream, std::uint64_t{8} * storage.capacity());
  for (auto& sequence : sequences)
    REPLAYD_RETURN_IF_ERROR(reader.read_value(sequence));
  REPLAYD_RETURN_IF_ERROR(reader.end_stream());
  std::vector<std::uint64_t> sorted;
  for (std::uint32_t slot = 0; slot < storage.capacity(); ++slot) {
    if ((sequences[slot] != 0) != storage.occupied(slot) || sequences[slot] > last_sequence) {
      return bad("section TEPQ: slot " + std::to_string(slot) +
                 ": insertion sequence disagrees with the stored steps");
    }
    if (sequences[slot] != 0) sorted.push_back(sequences[slot]);
  }
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) {
    return bad("section TEPQ: two steps share an insertion sequence");
  }
  episodes.set_next_id(next_id);
  log.restore(std::move(sequences), last_sequence);
  return read_window_sections(reader, storage, windows);
}

}  // namespace replayd
