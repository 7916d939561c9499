"""Bytes of a W3 replay table in four layouts (a model, printed as a markdown table).

    /usr/bin/python3 bench/python/w3_memory_model.py [--steps 1000000] [--level 3]
        [--ratio R]

A W3 table holds `steps` transitions: obs and next_obs, stacks of 4 frames u8[84, 84];
act int32, rew float32, done u8 (9 bytes of scalars per step). Layouts:

(a) naive, as W2 stores it: every transition carries its own obs and next_obs stacks.
(b) cpprb with next_of=("obs",) and stack_compress="obs" (its documented memory compression,
    computed here, not measured: cpprb is not installed).
(c) the unique frames alone, one per step, uncompressed.
(d) those frames compressed one by one with zstd at the ratio w3_ratio measures (--ratio R
    to give it; by default it is measured at --level on 3 episodes).

Sizes in decimal GB/MB (1 GB = 10^9 bytes).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import List, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
import w3_frames  # noqa: E402

FRAME = w3_frames.H * w3_frames.W                 # 7,056 bytes
STACK = 4
SCALARS = 4 + 4 + 1                               # act int32, rew float32, done u8
MEAN_EPISODE = (w3_frames.MIN_LENGTH + w3_frames.MAX_LENGTH) / 2   # steps, lengths uniform


def naive(steps: int) -> Tuple[int, int]:
    """(frame bytes, other bytes): two full stacks per transition."""
    return steps * 2 * STACK * FRAME, steps * SCALARS


def cpprb_compressed(steps: int, episodes: float) -> Tuple[int, int]:
    """(frame bytes, other bytes) of cpprb's next_of + stack_compress layout, modelled as:
    - the obs ring stores one new frame per step; a stack is a strided view over STACK
      consecutive frames, so the ring is steps + STACK - 1 frames, plus 1 slot for
      next_of (next_obs[i] is read at obs[i + 1]);
    - on_episode_end caches, for each episode end still in the table, the step's stacked
      next_obs and its stacked obs (2 * STACK frames), because the next episode's first add
      overwrites the slots they share; dict and per-object overhead are ignored.
    """
    ring = (steps + STACK - 1 + 1) * FRAME
    cache = round(episodes * 2 * STACK * FRAME)
    return ring, steps * SCALARS + cache


def unique_frames(steps: int) -> Tuple[int, int]:
    return steps * FRAME, steps * SCALARS


def compressed_frames(steps: int, ratio: float) -> Tuple[int, int]:
    return round(steps * FRAME / ratio), steps * SCALARS


def size(n: float) -> str:
    return f"{n / 1e9:.2f} GB" if n >= 1e9 else f"{n / 1e6:.1f} MB"


def markdown(rows: List[Tuple[str, Tuple[int, int]]], steps: int) -> str:
    """One line per layout; the last column is how many times smaller than (a), the first row."""
    reference = sum(rows[0][1])
    lines = ["| layout | frames | scalars (+ cache) | total | bytes/step | (a) / total |",
             "|---|---:|---:|---:|---:|---:|"]
    for name, (frames, other) in rows:
        total = frames + other
        lines.append(f"| {name} | {size(frames)} | {size(other)} | {size(total)} "
                     f"| {total / steps:,.0f} | {reference / total:.1f}x |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1_000_000)
    parser.add_argument("--level", type=int, default=3, help="zstd level of (d)")
    parser.add_argument("--ratio", type=float, default=None,
                        help="per-frame zstd ratio of (d); measured when not given")
    args = parser.parse_args()

    if args.ratio is None:
        import w3_ratio
        ratio, source = w3_ratio.measured_ratio(args.level), "measured on 3 W3 episodes"
    else:
        ratio, source = args.ratio, "given"
    episodes = args.steps / MEAN_EPISODE
    rows = [("(a) naive: obs + next_obs stacks per transition", naive(args.steps)),
            ("(b) cpprb next_of + stack_compress", cpprb_compressed(args.steps, episodes)),
            ("(c) unique frames, one per step", unique_frames(args.steps)),
            (f"(d) (c) with zstd level {args.level}, {ratio:.1f}x", compressed_frames(args.steps, ratio))]
    print(f"W3 table of {args.steps:,} steps: frames u8[84,84] ({FRAME:,} B), obs/next_obs "
          f"stacks of {STACK}, act int32 + rew float32 + done u8 ({SCALARS} B); "
          f"{episodes:,.0f} episodes of {MEAN_EPISODE:,.0f} steps on average; "
          f"zstd ratio {ratio:.1f}x ({source}).\n")
    print(markdown(rows, args.steps))
    print(f"""
Formulas (N = {args.steps:,} steps, F = {FRAME:,} B, k = {STACK}, E = {episodes:,.0f} episode ends, S = {SCALARS} B):
- (a) N * (2 * k * F + S).
- (b) (N + k) * F + N * S + E * 2 * k * F. Assumes cpprb's documented memory compression:
  stack_compress keeps one frame per step in a ring whose stacks are strided views (the
  stack on the last axis: obs (84, 84, 4), not (4, 84, 84)), next_of reads next_obs at the
  following index (one extra slot), and on_episode_end caches the last step's stacks of
  each episode end still stored. Dtypes given in env_dict (cpprb's default is float32,
  which would make every frame 4 times larger). Not measured: cpprb is not installed.
- (c) N * F + N * S; a table also keeps each episode's final observation
  (E * F = {size(episodes * FRAME)} more), not counted.
- (d) N * F / ratio + N * S: each frame compressed on its own (no cross-frame dictionary);
  zstd's frame header and checksum are in the ratio; the store's index, per-blob
  bookkeeping and allocator overhead are not counted.""")


if __name__ == "__main__":
    main()
