"""The replayd wire codec (docs/PROTOCOL.md): frame headers, column padding, and an
incremental frame reader.

Pure: no sockets here. `encode_frame` returns the pieces of one frame for a scatter/gather
send; `FrameReader` is fed bytes by its owner and hands back whole frames. A FrameReader is
not thread-safe; one reader thread owns it.

Frame layout (all integers little-endian):
    magic "RPLY" | version 1 | kind u8 | flags u16 = 0 | request_id u64 |
    meta_bytes u32 | reserved u32 = 0 | payload_bytes u64 | meta (JSON) | payload
"""
from __future__ import annotations

import json
import sys
import struct
from dataclasses import dataclass
from typing import (Any, Callable, Dict, List, MutableMapping, NamedTuple, Optional, Sequence,
                    Union)

import numpy as np

from .errors import ProtocolError

__all__ = [
    "Allocator",
    "HEADER",
    "HEADER_BYTES",
    "MAGIC",
    "VERSION",
    "KIND_REQUEST",
    "KIND_REPLY",
    "Header",
    "Frame",
    "FrameReader",
    "padding",
    "padded",
    "encode_header",
    "decode_header",
    "encode_meta",
    "encode_frame",
]

HEADER = struct.Struct("<4sBBHQIIQ")
HEADER_BYTES = HEADER.size  # 32
MAGIC = b"RPLY"
VERSION = 1
KIND_REQUEST = 1
KIND_REPLY = 2
_ZEROS = bytes(8)

#: A caller's payload allocator: called with a reply's payload size in bytes, returns a
#: writable C-contiguous array (any dtype) of at least that many bytes to receive it into.
Allocator = Callable[[int], Any]


class Header(NamedTuple):
    """A decoded, validated frame header."""

    kind: int
    request_id: int
    meta_bytes: int
    payload_bytes: int


@dataclass
class Frame:
    """One received frame: its header fields, parsed JSON metadata and raw payload.

    `payload` is a writable uint8 array that the frame owns (nothing else refers to it), so
    columns may be viewed in place with ``numpy.frombuffer(frame.payload, ...)``.
    """

    kind: int
    request_id: int
    meta: Dict[str, Any]
    payload: np.ndarray[Any, Any]


def padding(nbytes: int) -> int:
    """Bytes of zero padding that follow a column of `nbytes` bytes."""
    return -nbytes % 8


def padded(nbytes: int) -> int:
    """`nbytes` rounded up to a multiple of 8: the space a column takes in a payload."""
    return nbytes + padding(nbytes)


def encode_header(kind: int, request_id: int, meta_bytes: int, payload_bytes: int) -> bytes:
    """The 32-byte header of a frame."""
    return HEADER.pack(MAGIC, VERSION, kind, 0, request_id, meta_bytes, 0, payload_bytes)


def decode_header(data: Any) -> Header:
    """Decodes and validates a 32-byte header; raises ProtocolError naming the broken rule."""
    magic, version, kind, flags, request_id, meta_bytes, reserved, payload_bytes = \
        HEADER.unpack_from(data)
    if magic != MAGIC:
        raise ProtocolError(f"bad magic {bytes(magic)!r} (expected b'RPLY')")
    if version != VERSION:
        raise ProtocolError(f"unsupported frame version {version} (expected {VERSION})")
    if kind not in (KIND_REQUEST, KIND_REPLY):
        raise ProtocolError(f"bad frame kind {kind}")
    if flags != 0:
        raise ProtocolError(f"bad frame flags {flags:#x}")
    if reserved != 0:
        raise ProtocolError(f"bad reserved header field {reserved:#x}")
    if meta_bytes == 0:
        raise ProtocolError("frame without metadata (meta_bytes is 0)")
    return Header(kind, request_id, meta_bytes, payload_bytes)


def encode_meta(meta: Dict[str, Any]) -> bytes:
    """Compact UTF-8 JSON for a metadata object. NaN and infinities are refused."""
    return json.dumps(meta, separators=(",", ":"), allow_nan=False).encode("utf-8")


