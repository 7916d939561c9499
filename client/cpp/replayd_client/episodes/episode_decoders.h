// Decoders of the episodic operations' replies (docs/PROTOCOL.md, "Episodic tables"), in
// the shape of reply_decoder.h: each turns a successful reply into its result or throws
// Error (the server's code for an error reply, bad_reply for one that breaks the protocol).
// Threading: run on a connection's reader thread with its ReplyDecoder.
#pragma once

#include <cstdint>
#include <vector>

#include "replayd_client/wire/buffer.h"
#include "replayd_client/episodes/episode_results.h"
#include "replayd_client/wire/reply_decoder.h"

namespace replayd::client {

// open_episodes: the new episodes' ids.
std::vector<std::uint64_t> decode_episode_ids(Reply&& reply, ReplyDecoder& decoder);
// end_episode: the ended episode's id.
std::uint64_t decode_ended_episode(Reply&& reply, ReplyDecoder& decoder);
SequenceBatch decode_sequences(Reply&& reply, ReplyDecoder& decoder);
StepPage decode_step_page(Reply&& reply, ReplyDecoder& decoder);

}  // namespace replayd::client
