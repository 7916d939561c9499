// W3 frames: Atari-like grayscale u8[84, 84] screens (after bench/python/w3_frames.py): a
// fixed Breakout-like background (HUD, walls, brick bands with a few seeded bricks missing,
// floor) and moving sprites on seeded trajectories that bounce off the walls (a ball, a
// paddle following it a few frames late, 2-4 two-pose "invaders") plus a score that
// counts the ball's bounces off the bricks. No pixel noise: frames compress as real Atari
// frames do (zstd level 3: well over 14x). Pure functions.
#pragma once

#include <cstdint>
#include <vector>

namespace replayd::loadgen {

inline constexpr std::size_t kW3Side = 84;
inline constexpr std::size_t kW3FrameBytes = kW3Side * kW3Side;

// `count` frames, kW3FrameBytes each, back to back: whole episodes of 200..2000 frames
// (seeds seed, seed + 1, ...) laid end to end, the last one cut at `count`.
std::vector<std::uint8_t> w3_frame_pool(std::uint64_t seed, std::size_t count);

}  // namespace replayd::loadgen