def encode_frame(request_id: int, meta: Union[Dict[str, Any], bytes],
                 columns: Sequence[Any] = (), kind: int = KIND_REQUEST) -> List[Any]:
    """The pieces of one frame, ready for ``socket.sendmsg``: header and metadata as one
    bytes object, then each column followed by its zero padding.

    `meta` is a dict, or its `encode_meta` bytes (a request sent many times is encoded
    once). `columns` are C-contiguous buffers (bytes, memoryview, numpy arrays); they are
    referenced, not copied. Cost: O(number of columns) plus the JSON encoding.
    """
    meta_raw = meta if isinstance(meta, bytes) else encode_meta(meta)
    pieces: List[Any] = [b""]
    payload_bytes = 0
    for column in columns:
        view = memoryview(column)
        if not view.c_contiguous:
            raise ValueError("frame columns must be C-contiguous")
        view = view.cast("B") if view.ndim != 1 or view.format != "B" else view
        nbytes = view.nbytes
        if nbytes:
            pieces.append(view)
        pad = padding(nbytes)
        if pad:
            pieces.append(_ZEROS[:pad])
        payload_bytes += nbytes + pad
    pieces[0] = encode_header(kind, request_id, len(meta_raw), payload_bytes) + meta_raw
    return pieces


class PayloadPool:
    """Reuses the arrays of large reply payloads once nothing refers to them any more.

    A sample's columns are views of its payload array, and every numpy view (and anything
    made from one without copying: memoryviews, torch.from_numpy) keeps that array alive,
    so an array whose only reference is this pool's is no longer visible to anyone and may
    be filled again. Reusing it saves the page faults a fresh allocation of megabytes costs
    (glibc maps such blocks anew and unmaps them on free). Not thread-safe: one per
    FrameReader, used by whoever reads the socket.
    """

    MIN_BYTES = 1 << 16  # smaller payloads come from the heap without faults anyway
    SLOTS = 8

    def __init__(self) -> None:
        self._arrays: List[np.ndarray[Any, Any]] = []

    def take(self, nbytes: int) -> np.ndarray[Any, Any]:
        """An uninitialised uint8 array of `nbytes`."""
        if nbytes < self.MIN_BYTES:
            return np.empty(nbytes, dtype=np.uint8)
        for array in self._arrays:
            # 3 references: the list, the loop variable and getrefcount's argument.
            if nbytes <= array.nbytes <= 2 * nbytes and sys.getrefcount(array) <= 3:
                return array[:nbytes]
        array = np.empty(nbytes, dtype=np.uint8)
        if len(self._arrays) >= self.SLOTS:
            self._arrays.pop(0)
        self._arrays.append(array)
        return array


