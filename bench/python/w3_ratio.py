"""Per-frame zstd compression of W3 frames: ratio and compress/decompress time by level.

    /usr/bin/python3 bench/python/w3_ratio.py [--episodes 20] [--seed 0] [--levels 1 3 9]

Generates the episodes (lengths uniform in [200, 2000]), times the generation, then
compresses every frame on its own (7,056 bytes; ZstdCompressor(level=L, write_checksum=True),
as a store compressing frame by frame would) and decompresses it back. Prints a markdown
table: the ratio as total raw bytes / total compressed bytes, the median and minimum
per-frame ratios, and the median compress and decompress times per frame (µs).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Dict, List, Sequence

import numpy as np
import zstandard

sys.path.insert(0, str(Path(__file__).resolve().parent))
import w3_frames  # noqa: E402

FRAME_BYTES = w3_frames.H * w3_frames.W


def generate(episodes: int, seed: int) -> List[np.ndarray]:
    """The frames of `episodes` episodes, seeds seed .. seed + episodes - 1."""
    lengths = w3_frames.episode_lengths(np.random.default_rng(seed), episodes)
    return [w3_frames.episode_frames(seed + i, int(n)) for i, n in enumerate(lengths)]


def generation_rate(episodes: int, seed: int) -> float:
    """Frames per second of episode_frames, on this core (each episode dropped once made)."""
    lengths = w3_frames.episode_lengths(np.random.default_rng(seed), episodes)
    start = time.perf_counter()
    for i, n in enumerate(lengths):
        w3_frames.episode_frames(seed + i, int(n))
    return (int(lengths.sum()) + episodes) / (time.perf_counter() - start)


def measure_level(frames: Sequence[np.ndarray], level: int) -> Dict[str, float]:
    compressor = zstandard.ZstdCompressor(level=level, write_checksum=True)
    decompressor = zstandard.ZstdDecompressor()
    sizes, compress_ns, decompress_ns = [], [], []
    clock = time.perf_counter_ns
    for frame in frames[0][:200]:                     # warm-up, not measured
        decompressor.decompress(compressor.compress(frame.tobytes()))
    for episode in frames:
        for frame in episode:
            raw = frame.tobytes()
            t0 = clock()
            blob = compressor.compress(raw)
            t1 = clock()
            back = decompressor.decompress(blob)
            t2 = clock()
            if back != raw:
                raise AssertionError("a frame did not round-trip")
            sizes.append(len(blob))
            compress_ns.append(t1 - t0)
            decompress_ns.append(t2 - t1)
    ratios = FRAME_BYTES / np.asarray(sizes, np.float64)
    return {"level": level, "frames": len(sizes),
            "ratio": FRAME_BYTES * len(sizes) / sum(sizes),
            "median_ratio": float(np.median(ratios)), "min_ratio": float(ratios.min()),
            "bytes": sum(sizes) / len(sizes),
            "compress_us": statistics.median(compress_ns) / 1000,
            "decompress_us": statistics.median(decompress_ns) / 1000}


def measured_ratio(level: int = 3, episodes: int = 3, seed: int = 0) -> float:
    """Total-bytes compression ratio of W3 frames at `level` (for other scripts)."""
    return measure_level(generate(episodes, seed), level)["ratio"]


def markdown(rows: Sequence[Dict[str, float]]) -> str:
    lines = ["| zstd level | ratio (total bytes) | median frame ratio | min frame ratio "
             "| bytes/frame | compress µs/frame | decompress µs/frame |",
             "|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['level']} | {r['ratio']:.1f}x | {r['median_ratio']:.1f}x "
                     f"| {r['min_ratio']:.1f}x | {r['bytes']:.0f} | {r['compress_us']:.1f} "
                     f"| {r['decompress_us']:.1f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--levels", type=int, nargs="+", default=[1, 3, 9])
    args = parser.parse_args()

    rate = generation_rate(args.episodes, args.seed)
    frames = generate(args.episodes, args.seed)
    total = sum(len(f) for f in frames)
    print(f"W3: {args.episodes} episodes (seeds {args.seed}..{args.seed + args.episodes - 1}), "
          f"{total} frames of {FRAME_BYTES} bytes; generation {rate:,.0f} frames/s "
          f"(episode_frames, one core)\n")
    print(markdown([measure_level(frames, level) for level in args.levels]))


if __name__ == "__main__":
    main()
