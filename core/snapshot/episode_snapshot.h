// Snapshot sections of an episodic table's episodes (docs/SNAPSHOT.md): a TEPH header
// (next episode id, episode count, stream bytes, last insertion sequence), a TEPS stream
// with every live episode: id, writer, state, length, first stored position, and the slot
// of each position from there (or none); a TEPQ stream with each slot's insertion
// sequence (0 when free); a TWIX section with the window indexes built so far (their
// requirements and member counts, in creation order) and a TWIM stream with their members
// in draw order, so that a restored table draws exactly as the original.
// Pure functions; the caller must not mutate the table while writing.
#pragma once

#include "core/episodes/episode_index.h"
#include "core/result.h"
#include "core/snapshot/snapshot_sections.h"
#include "core/episodes/step_log.h"
#include "core/storage/storage.h"
#include "core/episodes/window_index.h"

namespace replayd {

Status write_episode_sections(const EpisodeIndex& episodes, const StepLog& log,
                              const WindowIndexSet& windows, SectionWriter& writer);

// Reads the sections into the empty `episodes` of a table whose items are restored in
// `storage`. Checks every value before use: states, lengths, positions, that each slot is
// occupied and belongs to exactly one episode, that every stored step belongs to one, that
// an ended episode keeps a stored step, the open-episode limit, that insertion sequences
// are distinct, at most the last one, and given exactly to the stored steps; that window
// requirements are well formed and distinct, and each index's members are exactly its
// valid starts (O(capacity * (L + B)) per index).
// Errors: invalid_argument.
Status read_episode_sections(SectionReader& reader, const Storage& storage,
                             std::size_t max_open_episodes, EpisodeIndex& episodes, StepLog& log,
                             WindowIndexSet& windows);

}  // namespace replayd
