#!/usr/bin/python3
"""Writes the seed corpus of tests/fuzz/request_fuzz.cpp: real request frames (and short
pipelined sessions) for the tables the target creates, one file each, into
tests/fuzz/corpus/ (beside the inputs a long run merged there, which it keeps). Files of
odd length play a TCP connection that must authenticate, so
those start with hello carrying the target's token. Run it again after changing the target's
tables; the files are small and committed.
"""
from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np

CORPUS = Path(__file__).resolve().parent / "corpus"
TOKEN = "fuzz-token"


def frame(request_id: int, meta: dict, *columns: bytes) -> bytes:
    raw = json.dumps(meta, separators=(",", ":")).encode()
    payload = b"".join(c + bytes((8 - len(c) % 8) % 8) for c in columns)
    return struct.pack("<4sBBHQIIQ", b"RPLY", 1, 1, 0, request_id, len(raw), 0,
                       len(payload)) + raw + payload


def insert(request_id: int, n: int, priorities: bool = False) -> bytes:
    obs = np.arange(n * 2, dtype=np.float32).tobytes()
    act = np.arange(n, dtype=np.int64).tobytes()
    meta = {"op": "insert", "table": "replay", "n": n, "priorities": priorities,
            "timeout_ms": 0,
            "columns": [{"name": "obs", "dtype": "float32", "shape": [n, 2]},
                        {"name": "act", "dtype": "int64", "shape": [n]}]}
    cols = [obs, act] + ([np.linspace(0.5, 2, n).tobytes()] if priorities else [])
    return frame(request_id, meta, *cols)


def keys(*values: int) -> bytes:
    return np.array(values, dtype=np.uint64).tobytes()


SEEDS = {
    "hello": frame(1, {"op": "hello", "protocol": 1, "client": "fuzz"}),
    "ping": frame(7, {"op": "ping"}),
    "info": frame(2, {"op": "info", "table": "replay"}),
    "list_tables": frame(3, {"op": "list_tables"}),
    "create_table": frame(4, {"op": "create_table", "exist_ok": True, "table": {
        "name": "made", "capacity": 16,
        "fields": [{"name": "v", "dtype": "float16", "shape": [2, 2]}],
        "sampler": "uniform", "remover": "uniform",
        "rate_limiter": {"kind": "sample_to_insert_ratio", "samples_per_insert": 2,
                         "min_size_to_sample": 2, "error_buffer": 4}}}),
    "insert": insert(5, 3),
    "insert_priorities": insert(6, 2, priorities=True),
    "sample": frame(8, {"op": "sample", "table": "replay", "n": 4, "beta": 0.4,
                        "timeout_ms": 0}),
    "update_priorities": frame(9, {"op": "update_priorities", "table": "replay", "n": 2},
                               keys(0, 1), np.array([0.5, 3.0]).tobytes()),
    "delete": frame(10, {"op": "delete", "table": "replay", "n": 2}, keys(1, 99)),
    "reset_table": frame(11, {"op": "reset_table", "table": "replay"}),
    "drop_table": frame(12, {"op": "drop_table", "table": "queue"}),
    "queue_insert": frame(13, {"op": "insert", "table": "queue", "n": 2,
                               "columns": [{"name": "x", "dtype": "uint8", "shape": [2, 3]}]},
                          bytes(range(6))),
    "bad_magic": b"XPLY" + frame(1, {"op": "ping"})[4:],
    "frame_too_large": frame(1, {"op": "ping"})[:24] + struct.pack("<Q", 1 << 40),
}
def zstd_frame(values: bytes) -> bytes:
    """One zstd frame of `values` (single segment, content size, checksum), as writers make
    it; made by the zstandard module, spelled out so the corpus needs no module."""
    import zstandard
    return zstandard.ZstdCompressor(level=3, write_checksum=True).compress(values)


def append_pixels(request_id: int, values: list, end: bool) -> bytes:
    """append_steps of one obs u8[4] frame per value to the pixels table's episode 1, with
    its end and final observation when `end`."""
    frames = [zstd_frame(bytes([v] * 4)) for v in values]
    n = len(values)
    meta = {"op": "append_steps", "table": "pixels", "n": n,
            "columns": [{"name": "obs", "dtype": "uint8", "shape": [n, 4],
                         "compression": "zstd", "bytes": sum(map(len, frames))},
                        {"name": "rew", "dtype": "float32", "shape": [n]}]}
    cols = [np.array([len(f) for f in frames], "<u4").tobytes(), b"".join(frames),
            np.ones(n, np.float32).tobytes(), keys(*([1] * n))]
    if end:
        final = zstd_frame(bytes([99] * 4))
        meta["end"] = [{"episode": 1, "terminated": False}]
        meta["final_columns"] = [{"name": "obs", "dtype": "uint8", "shape": [1, 4],
                                  "compression": "zstd", "bytes": len(final)}]
        cols += [np.array([len(final)], "<u4").tobytes(), final]
    return frame(request_id, meta, *cols)


