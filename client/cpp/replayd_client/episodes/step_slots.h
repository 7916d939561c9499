// StepSlots: an EpisodeWriter's batches of steps in a staging arena of its connection (the
// shared-memory data plane, docs/SHM.md). The arena holds `slots` slots used in turn, each
// one batch of `rows` steps laid out as an append_steps payload of `rows` rows: every
// field's column (8-aligned), then the steps' episode ids. The writer copies each step's
// values straight into the current slot, names the slot in a staged append_steps (the
// server copies the rows from it when the request is admitted) and moves on to the next.
// A slot is written again only after the reply of the request that named it: `advance`
// records that request, `busy_until` tells the writer which reply to wait for.
// Ownership: owns the arena's mapping; the server releases the arena with the connection.
// Threading: one writer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "replayd_client/client.h"
#include "replayd_client/shm/table_mapping.h"

namespace replayd::client {

class StepSlots {
 public:
  // A new arena on `client` for `slots` batches of `rows` steps of fields of `item_bytes`
  // each (in table order), or null when the connection has no plane or the server's staging
  // limits (max_staging_bytes_per_connection, max_staging_bytes) refuse the arena: the
  // writer then sends its steps through the socket. One round trip when the plane is
  // offered. Throws other errors of map_staging (connection_lost).
  static std::unique_ptr<StepSlots> open(Client& client, std::span<const std::size_t> item_bytes,
                                         std::size_t rows, std::size_t slots);

  // Where step `row` of field `field` goes in the current slot (item_bytes[field] bytes).
  std::byte* cell(std::size_t field, std::size_t row) {
    return slot_begin() + offsets_[field] + row * item_bytes_[field];
  }
  // The first `count` rows of `field` in the current slot.
  std::span<const std::byte> column(std::size_t field, std::size_t count) {
    return {cell(field, 0), count * item_bytes_[field]};
  }
  // The current slot's episode-id column (`rows` ids; the first n name the steps).
  std::span<std::uint64_t> episode_ids();
  // The "staged" member naming the current slot.
  StagedInsert staged() const { return {arena_.get(), current_ * slot_bytes_, rows_}; }

  // The request of writer sequence `sequence` names the current slot: moves to the next.
  void advance(std::uint64_t sequence);
  // The writer sequence whose reply frees the current slot (0: none is pending).
  std::uint64_t busy_until() const { return named_by_[current_]; }

 private:
  StepSlots(std::unique_ptr<StagingArena> arena, std::vector<std::size_t> item_bytes,
            std::vector<std::size_t> offsets, std::size_t slot_bytes, std::size_t rows,
            std::size_t slots);
  std::byte* slot_begin() const { return arena_->bytes().data() + current_ * slot_bytes_; }

  std::unique_ptr<StagingArena> arena_;
  std::vector<std::size_t> item_bytes_;
  std::vector<std::size_t> offsets_;  // of each field's column in a slot; last: episode ids
  std::size_t slot_bytes_ = 0;
  std::size_t rows_ = 0;
  std::size_t current_ = 0;
  std::vector<std::uint64_t> named_by_;  // per slot: the sequence of the last request naming it
};

}  // namespace replayd::client
