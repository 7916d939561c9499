"""W3 (Atari-like pixels, docs/PIXELS.md) through the Python client: the server's memory
holding a full table, sampling it into one Python learner, and the bytes an insert puts on
the socket, against W2 (the same frames stored as transitions of obs and next_obs stacks).

    /usr/bin/python3 bench/python/pixels_bench.py memory [--steps 1000000] [--raw]
    /usr/bin/python3 bench/python/pixels_bench.py sample [--steps 1000000] [--reps 5]
    /usr/bin/python3 bench/python/pixels_bench.py wire

The server is pinned to CPU 0 and this process (explorer, learner) to CPU 1.
W3 table: obs u8[84, 84] with stack 4 and next_of, act i32, rew f32; zstd --level (6)
unless --raw; episodes of 200-2,000 steps from bench/python/w3_frames.py (each frame compressed
on its own by the episode writer, in this process), each ended with its final observation,
one in four truncated. FIFO remover; capacity = --steps, filled exactly once.

- memory: the server's resident set (VmRSS) once full, against the table's own account
  (info: compressed values and their index, slot metadata, selectors) plus the episode
  bookkeeping and one window index, and against the unique frames' bytes.
- sample: items/s of `sampler(batch 32)` (n-step k = 1: stacked obs and next_obs,
  decompressed in the sampler's thread) on a uniform and a prioritized table, and steps/s of
  sequences (64 x 80, stacked obs); medians of --reps runs of --seconds.
- wire: bytes the client sends per step inserted (every frame's header, metadata and
  payload, counted where the client encodes them): W3 through the episode writer against W2
  through the writer (batch 64 both).
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Tuple

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "client" / "python"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import replayd  # noqa: E402
import w3_frames  # noqa: E402
from episodes_bench import timed  # noqa: E402

W3_FIELDS = {"obs": (np.uint8, (84, 84)), "act": (np.int32, ()), "rew": (np.float32, ())}
W2_FIELDS = {"obs": (np.uint8, (4, 84, 84)), "act": (np.int32, ()), "rew": (np.float32, ()),
             "next_obs": (np.uint8, (4, 84, 84)), "done": (np.uint8, ())}
STACK = 4


class Server:
    """replayd on CPU 0, on a Unix socket in a temporary directory."""

    def __init__(self, binary: str) -> None:
        self._tmp = tempfile.TemporaryDirectory()
        socket, ready = f"{self._tmp.name}/s.sock", f"{self._tmp.name}/ready"
        self.proc = subprocess.Popen(["taskset", "-c", "0", binary, "--unix", socket,
                                      "--tcp", "", "--metrics", "", "--ready-file", ready,
                                      "--log-level", "warn"])
        while not os.path.exists(ready):
            time.sleep(0.05)
        self.address = f"unix://{socket}"

    def rss(self) -> int:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise RuntimeError("no VmRSS")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait()
        self._tmp.cleanup()


LEVEL = [6]  # zstd level of the W3 tables (--level)


def create_w3(client: replayd.Client, name: str, capacity: int, *, raw: bool = False,
              sampler: str = "uniform") -> None:
    client.create_table(name, W3_FIELDS, capacity, episodic=True, sampler=sampler,
                        priority_exponent=0.6, seed=1, next_of=["obs"], stack={"obs": STACK},
                        compression=None if raw else {"obs": ("zstd", LEVEL[0])})


def w3_episodes(seed: int) -> Iterator[Tuple[np.ndarray, np.ndarray, np.ndarray, bool]]:
    """Endless W3 episodes: (frames (L + 1, 84, 84), act (L,), rew (L,), terminated)."""
    rng = np.random.default_rng(seed)
    for n in range(1 << 62):
        length = int(w3_frames.episode_lengths(rng, 1)[0])
        yield (w3_frames.episode_frames(seed * 1_000_003 + n, length),
               w3_frames.actions(rng, length), w3_frames.rewards(seed * 1_000_003 + n, length),
               n % 4 != 0)


def fill_w3(client: replayd.Client, table: str, steps: int, seed: int = 1) -> int:
    """Writes W3 episodes until `steps` rows (steps and final observations) went in;
    returns the rows written."""
    written = 0
    with client.episode_writer(table, batch=64, max_in_flight=8, keep_keys=False) as writer:
        for frames, act, rew, terminated in w3_episodes(seed):
            length = len(act)
            for t in range(length):
                writer.append(obs=frames[t], act=int(act[t]), rew=float(rew[t]))
            writer.end_episode(terminated=terminated, obs=frames[length])
            written += length + 1
            if written >= steps:
                return written
    return written


def table_info(client: replayd.Client, table: str) -> Dict[str, Any]:
    return client.table_info(table)


def memory(args: argparse.Namespace) -> None:
    server = Server(args.server)
    try:
        client = replayd.Client(server.address)
        rss_empty = server.rss()
        create_w3(client, "w3", args.steps, raw=args.raw)
        start = time.perf_counter()
        rows = fill_w3(client, "w3", args.steps)
        fill_s = time.perf_counter() - start
        client.sample("w3", 32)  # builds the n-step window index a learner uses
        time.sleep(1.5)  # the server's memory trimmer returns freed heap after bursts
        info = table_info(client, "w3")
        rss = server.rss()
        frames = info["size"] * 84 * 84
        episodes = 52 * info["capacity"]  # episode bookkeeping (docs/PROTOCOL.md)
        index = 13 * info["capacity"]     # one uniform window index: 12 + 1 bytes a slot
        account = info["bytes"] + episodes + index
        print(f"nproc {os.cpu_count()}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
        print(f"W3 {'raw' if args.raw else f'zstd level {LEVEL[0]}'}: {rows:,} rows written in "
              f"{fill_s:.0f} s ({rows / fill_s:,.0f}/s), table size {info['size']:,}")
        print("| measure | bytes | per step |")
        print("|---|---:|---:|")
        for name, value in (("server RSS, empty", rss_empty), ("server RSS, full", rss),
                            ("unique frames (size x 7,056)", frames),
                            ("compressed values (info compressed_bytes)",
                             info["compressed_bytes"]),
                            ("table account (info bytes)", info["bytes"]),
                            ("+ episode bookkeeping + 1 window index", account)):
            print(f"| {name} | {value:,} | {value / info['size']:,.1f} |")
        print(f"RSS / account: {rss / account:.3f}; RSS / unique frames: {rss / frames:.3f}")
    finally:
        server.stop()


def sample_rate(sampler: Any, items: int, seconds: float) -> float:
    with sampler:
        for _ in range(8):
            next(sampler)  # warm: the index exists, the prefetch is full
        return timed(seconds, lambda: len(next(sampler)) and items)


def sample(args: argparse.Namespace) -> None:
    server = Server(args.server)
    try:
        client = replayd.Client(server.address)
        for name, kind in (("uniform", "uniform"), ("prioritized", "prioritized")):
            create_w3(client, name, args.steps, sampler=kind)
            fill_w3(client, name, args.steps, seed=2 if kind == "uniform" else 3)
        measures: Dict[str, Callable[[], float]] = {
            "uniform, batch 32 (transitions/s)": lambda: sample_rate(
                client.sampler("uniform", 32), 32, args.seconds),
            "prioritized, batch 32 (transitions/s)": lambda: sample_rate(
                client.sampler("prioritized", 32), 32, args.seconds),
            "sequences 64 x 80, uniform (steps/s)": lambda: sample_rate(
                client.sequence_sampler("uniform", 64, 80), 64 * 80, args.seconds),
        }
        rates: Dict[str, List[float]] = {name: [] for name in measures}
        for rep in range(args.reps):
            for name, measure in measures.items():
                rates[name].append(measure())
            print(f"  rep {rep + 1} done", file=sys.stderr)
        first = client.sample("uniform", 32)
        print(f"nproc {os.cpu_count()}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; "
              f"{args.reps} repetitions of {args.seconds} s; tables of {args.steps:,} steps; "
              f"obs {first['obs'].shape}, next_obs {first['next_obs'].shape}")
        print("| measure | median (min-max) |")
        print("|---|---:|")
        for name, values in rates.items():
            print(f"| {name} | {statistics.median(values):,.0f} "
                  f"({min(values):,.0f}-{max(values):,.0f}) |")
    finally:
        server.stop()


SENT = [0]  # bytes of every request frame encoded since the start


def count_sent_bytes() -> None:
    """Counts the bytes of each request frame the client encodes (all of them go out)."""
    from replayd import connection
    encode = connection.encode_frame

    def counted(*args: Any, **kwargs: Any) -> Any:
        pieces = encode(*args, **kwargs)
        SENT[0] += sum(memoryview(p).nbytes for p in pieces)
        return pieces
    connection.encode_frame = counted  # type: ignore[assignment]


def wire(args: argparse.Namespace) -> None:
    count_sent_bytes()
    server = Server(args.server)
    try:
        client = replayd.Client(server.address)
        create_w3(client, "w3", 200_000)
        client.create_table("w2", W2_FIELDS, 10_000, seed=1)
        before = SENT[0]
        rows = fill_w3(client, "w3", 50_000)
        w3_bytes = (SENT[0] - before) / rows
        steps = 5_000
        frames = w3_frames.episode_frames(7, steps + STACK)
        before = SENT[0]
        with client.writer("w2", batch=64) as writer:
            for t in range(steps):
                stack = frames[t:t + STACK]
                writer.append(obs=stack, act=0, rew=0.0, next_obs=frames[t + 1:t + 1 + STACK],
                              done=0)
        w2_bytes = (SENT[0] - before) / steps
        print(f"nproc {os.cpu_count()}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
        print("| workload | bytes on the socket per step inserted | vs W2 |")
        print("|---|---:|---:|")
        print(f"| W2 (writer, batch 64) | {w2_bytes:,.0f} | 1 |")
        print(f"| W3 (episode_writer, zstd {LEVEL[0]}, batch 64) | {w3_bytes:,.0f} | "
              f"1/{w2_bytes / w3_bytes:,.0f} |")
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("mode", choices=["memory", "sample", "wire"])
    parser.add_argument("--server", default=str(REPO / "build" / "service" / "replayd"))
    parser.add_argument("--steps", type=int, default=1_000_000)
    parser.add_argument("--raw", action="store_true", help="memory: no compression")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--level", type=int, default=6, help="zstd level of W3's obs")
    args = parser.parse_args()
    LEVEL[0] = args.level
    os.sched_setaffinity(0, {1})
    {"memory": memory, "sample": sample, "wire": wire}[args.mode](args)


if __name__ == "__main__":
    main()
