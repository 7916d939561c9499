"""W3: Atari-like episodes for benchmarks (grayscale u8[84, 84] frames, no noise).

Each frame is a Breakout-like screen, drawn the same way for every seed:

- a fixed background: a black playfield; a HUD band on top (rows 0-10) holding the score
  (three digits, left) and a static lives digit (right); a grey top wall (rows 11-12) and
  side walls (columns 0-3 and 80-83); six bands of bricks (rows 16-33), one grey level per
  band, a 1-pixel black line under each band and a few seeded bricks (8 pixels wide)
  missing; a floor (rows 80-83).
- moving sprites on deterministic, seeded trajectories that bounce off the walls: a 2x2
  ball between the bricks and the paddle, a 2x12 paddle that follows the ball a few frames
  late, and 2-4 "invader" enemies (7x5 bitmaps, two animation poses) sweeping
  horizontally in their own lanes and bobbing vertically.
- the score, in a 3x5 bitmap font drawn at twice its size: it counts the ball's bounces
  off the bricks, and `rewards` is 1.0 on exactly the transitions where it goes up.

Frames do not react to actions: `actions` draws them independently (a workload, not an
environment). Everything is a function of the seed; no pixel noise is ever added, so each
frame compresses as a real Atari frame does (mostly flat runs and repeated rows).

    frames = episode_frames(seed, length)   # (length + 1, 84, 84): obs 0..length
    rew = rewards(seed, length)             # (length,) float32, transition t: frame t -> t+1
    act = actions(rng, length)              # (length,) int32 in [0, 18)
    pool = frame_pool(seed, count)          # (count, 84, 84) precomputed, to be cycled
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import numpy as np

__all__ = ["H", "W", "W3Episode", "episode_frames", "episode_lengths", "actions", "rewards",
           "score", "frame_pool"]

H = W = 84
MIN_LENGTH, MAX_LENGTH = 200, 2000
NUM_ACTIONS = 18

# Screen layout (rows and columns, end exclusive).
HUD_END = 11
WALL_TOP, WALL_BOTTOM = 11, 13
SIDE = 4                              # side wall width
PLAY_LEFT, PLAY_RIGHT = SIDE, W - SIDE
BRICK_TOP, BRICK_ROWS, BRICK_H, BRICK_W = 16, 6, 3, 8
BRICK_BOTTOM = BRICK_TOP + BRICK_ROWS * BRICK_H
FLOOR_TOP = 80
PADDLE_Y, PADDLE_H, PADDLE_W = 76, 2, 12
BALL = 2
ENEMY_TOP, ENEMY_BOTTOM = 40, 70      # enemies' vertical range (top rows of their bitmaps)

WALL_GREY, FLOOR_GREY, BAND_GAP_GREY = 142, 74, 0
BRICK_GREYS = (200, 180, 160, 128, 110, 90)
BALL_GREY, PADDLE_GREY, ENEMY_GREY, DIGIT_GREY = 236, 200, 170, 214

# 3x5 font, digits 0-9, one string of 15 bits per digit (rows top to bottom).
_FONT_BITS = ("111101101101111", "010110010010111", "111001111100111", "111001111001111",
              "101101111001001", "111100111001111", "111100111101111", "111001001001001",
              "111101111101111", "111101111001111")
_FONT_SCALE = 2
FONT = np.array([[int(b) for b in bits] for bits in _FONT_BITS], np.uint8).reshape(10, 5, 3)
# Glyphs as drawn: (10, 10, 6) grey images on black.
GLYPHS = (np.kron(FONT, np.ones((_FONT_SCALE, _FONT_SCALE), np.uint8)) * DIGIT_GREY).astype(np.uint8)
SCORE_DIGITS, SCORE_X, DIGIT_Y, DIGIT_STEP = 3, 6, 0, 8
LIVES_X, LIVES = 72, 3

# Enemy bitmaps, two poses (7 wide, 5 tall), swapped every ENEMY_POSE_FRAMES frames.
_ENEMY_POSES = (("0011100", "0111110", "1101011", "1111111", "0100010"),
                ("0011100", "0111110", "1101011", "1111111", "1000001"))
ENEMY_POSES = [np.array([[int(c) for c in row] for row in pose], bool) for pose in _ENEMY_POSES]
ENEMY_POSE_FRAMES = 8


def _background(rng: np.random.Generator) -> np.ndarray:
    """The static screen: HUD, walls, floor, brick bands (a few seeded bricks missing)."""
    bg = np.zeros((H, W), np.uint8)
    bg[WALL_TOP:WALL_BOTTOM, :] = WALL_GREY
    bg[WALL_TOP:FLOOR_TOP, :SIDE] = WALL_GREY
    bg[WALL_TOP:FLOOR_TOP, W - SIDE:] = WALL_GREY
    bg[FLOOR_TOP:, :] = FLOOR_GREY
    bricks_per_row = (PLAY_RIGHT - PLAY_LEFT) // BRICK_W
    for row, grey in enumerate(BRICK_GREYS):
        y = BRICK_TOP + row * BRICK_H
        bg[y:y + BRICK_H, PLAY_LEFT:PLAY_RIGHT] = grey
        bg[y + BRICK_H - 1, PLAY_LEFT:PLAY_RIGHT] = BAND_GAP_GREY   # a black line under the band
        for col in np.flatnonzero(rng.random(bricks_per_row) < 0.12):
            x = PLAY_LEFT + col * BRICK_W
            bg[y:y + BRICK_H, x:x + BRICK_W] = 0
    bg[DIGIT_Y:DIGIT_Y + GLYPHS.shape[1], LIVES_X:LIVES_X + GLYPHS.shape[2]] = GLYPHS[LIVES]
    return bg


def _bounce(start: float, speed: float, lo: int, hi: int, t: np.ndarray) -> np.ndarray:
    """Integer positions in [lo, hi] at times t of a point moving at `speed` px/frame that
    reflects off lo and hi; `start` in [0, 2 * (hi - lo)) is its unfolded phase at t = 0."""
    span = hi - lo
    u = np.mod(start + speed * t, 2 * span)
    return (lo + np.where(u < span, u, 2 * span - u)).astype(np.intp)


@dataclass(frozen=True)
class _Trajectory:
    """Everything that moves, for frames 0..length (arrays of length + 1)."""

    background: np.ndarray
    ball_y: np.ndarray
    ball_x: np.ndarray
    paddle_x: np.ndarray
    enemy_y: np.ndarray            # (enemies, length + 1)
    enemy_x: np.ndarray
    score: np.ndarray              # int, non-decreasing, +1 per bounce off the bricks


def _trajectory(seed: int, length: int) -> _Trajectory:
    rng = np.random.default_rng(seed)
    background = _background(rng)
    t = np.arange(length + 1, dtype=np.float64)

    # Ball: vertical motion between the bricks and the paddle. Its unfolded coordinate
    # s = start + speed * t passes a multiple of 2 * span exactly when the ball turns at the
    # top (the bricks): that count is the score.
    lo_y, hi_y = BRICK_BOTTOM, PADDLE_Y - BALL
    span_y = hi_y - lo_y
    start_y, speed_y = rng.uniform(0, 2 * span_y), rng.uniform(0.9, 1.7)
    ball_y = _bounce(start_y, speed_y, lo_y, hi_y, t)
    unfolded = start_y + speed_y * t
    score = (np.floor(unfolded / (2 * span_y)) - np.floor(start_y / (2 * span_y))).astype(np.int64)
    span_x = PLAY_RIGHT - BALL - PLAY_LEFT
    ball_x = _bounce(rng.uniform(0, 2 * span_x), rng.uniform(0.6, 1.4), PLAY_LEFT,
                     PLAY_RIGHT - BALL, t)

    # Paddle: centred on where the ball was `lag` frames ago, kept inside the walls.
    lag = int(rng.integers(2, 7))
    followed = np.concatenate([np.full(lag, ball_x[0]), ball_x[:-lag]]) if length + 1 > lag \
        else np.full(length + 1, ball_x[0])
    paddle_x = np.clip(followed + BALL // 2 - PADDLE_W // 2, PLAY_LEFT, PLAY_RIGHT - PADDLE_W)

    enemies = int(rng.integers(2, 5))
    lane = (ENEMY_BOTTOM - ENEMY_TOP) // enemies
    eh, ew = ENEMY_POSES[0].shape
    enemy_y = np.empty((enemies, length + 1), np.intp)
    enemy_x = np.empty((enemies, length + 1), np.intp)
    for e in range(enemies):
        lane_top = ENEMY_TOP + e * lane
        bob = max(lane - eh - 1, 1)
        enemy_y[e] = _bounce(rng.uniform(0, 2 * bob), rng.uniform(0.1, 0.3), lane_top,
                             lane_top + bob, t)
        span = PLAY_RIGHT - ew - PLAY_LEFT
        enemy_x[e] = _bounce(rng.uniform(0, 2 * span), rng.uniform(0.3, 1.0), PLAY_LEFT,
                             PLAY_RIGHT - ew, t)
    return _Trajectory(background, ball_y, ball_x, paddle_x, enemy_y, enemy_x, score)


def _paint(frames: np.ndarray, rows: np.ndarray, ys: np.ndarray, xs: np.ndarray,
           mask: np.ndarray, grey: int) -> None:
    """frames[rows[i]] gets `mask` painted in `grey` with its top-left corner at
    (ys[i], xs[i]): one fancy-indexed assignment for all frames."""
    dy, dx = np.nonzero(mask)
    frames[rows[:, None], ys[:, None] + dy, xs[:, None] + dx] = grey


def episode_frames(seed: int, length: int) -> np.ndarray:
    """Frames 0..length of the episode `seed` (length + 1 of them: the last one is the
    final observation), u8 (length + 1, 84, 84)."""
    tr = _trajectory(seed, length)
    n = length + 1
    frames = np.empty((n, H, W), np.uint8)
    frames[:] = tr.background
    every = np.arange(n)
    pose = (every // ENEMY_POSE_FRAMES) % len(ENEMY_POSES)
    for e in range(tr.enemy_y.shape[0]):
        for p, bitmap in enumerate(ENEMY_POSES):
            rows = every[pose == p]
            _paint(frames, rows, tr.enemy_y[e, rows], tr.enemy_x[e, rows], bitmap, ENEMY_GREY)
    _paint(frames, every, tr.ball_y, tr.ball_x, np.ones((BALL, BALL), bool), BALL_GREY)
    _paint(frames, every, np.full(n, PADDLE_Y), tr.paddle_x,
           np.ones((PADDLE_H, PADDLE_W), bool), PADDLE_GREY)
    gh, gw = GLYPHS.shape[1:]
    for k in range(SCORE_DIGITS):                      # most significant digit first
        digit = (tr.score // 10 ** (SCORE_DIGITS - 1 - k)) % 10
        x = SCORE_X + k * DIGIT_STEP
        frames[:, DIGIT_Y:DIGIT_Y + gh, x:x + gw] = GLYPHS[digit]
    return frames


def score(seed: int, length: int) -> np.ndarray:
    """The score shown by frames 0..length (int64, length + 1)."""
    return _trajectory(seed, length).score


def rewards(seed: int, length: int) -> np.ndarray:
    """Reward of transitions 0..length-1 (frame t -> t + 1): 1.0 where the score goes up,
    else 0.0; float32 (length,)."""
    return np.diff(score(seed, length)).astype(np.float32)


def episode_lengths(rng: np.random.Generator, count: int) -> np.ndarray:
    """`count` episode lengths (steps), uniform in [200, 2000]."""
    return rng.integers(MIN_LENGTH, MAX_LENGTH + 1, count)


def actions(rng: np.random.Generator, length: int) -> np.ndarray:
    """`length` actions, int32 uniform in [0, 18) (the full Atari action set)."""
    return rng.integers(0, NUM_ACTIONS, length).astype(np.int32)


class W3Episode:
    """One episode: frames 0..length, and its transitions' actions, rewards and done."""

    def __init__(self, seed: int, length: int):
        self.seed, self.length = seed, length

    def frames(self) -> Iterator[np.ndarray]:
        """Yields the length + 1 frames (u8[84, 84] each) in order."""
        yield from episode_frames(self.seed, self.length)

    def actions(self) -> np.ndarray:
        return actions(np.random.default_rng([self.seed, 1]), self.length)

    def rewards(self) -> np.ndarray:
        return rewards(self.seed, self.length)

    def dones(self) -> np.ndarray:
        """u8 (length,): 1 on the last transition only."""
        done = np.zeros(self.length, np.uint8)
        done[-1:] = 1
        return done


def frame_pool(seed: int, count: int) -> np.ndarray:
    """`count` frames, u8 (count, 84, 84): whole episodes (seeds seed, seed + 1, ..., lengths
    drawn by episode_lengths) laid end to end, the last one cut at `count`.

    For benchmarks that insert millions of frames: build the pool once, outside the timed
    loop, then take step i's newest frame as pool[i % count] (a 4-frame stack as
    pool[(i - 3 .. i) % count]) instead of generating frames while timing. Take `count` well
    above what any store could deduplicate or cache across (e.g. >= 20,000 frames, 141 MB)
    so that cycling does not make the data look more repetitive than a real run; frames at
    episode joins simply continue with the next episode, as an environment reset does.
    """
    pool = np.empty((count, H, W), np.uint8)
    lengths_rng = np.random.default_rng([seed, 0])
    filled, episode = 0, 0
    while filled < count:
        length = int(episode_lengths(lengths_rng, 1)[0])
        frames = episode_frames(seed + episode, length)
        take = min(len(frames), count - filled)
        pool[filled:filled + take] = frames[:take]
        filled += take
        episode += 1
    return pool
