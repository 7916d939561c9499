#include "replayd_client/episodes/episode_decoders.h"

#include <array>
#include <boost/json/object.hpp>
#include <string>

#include "replayd_client/pixels/pixel_frame_decoding.h"

namespace replayd::client {
namespace json = boost::json;

std::vector<std::uint64_t> decode_episode_ids(Reply&& reply, ReplyDecoder& decoder) {
  const json::object& meta = decoder.parse(reply);
  const json::value* ids = meta.if_contains("episodes");
  if (!ids || !ids->is_array()) {
    throw Error(ErrorCode::bad_reply, "an open_episodes reply without its 'episodes' array");
  }
  std::vector<std::uint64_t> out;
  out.reserve(ids->get_array().size());
  for (const auto& id : ids->get_array()) {
    if (!id.is_uint64() && !(id.is_int64() && id.get_int64() > 0)) {
      throw Error(ErrorCode::bad_reply, "an open_episodes reply with a bad episode id");
    }
    out.push_back(id.to_number<std::uint64_t>());
  }
  return out;
}

std::uint64_t decode_ended_episode(Reply&& reply, ReplyDecoder& decoder) {
  return reply_uint(decoder.parse(reply), "episode");
}

SequenceBatch decode_sequences(Reply&& reply, ReplyDecoder& decoder) {
  constexpr std::array<LeadingColumn, 5> kLeading{{{"key", DType::uint64},
                                                   {"probability", DType::float64},
                                                   {"weight", DType::float64},
                                                   {"times_sampled", DType::uint32},
                                                   {"mask", DType::uint8, false}}};
  const json::object& meta = decoder.parse(reply);
  const std::uint64_t length = reply_uint(meta, "length");
  const std::uint64_t burn_in = reply_uint(meta, "burn_in");
  const FrameColumns frames = frame_columns_of(meta, reply.payload.size());
  auto layout = column_layout(meta, kLeading, "sample_sequences", frames.column_count);
  const ColumnSpec& mask = layout->columns[4];
  if (mask.shape.size() != 2 || mask.shape[1] != burn_in + length) {
    throw Error(ErrorCode::bad_reply, "a sample_sequences reply whose mask is not [n, " +
                                          std::to_string(burn_in + length) + "]");
  }
  const std::optional<TableState> state = reply_state(meta);
  check_layout_fits(*layout, reply);
  DecodedFrameFields decoded;
  if (!frames.specs.empty()) {
    decoded = decode_sequence_frames(
        frames, reply.payload,
        {reply.payload.as<std::uint64_t>(layout->columns[0].offset), layout->n}, burn_in + length);
  }
  return SequenceBatch(ColumnSet(std::move(layout), std::move(reply.payload)), length, burn_in,
                       state, std::move(decoded));
}

StepPage decode_step_page(Reply&& reply, ReplyDecoder& decoder) {
  constexpr std::array<LeadingColumn, 5> kLeading{{{"key", DType::uint64},
                                                   {"episode", DType::uint64},
                                                   {"position", DType::uint32},
                                                   {"sequence", DType::uint64},
                                                   {"end", DType::uint8}}};
  const json::object& meta = decoder.parse(reply);
  const std::uint64_t next = reply_uint(meta, "next");
  auto layout = column_layout(meta, kLeading, "read_steps");
  check_layout_fits(*layout, reply);
  return StepPage(ColumnSet(std::move(layout), std::move(reply.payload)), next);
}

}  // namespace replayd::client
