"""JPEG-encoded images kept as they came: Minari 0.5 stores an image observation (a uint8
Box of at least 32x32, 0..255) as one JPEG byte string per frame. A table holds each frame
as a fixed-size uint8 field: 4 bytes of little-endian length, then the JPEG bytes, zeros
after them. The field's size comes from the dataset (its longest frame) or the caller.

Why the bytes and not the pixels: an export must give Minari back the same decoded frames,
and decoding, then encoding again, changes them (JPEG is lossy); the bytes round-trip
exactly, and are about a tenth of the pixels. `decode` gives the pixels (Pillow needed).

Pure functions; thread-safe.
"""
from __future__ import annotations

import importlib
import io
from typing import Any, Sequence

import numpy as np

__all__ = ["HEADER_BYTES", "pack", "unpack", "decode"]

HEADER_BYTES = 4  # the little-endian uint32 length before each frame's bytes


def pack(frames: Sequence[Any], field_bytes: int, what: str) -> np.ndarray[Any, Any]:
    """Frames (uint8 byte strings) as an (n, field_bytes) uint8 array. ValueError naming
    `what` when a frame does not fit."""
    out = np.zeros((len(frames), field_bytes), np.uint8)
    for i, frame in enumerate(frames):
        data = np.frombuffer(frame, np.uint8) if isinstance(frame, bytes) else \
            np.asarray(frame, np.uint8).reshape(-1)
        size = data.shape[0]
        if size + HEADER_BYTES > field_bytes:
            raise ValueError(f"{what}: a JPEG frame of {size} bytes does not fit the table's "
                             f"{field_bytes - HEADER_BYTES} bytes per frame (load into a new "
                             "table, or give jpeg_bytes= large enough)")
        out[i, :HEADER_BYTES] = np.frombuffer(np.uint32(size).tobytes(), np.uint8)
        out[i, HEADER_BYTES:HEADER_BYTES + size] = data
    return out


def unpack(rows: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """The JPEG byte strings of packed rows, as an object array of uint8 arrays (what
    h5py writes as a variable-length dataset)."""
    sizes = rows[:, :HEADER_BYTES].copy().view("<u4").reshape(-1)
    out = np.empty(len(rows), dtype=object)
    for i, size in enumerate(sizes.tolist()):
        if size + HEADER_BYTES > rows.shape[1]:
            raise ValueError(f"a packed JPEG frame says {size} bytes, more than its field holds")
        out[i] = np.array(rows[i, HEADER_BYTES:HEADER_BYTES + size])
    return out


def decode(rows: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """The pixels of packed JPEG rows ((n, bytes) uint8 -> (n, H, W[, C]) uint8); needs
    Pillow."""
    image = importlib.import_module("PIL.Image")  # by name: Pillow has no type information
    frames = [np.array(image.open(io.BytesIO(frame.tobytes())), np.uint8)
              for frame in unpack(np.asarray(rows).reshape(-1, rows.shape[-1]))]
    return np.stack(frames).reshape(*rows.shape[:-1], *frames[0].shape) if frames else \
        np.zeros((0,), np.uint8)
