"""Pixel frame fields (docs/PIXELS.md; "frame" here is an image, not a wire frame, though
each stored value is one zstd frame): fields of an episodic table that are stacked
(``stack={"obs": 4}``), served with the next step's value (``next_of=["obs"]``) or stored
zstd-compressed (``compression={"obs": "zstd"}``).

Writing: `compress_column` turns a batch's raw values into the wire's compressed column (one
zstd frame per value, made here, in the writer's process, with a content checksum).
Reading: a reply carries each draw's unique frames (docs/PROTOCOL.md "Frame fields");
`frame_arrays` decompresses them (in the thread that decodes the reply: a Sampler's
background thread) and `nstep_views` / `sequence_views` build the stacked arrays over them.

Pure functions; thread-safe (a zstd context per thread).
"""
from __future__ import annotations

import threading
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from .errors import ProtocolError, ReplayError

__all__ = ["FrameSpec", "frame_specs", "split_frame_columns", "frame_arrays", "nstep_views",
           "view_column",
           "sequence_views", "compress_column", "CorruptFrame"]


class CorruptFrame(ReplayError):
    """A stored frame that does not decompress to its field's value (corrupted after it
    was written). The message names the table, the field and the key of the draw."""

    code = "data_loss"


_local = threading.local()


def _zstd() -> Any:
    try:
        import zstandard
    except ImportError:  # pragma: no cover - Debian's python3-zstandard is a dependency
        raise ReplayError("compressed fields need the zstandard module (Debian: "
                          "python3-zstandard); or sample with raw=True", "failed_precondition")
    return zstandard


def _decompressor() -> Any:
    decompressor = getattr(_local, "decompressor", None)
    if decompressor is None:
        decompressor = _local.decompressor = _zstd().ZstdDecompressor()
    return decompressor


def _compressor(level: int) -> Any:
    compressors: Dict[int, Any] = getattr(_local, "compressors", None) or {}
    _local.compressors = compressors
    if level not in compressors:
        compressors[level] = _zstd().ZstdCompressor(level=level, write_checksum=True,
                                                    write_content_size=True)
    return compressors[level]


class FrameSpec:
    """One frame field of a reply, as its ``frames`` metadata entry describes it."""

    __slots__ = ("name", "dtype", "shape", "stack", "next_of", "zstd")

    def __init__(self, entry: Mapping[str, Any]) -> None:
        try:
            self.name = str(entry["name"])
            self.dtype = np.dtype(str(entry["dtype"]).replace("bool", "?")).newbyteorder("<")
            self.shape = tuple(int(d) for d in entry["shape"])
            self.stack = int(entry["stack"])
            self.next_of = bool(entry["next_of"])
            self.zstd = entry["encoding"] == "zstd"
        except (KeyError, TypeError, ValueError) as exc:
            raise ProtocolError(f"bad frame field description {entry!r}: {exc}") from None
        if self.stack < 1:
            raise ProtocolError(f"frame field '{self.name}' with stack {self.stack}")

    @property
    def columns(self) -> int:
        """Reply columns the field takes: sizes and frames when compressed, else frames."""
        return 2 if self.zstd else 1


def frame_specs(meta: Mapping[str, Any]) -> List[FrameSpec]:
    """The frame fields a reply describes (none for tables without them)."""
    entries = meta.get("frames")
    if not entries:
        return []
    if not isinstance(entries, list):
        raise ProtocolError(f"reply 'frames' is not a list: {entries!r}")
    return [FrameSpec(entry) for entry in entries]


def split_frame_columns(columns: List[Any],
                        specs: Sequence[FrameSpec]) -> Tuple[List[Any], List[Any]]:
    """A reply's column list as (the other columns, the frame fields' columns at its end)."""
    count = sum(spec.columns for spec in specs)
    if count > len(columns):
        raise ProtocolError("reply lists fewer columns than its frame fields need")
    return columns[:len(columns) - count], columns[len(columns) - count:]


