#include "w3_frames.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <random>

namespace replayd::loadgen {
namespace {

constexpr int kSide = static_cast<int>(kW3Side);
constexpr int kWallTop = 11, kWallBottom = 13, kWallSide = 4, kFloorTop = 80;
constexpr int kPlayLeft = kWallSide, kPlayRight = kSide - kWallSide;
constexpr int kBrickTop = 16, kBrickRows = 6, kBrickHeight = 3, kBrickWidth = 8;
constexpr int kBrickBottom = kBrickTop + kBrickRows * kBrickHeight;
constexpr int kPaddleY = 76, kPaddleHeight = 2, kPaddleWidth = 12, kBall = 2;
constexpr int kEnemyTop = 40, kEnemyBottom = 70, kEnemyPoseFrames = 8;
constexpr std::array<std::uint8_t, kBrickRows> kBrickGreys{200, 180, 160, 128, 110, 90};
constexpr std::uint8_t kWallGrey = 142, kFloorGrey = 74, kBallGrey = 236, kPaddleGrey = 200,
                       kEnemyGrey = 170, kDigitGrey = 214;
// 3x5 digits, 15 bits each (rows top to bottom), drawn at twice their size.
constexpr std::array<const char*, 10> kFont{
    "111101101101111", "010110010010111", "111001111100111", "111001111001111", "101101111001001",
    "111100111001111", "111100111101111", "111001001001001", "111101111101111", "111101111001111"};
constexpr std::array<std::array<const char*, 5>, 2> kEnemyPoses{
    {{"0011100", "0111110", "1101011", "1111111", "0100010"},
     {"0011100", "0111110", "1101011", "1111111", "1000001"}}};

using Frame = std::vector<std::uint8_t>;

void fill(Frame& frame, int top, int bottom, int left, int right, std::uint8_t grey) {
  for (int y = std::max(top, 0); y < std::min(bottom, kSide); ++y) {
    for (int x = std::max(left, 0); x < std::min(right, kSide); ++x)
      frame[static_cast<std::size_t>(y * kSide + x)] = grey;
  }
}

void digit(Frame& frame, int top, int left, int value) {
  for (int r = 0; r < 5; ++r) {
    for (int c = 0; c < 3; ++c) {
      const bool on = kFont[static_cast<std::size_t>(value)][r * 3 + c] == '1';
      fill(frame, top + 2 * r, top + 2 * r + 2, left + 2 * c, left + 2 * c + 2,
           on ? kDigitGrey : 0);
    }
  }
}

Frame background(std::mt19937_64& random) {
  Frame frame(kW3FrameBytes, 0);
  fill(frame, kWallTop, kWallBottom, 0, kSide, kWallGrey);
  fill(frame, kWallTop, kFloorTop, 0, kWallSide, kWallGrey);
  fill(frame, kWallTop, kFloorTop, kSide - kWallSide, kSide, kWallGrey);
  fill(frame, kFloorTop, kSide, 0, kSide, kFloorGrey);
  std::uniform_real_distribution<double> unit(0, 1);
  for (int row = 0; row < kBrickRows; ++row) {
    const int y = kBrickTop + row * kBrickHeight;
    fill(frame, y, y + kBrickHeight, kPlayLeft, kPlayRight, kBrickGreys[row]);
    fill(frame, y + kBrickHeight - 1, y + kBrickHeight, kPlayLeft, kPlayRight, 0);
    for (int x = kPlayLeft; x + kBrickWidth <= kPlayRight; x += kBrickWidth) {
      if (unit(random) < 0.12) fill(frame, y, y + kBrickHeight, x, x + kBrickWidth, 0);
    }
  }
  digit(frame, 0, 72, 3);  // lives
  return frame;
}

// Position in [lo, hi] at time t of a point moving at `speed` px/frame, reflecting off lo
// and hi; `phase` is its unfolded position at t = 0.
int bounce(double phase, double speed, int lo, int hi, double t) {
  const double span = hi - lo;
  const double u = std::fmod(phase + speed * t, 2 * span);
  return lo + static_cast<int>(u < span ? u : 2 * span - u);
}

struct Enemy {
  double phase_y, speed_y, phase_x, speed_x;
  int lane_top, bob;
};

// Frames 0..length of episode `seed`, appended to `out` until it holds `limit` bytes.
void episode(std::uint64_t seed, std::size_t length, std::vector<std::uint8_t>& out,
             std::size_t limit) {
  std::mt19937_64 random(seed);
  std::uniform_real_distribution<double> unit(0, 1);
  auto uniform = [&](double lo, double hi) { return lo + (hi - lo) * unit(random); };
  const Frame base = background(random);
  const int span_y = kPaddleY - kBall - kBrickBottom;
  const double ball_phase_y = uniform(0, 2 * span_y), ball_speed_y = uniform(0.9, 1.7);
  const int span_x = kPlayRight - kBall - kPlayLeft;
  const double ball_phase_x = uniform(0, 2 * span_x), ball_speed_x = uniform(0.6, 1.4);
  const int lag = 2 + static_cast<int>(random() % 5);
  const int enemies = 2 + static_cast<int>(random() % 3);
  const int lane = (kEnemyBottom - kEnemyTop) / enemies;
  std::vector<Enemy> sprites;
  for (int e = 0; e < enemies; ++e) {
    const int bob = std::max(lane - 6, 1);
    const int span = kPlayRight - 7 - kPlayLeft;
    sprites.push_back({uniform(0, 2 * bob), uniform(0.1, 0.3), uniform(0, 2 * span),
                       uniform(0.3, 1.0), kEnemyTop + e * lane, bob});
  }
  for (std::size_t step = 0; step <= length && out.size() < limit; ++step) {
    const double t = static_cast<double>(step);
    Frame frame = base;
    const int pose = static_cast<int>(step / kEnemyPoseFrames) % 2;
    for (const Enemy& enemy : sprites) {
      const int y =
          bounce(enemy.phase_y, enemy.speed_y, enemy.lane_top, enemy.lane_top + enemy.bob, t);
      const int x = bounce(enemy.phase_x, enemy.speed_x, kPlayLeft, kPlayRight - 7, t);
      for (int r = 0; r < 5; ++r) {
        for (int c = 0; c < 7; ++c) {
          if (kEnemyPoses[static_cast<std::size_t>(pose)][r][c] == '1')
            fill(frame, y + r, y + r + 1, x + c, x + c + 1, kEnemyGrey);
        }
      }
    }
    const int ball_y = bounce(ball_phase_y, ball_speed_y, kBrickBottom, kPaddleY - kBall, t);
    const int ball_x = bounce(ball_phase_x, ball_speed_x, kPlayLeft, kPlayRight - kBall, t);
    fill(frame, ball_y, ball_y + kBall, ball_x, ball_x + kBall, kBallGrey);
    const int followed =
        bounce(ball_phase_x, ball_speed_x, kPlayLeft, kPlayRight - kBall, std::max(t - lag, 0.0));
    const int paddle_x =
        std::clamp(followed + kBall / 2 - kPaddleWidth / 2, kPlayLeft, kPlayRight - kPaddleWidth);
    fill(frame, kPaddleY, kPaddleY + kPaddleHeight, paddle_x, paddle_x + kPaddleWidth, kPaddleGrey);
    // The score: turns of the ball at the bricks so far.
    const double period = 2.0 * span_y;
    const auto score = static_cast<int>(std::floor((ball_phase_y + ball_speed_y * t) / period) -
                                        std::floor(ball_phase_y / period));
    for (int k = 0; k < 3; ++k) {
      const int power = k == 0 ? 100 : (k == 1 ? 10 : 1);
      digit(frame, 0, 6 + 8 * k, (score / power) % 10);
    }
    out.insert(out.end(), frame.begin(), frame.end());
  }
}

}  // namespace

std::vector<std::uint8_t> w3_frame_pool(std::uint64_t seed, std::size_t count) {
  std::vector<std::uint8_t> pool;
  const std::size_t limit = count * kW3FrameBytes;
  pool.reserve(limit);
  std::mt19937_64 lengths(seed);
  for (std::uint64_t e = 0; pool.size() < limit; ++e)
    episode(seed + e, 200 + lengths() % 1801, pool, limit);
  return pool;
}

}  // namespace replayd::loadgen
