#include "replayd_client/episodes/step_slots.h"

#include <utility>

#include "replayd_client/wire/wire_frame_codec.h"

namespace replayd::client {
namespace {

constexpr std::size_t kSlotAlignment = 64;  // each slot starts on a cache line

}  // namespace

std::unique_ptr<StepSlots> StepSlots::open(Client& client, std::span<const std::size_t> item_bytes,
                                           std::size_t rows, std::size_t slots) {
  if (!client.shm_offered()) return nullptr;
  std::vector<std::size_t> offsets;
  std::size_t offset = 0;
  for (const std::size_t bytes : item_bytes) {  // as a payload: each column aligned
    offsets.push_back(offset);
    offset += rows * bytes + padding_after(rows * bytes);
  }
  offsets.push_back(offset);  // the episode ids
  const std::size_t used = offset + rows * sizeof(std::uint64_t);
  const std::size_t slot_bytes = (used + kSlotAlignment - 1) / kSlotAlignment * kSlotAlignment;
  std::unique_ptr<StagingArena> arena;
  try {
    arena = client.map_staging(slot_bytes * slots);
  } catch (const Error& e) {
    // No plane, or the server's staging limits: an arena over the per-connection limit is
    // invalid_argument (the request is otherwise well formed), the limits of all the
    // arenas held resource_exhausted.
    if (e.code() == ErrorCode::permission_denied || e.code() == ErrorCode::resource_exhausted ||
        e.code() == ErrorCode::invalid_argument)
      return nullptr;
    throw;
  }
  return std::unique_ptr<StepSlots>(new StepSlots(std::move(arena),
                                                  {item_bytes.begin(), item_bytes.end()},
                                                  std::move(offsets), slot_bytes, rows, slots));
}

StepSlots::StepSlots(std::unique_ptr<StagingArena> arena, std::vector<std::size_t> item_bytes,
                     std::vector<std::size_t> offsets, std::size_t slot_bytes, std::size_t rows,
                     std::size_t slots)
    : arena_(std::move(arena)),
      item_bytes_(std::move(item_bytes)),
      offsets_(std::move(offsets)),
      slot_bytes_(slot_bytes),
      rows_(rows),
      named_by_(slots, 0) {
  if (arena_->bytes().size() < slot_bytes_ * slots) {
    throw Error(ErrorCode::bad_reply, "a staging arena smaller than the bytes asked for");
  }
}

std::span<std::uint64_t> StepSlots::episode_ids() {
  // The arena is page-aligned and every offset 8-aligned: the ids are aligned uint64s.
  return {reinterpret_cast<std::uint64_t*>(slot_begin() + offsets_.back()), rows_};
}

void StepSlots::advance(std::uint64_t sequence) {
  named_by_[current_] = sequence;
  current_ = (current_ + 1) % named_by_.size();
}

}  // namespace replayd::client