class FrameReader:
    """Incremental frame parser: the owner writes received bytes where `buffer()` points
    and reports how many with `advance(n)`, which returns the frames completed so far.

    Small frames are parsed from an internal staging buffer; a large payload is received
    straight into the array that the returned Frame owns (no second copy). Limits guard
    against a corrupt header making us allocate absurd sizes.

        reader = FrameReader()
        while True:
            n = sock.recv_into(reader.buffer())
            if n == 0: break
            for frame in reader.advance(n): ...

    Raises ProtocolError (from advance) when the stream is not a valid frame sequence; the
    reader is then unusable.

    `allocators` (request id -> Allocator, shared with the owner) lets a request's payload be
    received into the caller's buffer: the entry is removed when its reply's payload starts.
    A buffer that is too small, read-only or not contiguous is ignored (the payload then gets
    an array of its own).
    """

    def __init__(self, *, chunk_bytes: int = 1 << 16, max_meta_bytes: int = 1 << 26,
                 max_payload_bytes: int = 1 << 36,
                 allocators: Optional[MutableMapping[int, Allocator]] = None) -> None:
        self._stage = bytearray(max(chunk_bytes, 2 * HEADER_BYTES))
        self._start = 0  # first unparsed byte in _stage
        self._end = 0  # one past the last received byte in _stage
        self._max_meta_bytes = max_meta_bytes
        self._max_payload_bytes = max_payload_bytes
        self._header: Header | None = None
        self._meta: Dict[str, Any] | None = None
        self._payload: np.ndarray[Any, Any] | None = None  # set while receiving a payload directly
        self._filled = 0
        self._payloads = PayloadPool()
        self._allocators = allocators

    def buffer(self) -> memoryview:
        """Where the next received bytes must be written (never empty)."""
        if self._payload is not None:
            return memoryview(self._payload)[self._filled:]  # type: ignore[arg-type]
        if self._start == self._end:
            self._start = self._end = 0
        if self._end == len(self._stage):
            self._make_room(0)
        return memoryview(self._stage)[self._end:]

    def advance(self, nbytes: int) -> List[Frame]:
        """Accounts for `nbytes` written into the last `buffer()`; returns completed frames."""
        if self._payload is not None:
            self._filled += nbytes
            if self._filled < len(self._payload):
                return []
            frame = self._finish(self._payload)
            self._payload = None
            return [frame]
        self._end += nbytes
        return self._parse()

    @property
    def idle(self) -> bool:
        """True when no partial frame is pending (a clean place for the stream to end)."""
        return self._header is None and self._payload is None and self._start == self._end

    def _parse(self) -> List[Frame]:
        frames: List[Frame] = []
        while True:
            available = self._end - self._start
            if self._header is None:
                if available < HEADER_BYTES:
                    self._make_room(HEADER_BYTES)
                    return frames
                header = decode_header(memoryview(self._stage)[self._start:self._end])
                if header.meta_bytes > self._max_meta_bytes:
                    raise ProtocolError(f"reply metadata of {header.meta_bytes} bytes exceeds "
                                        f"the client's limit {self._max_meta_bytes}")
                if header.payload_bytes > self._max_payload_bytes:
                    raise ProtocolError(f"reply payload of {header.payload_bytes} bytes exceeds "
                                        f"the client's limit {self._max_payload_bytes}")
                self._header = header
                self._start += HEADER_BYTES
                continue
            header = self._header
            if self._meta is None:
                if available < header.meta_bytes:
                    self._make_room(header.meta_bytes)
                    return frames
                raw = self._stage[self._start:self._start + header.meta_bytes]
                self._start += header.meta_bytes
                self._meta = _parse_meta(raw)
                continue
            payload = self._payload_array(header)
            take = min(available, header.payload_bytes)
            if take:
                payload[:take] = np.frombuffer(self._stage, np.uint8, take, self._start)
                self._start += take
            if take == header.payload_bytes:
                frames.append(self._finish(payload))
                continue
            # The staging buffer is drained; receive the rest of the payload in place.
            self._start = self._end = 0
            self._payload = payload
            self._filled = take
            return frames

    def _payload_array(self, header: Header) -> np.ndarray[Any, Any]:
        """Where the payload of `header` goes: the request's allocator's buffer, if it
        registered one that fits, else an array from the pool."""
        allocate = None
        if self._allocators:
            allocate = self._allocators.pop(header.request_id, None)
        if allocate is not None and header.payload_bytes:
            try:
                buffer = np.frombuffer(memoryview(allocate(header.payload_bytes)).cast("B"),
                                       np.uint8)
            except (TypeError, ValueError, BufferError):
                buffer = None  # not a contiguous buffer: ignored, as documented
            if buffer is not None and buffer.flags.writeable and \
                    buffer.nbytes >= header.payload_bytes:
                return buffer[:header.payload_bytes]
        return self._payloads.take(header.payload_bytes)

    def _finish(self, payload: np.ndarray[Any, Any]) -> Frame:
        assert self._header is not None and self._meta is not None
        frame = Frame(self._header.kind, self._header.request_id, self._meta, payload)
        self._header = None
        self._meta = None
        return frame

    def _make_room(self, contiguous: int) -> None:
        """Makes the staging buffer hold `contiguous` bytes from _start and leave free space
        after _end, moving pending bytes to the front or growing the buffer as needed."""
        pending = self._end - self._start
        need = max(contiguous, pending + 1)
        if self._start + need <= len(self._stage):
            return
        size = len(self._stage)
        while size < need:
            size *= 2
        stage = bytearray(size) if size > len(self._stage) else self._stage
        stage[:pending] = self._stage[self._start:self._end]
        self._stage = stage
        self._start, self._end = 0, pending


#: Decodes one JSON value from the start of a str: json.loads without its encoding
#: detection and whitespace matching (about 1 us less a reply); _parse_meta skips the
#: whitespace around the value and refuses anything else, as json.loads does.
_DECODE_JSON = json.JSONDecoder().raw_decode
_JSON_SPACE = " \t\n\r"


def _parse_meta(raw: Union[bytes, bytearray]) -> Dict[str, Any]:
    try:
        text = raw.decode("utf-8")
        meta, end = _DECODE_JSON(text, len(text) - len(text.lstrip(_JSON_SPACE)))
        if end != len(text) and text[end:].strip(_JSON_SPACE):
            raise ValueError(f"extra data after the value at {end}")
    except (UnicodeDecodeError, ValueError) as exc:
        raise ProtocolError(f"frame metadata is not valid JSON: {exc}") from None
    if not isinstance(meta, dict):
        raise ProtocolError(f"frame metadata is not a JSON object: {bytes(raw[:80])!r}")
    return meta