def view_column(column: Mapping[str, Any], payload: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """One reply column ({"name", "dtype", "shape", "offset"}) viewed in the payload."""
    if not isinstance(column, Mapping):
        raise ProtocolError(f"bad column description {column!r}")
    try:
        dtype = np.dtype(str(column["dtype"]).replace("bool", "?")).newbyteorder("<")
        shape = tuple(int(d) for d in column["shape"])
        offset = int(column["offset"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ProtocolError(f"bad column description {column!r}: {exc}") from None
    count = int(np.prod(shape)) if shape else 1
    if offset < 0 or offset + count * dtype.itemsize > payload.nbytes:
        raise ProtocolError(f"reply column '{column.get('name')}' runs past the payload")
    return np.frombuffer(payload, dtype, count, offset).reshape(shape)


def frame_arrays(specs: Sequence[FrameSpec], columns: List[Any], payload: np.ndarray[Any, Any],
                 owner: Callable[[FrameSpec, int], Optional[int]],
                 table: str) -> Dict[str, np.ndarray[Any, Any]]:
    """Each frame field's frames as one array (frames, *field shape): raw frames are viewed
    in the payload; compressed ones are decompressed into a new array (a size of 0 is a
    frame of zeros). `owner(spec, i)`: the key of the draw frame i belongs to (for errors).
    Raises CorruptFrame naming the table, field and key of a frame that fails to
    decompress (checksum, size)."""
    arrays: Dict[str, np.ndarray[Any, Any]] = {}
    at = 0
    for spec in specs:
        if not spec.zstd:
            arrays[spec.name] = view_column(columns[at], payload)
            at += 1
            continue
        sizes = view_column(columns[at], payload)
        blob = view_column(columns[at + 1], payload)
        at += 2
        dtype, shape = spec.dtype, spec.shape
        item_bytes = int(np.prod(shape)) * dtype.itemsize if shape else dtype.itemsize
        if int(sizes.sum(dtype=np.uint64)) != blob.nbytes:
            raise ProtocolError(f"field '{spec.name}': frame sizes do not add up to its bytes")
        out = np.empty((len(sizes), *shape), dtype)
        flat = memoryview(out.reshape(-1).view(np.uint8))  # type: ignore[arg-type]
        data = memoryview(blob)  # type: ignore[arg-type]
        decompress = _decompressor().decompress
        ends = np.cumsum(sizes, dtype=np.int64).tolist()
        begin = 0
        for i, end in enumerate(ends):  # the hot loop: one zstd call per frame
            at = i * item_bytes
            if end == begin:
                flat[at:at + item_bytes] = bytes(item_bytes)
                continue
            try:
                flat[at:at + item_bytes] = decompress(data[begin:end])
            except ValueError:  # decompressed to another size than the field's
                raise _corrupt(table, spec, owner(spec, i), "wrong decompressed size") from None
            except Exception as exc:  # zstandard.ZstdError: checksum, corrupt block
                raise _corrupt(table, spec, owner(spec, i), str(exc)) from None
            begin = end
        arrays[spec.name] = out
    return arrays


def _corrupt(table: str, spec: FrameSpec, key: Optional[int], why: str) -> CorruptFrame:
    return CorruptFrame(f"table '{table}': a stored value of field '{spec.name}' (in the draw "
                        f"with key {key}) is corrupt and was not decoded: {why}")


def nstep_layout(spec: FrameSpec, steps: np.ndarray[Any, Any]) -> Tuple[np.ndarray[Any, Any],
                                                                        np.ndarray[Any, Any]]:
    """Per draw of an n-step reply: where its frames start and where its next stack starts
    within them (docs/PROTOCOL.md: stack + min(h, stack) frames with next_of, else stack)."""
    shift = np.minimum(steps.astype(np.int64), spec.stack) if spec.next_of else \
        np.zeros(len(steps), np.int64)
    counts = spec.stack + shift
    starts = np.zeros(len(steps), np.int64)
    np.cumsum(counts[:-1], out=starts[1:])
    return starts, shift


def nstep_views(spec: FrameSpec, frames: np.ndarray[Any, Any], steps: np.ndarray[Any, Any]
                ) -> Tuple[np.ndarray[Any, Any], Optional[np.ndarray[Any, Any]]]:
    """The stacked values of an n-step reply's draws: (n, stack, *shape) for step t and,
    with next_of, for step t+h ((n, *shape) when stack is 1). Strided views over `frames`
    (no copy) when every draw has the same layout, else gathered copies."""
    n = len(steps)
    s = spec.stack
    starts, shift = nstep_layout(spec, steps)
    expected = int(starts[-1] + s + shift[-1]) if n else 0
    if len(frames) != expected:
        raise ProtocolError(f"field '{spec.name}': {len(frames)} frames where the draws "
                            f"need {expected}")
    item = frames.shape[1:]
    if n and (not spec.next_of or np.all(shift == shift[0])):
        per_draw = s + (int(shift[0]) if spec.next_of else 0)
        strides = (per_draw * frames.strides[0], frames.strides[0], *frames.strides[1:])
        obs = np.lib.stride_tricks.as_strided(frames, (n, s, *item), strides, writeable=False)
        nxt = None
        if spec.next_of:
            later = frames[int(shift[0]):]
            nxt = np.lib.stride_tricks.as_strided(later, (n, s, *item), strides,
                                                  writeable=False)
    else:
        window = np.arange(s)
        obs = frames[starts[:, None] + window]
        nxt = frames[(starts + shift)[:, None] + window] if spec.next_of else None
    if s == 1:
        obs = obs.reshape(n, *item)
        nxt = None if nxt is None else nxt.reshape(n, *item)
    return obs, nxt


def sequence_views(spec: FrameSpec, frames: np.ndarray[Any, Any], n: int,
                   steps: int) -> np.ndarray[Any, Any]:
    """The stacked values of a sequence reply: (n, T, stack, *shape), or (n, T, *shape) when
    stack is 1, a strided view over the T + stack - 1 frames of each sequence (no copy)."""
    s = spec.stack
    per_sequence = steps + s - 1
    if len(frames) != n * per_sequence:
        raise ProtocolError(f"field '{spec.name}': {len(frames)} frames where {n} sequences "
                            f"need {n * per_sequence}")
    item = frames.shape[1:]
    if s == 1:
        return frames.reshape(n, steps, *item)
    stride = frames.strides[0]
    return np.lib.stride_tricks.as_strided(
        frames, (n, steps, s, *item), (per_sequence * stride, stride, stride, *frames.strides[1:]),
        writeable=False)


def compress_column(values: np.ndarray[Any, Any], level: int
                    ) -> Tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """One zstd frame per row of `values` (n, *shape): (n uint32 sizes, the frames back to
    back as uint8), the wire's compressed column."""
    compress = _compressor(level).compress
    frames: List[bytes] = [compress(row) for row in np.ascontiguousarray(values)]
    sizes = np.fromiter((len(f) for f in frames), dtype="<u4", count=len(frames))
    return sizes, np.frombuffer(b"".join(frames), np.uint8)


def add_nstep_frames(data: Dict[str, np.ndarray[Any, Any]], meta: Mapping[str, Any],
                     payload: np.ndarray[Any, Any], specs: Sequence[FrameSpec],
                     columns: List[Any], keys: np.ndarray[Any, Any]) -> None:
    """Adds each frame field of an n-step reply to `data`: its stacked value at step t and,
    with next_of, ``next_<name>`` at step t+h."""
    found = data.get("steps")
    if found is None:
        raise ProtocolError("a reply with frame fields but no 'steps' column")
    steps: np.ndarray[Any, Any] = found

    def owner(spec: FrameSpec, frame: int) -> Optional[int]:
        starts, _ = nstep_layout(spec, steps)
        draw = int(np.searchsorted(starts, frame, side="right")) - 1
        return int(keys[draw]) if 0 <= draw < len(keys) else None

    frames = frame_arrays(specs, columns, payload, owner, str(meta.get("table")))
    for spec in specs:
        obs, nxt = nstep_views(spec, frames[spec.name], steps)
        data[spec.name] = obs
        if nxt is not None:
            data["next_" + spec.name] = nxt


def add_sequence_frames(data: Dict[str, np.ndarray[Any, Any]], meta: Mapping[str, Any],
                        payload: np.ndarray[Any, Any], specs: Sequence[FrameSpec],
                        columns: List[Any], keys: np.ndarray[Any, Any], steps: int) -> None:
    """Adds each frame field of a sequence reply to `data`, (n, T[, stack], *shape)."""
    n = len(keys)

    def owner(spec: FrameSpec, frame: int) -> Optional[int]:
        draw = frame // (steps + spec.stack - 1)
        return int(keys[draw]) if draw < n else None

    frames = frame_arrays(specs, columns, payload, owner, str(meta.get("table")))
    for spec in specs:
        data[spec.name] = sequence_views(spec, frames[spec.name], n, steps)


def add_row_frames(data: Dict[str, np.ndarray[Any, Any]], meta: Mapping[str, Any],
                   payload: np.ndarray[Any, Any], specs: Sequence[FrameSpec],
                   columns: List[Any], keys: np.ndarray[Any, Any]) -> None:
    """Adds the compressed fields of a ``read_steps`` page to `data`, one value per row."""
    def owner(spec: FrameSpec, frame: int) -> Optional[int]:
        return int(keys[frame]) if frame < len(keys) else None

    data.update(frame_arrays(specs, columns, payload, owner, str(meta.get("table"))))