SEEDS["pixels_session"] = (
    frame(20, {"op": "open_episodes", "table": "pixels", "n": 1})
    + append_pixels(21, [1, 2, 3], end=False) + append_pixels(22, [4, 5], end=True)
    + frame(23, {"op": "sample", "table": "pixels", "n": 4, "timeout_ms": 0})
    + frame(24, {"op": "sample", "table": "pixels", "n": 4, "nstep": 2, "raw": True,
                 "timeout_ms": 0})
    + frame(25, {"op": "sample_sequences", "table": "pixels", "n": 2, "length": 2,
                 "pad": True, "timeout_ms": 0})
    + frame(26, {"op": "read_steps", "table": "pixels", "n": 8, "after": 0}))
SEEDS["pixels_end"] = (
    frame(20, {"op": "open_episodes", "table": "pixels", "n": 1})
    + append_pixels(21, [7], end=False)
    + frame(22, {"op": "end_episode", "table": "pixels", "episode": 1,
                 "columns": [{"name": "obs", "dtype": "uint8", "shape": [1, 4],
                              "compression": "zstd", "bytes": len(zstd_frame(b"abcd"))}]},
            np.array([len(zstd_frame(b"abcd"))], "<u4").tobytes(), zstd_frame(b"abcd")))
def staged_insert(request_id: int, n: int, offset: int, rows: int,
                  priorities: bool = False) -> bytes:
    """An insert into `replay` whose columns lie in staging arena 1 (the target fills it
    with the input's bytes), laid out for `rows` rows from `offset`."""
    meta = {"op": "insert", "table": "replay", "n": n, "priorities": priorities,
            "timeout_ms": 0, "staged": {"arena": 1, "offset": offset, "rows": rows},
            "columns": [{"name": "obs", "dtype": "float32", "shape": [n, 2]},
                        {"name": "act", "dtype": "int64", "shape": [n]}]}
    return frame(request_id, meta)


SEEDS["plane_session"] = (
    frame(30, {"op": "map_table", "table": "replay"})
    + staged_insert(31, 3, 0, 4) + staged_insert(32, 2, 64, 2, priorities=True)
    + frame(33, {"op": "sample", "table": "replay", "n": 4, "rows": "keys", "batches": 3,
                 "timeout_ms": 0})
    + frame(34, {"op": "map_staging", "bytes": 256}) + staged_insert(35, 1, 4000, 1)
    + frame(36, {"op": "unmap_staging", "arena": 2}))
SEEDS["session"] = (insert(1, 3, priorities=True) + insert(2, 4) + SEEDS["sample"]
                    + SEEDS["update_priorities"] + SEEDS["delete"] + SEEDS["sample"])
SEEDS["queue_session"] = (SEEDS["queue_insert"] + SEEDS["queue_insert"] + SEEDS["queue_insert"]
                          + frame(14, {"op": "sample", "table": "queue", "n": 3,
                                       "timeout_ms": 0}) + SEEDS["info"])


def with_parity(data: bytes, odd: bool) -> bytes:
    """Prefixes hello with the token when `odd`; pads the hello's JSON with a space until
    the parity of the whole input matches (the target keys authentication on it)."""
    if not odd:
        return data if len(data) % 2 == 0 else _pad_first(data)
    for spaces in range(2):
        meta = (b'{"op":"hello","token":"' + TOKEN.encode() + b'"' + b" " * spaces + b"}")
        hello = struct.pack("<4sBBHQIIQ", b"RPLY", 1, 1, 0, 1, len(meta), 0, 0) + meta
        if (len(hello) + len(data)) % 2 == 1:
            return hello + data
    raise AssertionError("unreachable")


def _pad_first(data: bytes) -> bytes:
    """Adds one space inside the first frame's JSON so the total length becomes even."""
    meta_bytes = struct.unpack_from("<I", data, 16)[0]
    meta = data[32:32 + meta_bytes]
    if not meta.endswith(b"}"):
        return data  # a deliberately broken seed: keep as is
    meta = meta[:-1] + b" }"
    return data[:16] + struct.pack("<I", len(meta)) + data[20:32] + meta + data[32 + meta_bytes:]


def main() -> None:
    CORPUS.mkdir(exist_ok=True)  # inputs merged from long runs (hash names) are kept
    for name, data in SEEDS.items():
        (CORPUS / name).write_bytes(with_parity(data, odd=False))
    for name in ("ping", "session", "queue_session", "create_table", "pixels_session"):
        (CORPUS / f"tcp_{name}").write_bytes(with_parity(SEEDS[name], odd=True))
    (CORPUS / "tcp_no_hello").write_bytes(SEEDS["ping"])  # odd length: must authenticate


if __name__ == "__main__":
    main()
