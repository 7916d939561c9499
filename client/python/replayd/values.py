"""Published values (docs/VALUES.md, docs/PROTOCOL.md "Published values"): named, versioned
dicts of arrays that a learner publishes and explorers fetch.

`publish` sends ``publish_begin``, waits for the upload id, then writes every
``publish_part`` and the ``publish_commit`` before reading any of their replies (one round
trip for the bytes, however many parts). The parts reference the arrays' memory: nothing
is copied except arrays that are not C-contiguous little-endian (copied once). `fetch`
asks for a version newer than the caller's; the server waits for it (the request's
``timeout_ms``), so an explorer never polls, and a fetch that ends without a newer version
moves no value bytes. Its arrays view the reply's payload, which they own (no copy).

Both run on a caller's Connection (thread-safe like every request on it). An upload that
fails after ``publish_begin`` (a lost connection, a local timeout, a refused part) would
hold its bytes on the server until its connection closes, so `publish` closes the
connection then: other requests in flight on it fail with ConnectionLost, and the Client
opens a new one at its next call. (A refused commit ends its upload on the server: the
connection stays.)
"""
from __future__ import annotations

import math
import mmap
import os
import sys
import time
from concurrent.futures import Future
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from .connection import Connection
from .errors import InvalidArgument, ProtocolError, ReplayError, ResourceExhausted
from .requests import timeout_ms
from .schema import WIRE_DTYPES
from .wire import padded

__all__ = ["Fetched", "MAX_PART_BYTES", "part_bytes", "value_arrays", "value_layout",
           "publish", "fetch", "decode_fetch"]

MAX_PART_BYTES = 4 << 20  # payload of one publish_part, at most
#: Values of at least this many bytes are staged by a same-host publisher: written straight
#: into the shared block the server then seals, so the server's thread copies nothing
#: (docs/VALUES.md, "Staged publishes"). Smaller ones go through the socket in parts.
STAGED_MIN_BYTES = 1 << 20
_FRAME_HEADROOM = 64 << 10  # room left in max_frame_bytes for a part's header and metadata
# Errors after which a request may still execute on the server (no reply was read).
_UNANSWERED = ("timeout", "connection_lost", "protocol_error")


class Fetched(NamedTuple):
    """What `fetch` returns: the value's version (None: nothing published yet) and its
    arrays by name (None: no version newer than the caller's arrived in time)."""

    version: Optional[int]
    arrays: Optional[Dict[str, np.ndarray[Any, Any]]]


def part_bytes(limits: Mapping[str, int]) -> int:
    """The payload bytes of one part: 4 MiB, or less to fit the server's max_frame_bytes
    (less 64 KiB for the header and metadata); a multiple of 8, so that each part ends on
    an array boundary or inside an array at a multiple of 8 bytes."""
    size = MAX_PART_BYTES
    max_frame = limits.get("max_frame_bytes")
    if max_frame is not None:
        size = min(size, max_frame - _FRAME_HEADROOM)
    size -= size % 8
    if size <= 0:
        raise InvalidArgument(f"the server's max_frame_bytes {max_frame} leaves no room for "
                              f"a publish_part payload (it needs more than "
                              f"{_FRAME_HEADROOM} bytes)")
    return size


def value_arrays(name: str, arrays: Mapping[str, Any]) -> List[Tuple[str, np.ndarray[Any, Any]]]:
    """The arrays of a value to publish, in the mapping's order: numpy arrays (or torch
    tensors, moved to the CPU), C-contiguous and little-endian (copied only when not).
    Raises InvalidArgument naming the array whose name, type or dtype cannot be sent."""
    if not isinstance(name, str):
        raise InvalidArgument(f"a value's name must be a str, got {name!r}")
    if not isinstance(arrays, Mapping):
        raise InvalidArgument(f"value '{name}': arrays must be a mapping of name -> array "
                              f"(a dict, a state_dict), got {type(arrays).__name__}")
    result: List[Tuple[str, np.ndarray[Any, Any]]] = []
    for key, array in arrays.items():
        if not isinstance(key, str):
            raise InvalidArgument(f"value '{name}': array names must be str, got {key!r}")
        result.append((key, _host_array(name, key, array)))
    return result


def _host_array(name: str, key: str, array: Any) -> np.ndarray[Any, Any]:
    torch = sys.modules.get("torch")  # a tensor means torch is imported already
    if torch is not None and isinstance(array, torch.Tensor):
        try:
            array = array.detach().cpu().numpy()
        except (TypeError, RuntimeError) as exc:
            raise InvalidArgument(f"value '{name}': array '{key}' (a tensor of "
                                  f"{array.dtype}) has no numpy form: {exc}; convert it "
                                  f"to one of {', '.join(WIRE_DTYPES)}") from None
    result = np.asarray(array)
    if result.dtype.name not in WIRE_DTYPES:
        raise InvalidArgument(f"value '{name}': array '{key}' has dtype {result.dtype}, "
                              f"which replayd cannot carry; expected one of "
                              f"{', '.join(WIRE_DTYPES)}")
    if result.dtype.byteorder == ">":
        result = result.astype(result.dtype.newbyteorder("<"))
    if not result.flags.c_contiguous:
        result = result.copy(order="C")  # (np.ascontiguousarray turns 0-d into 1-d)
    return result


def value_layout(arrays: Sequence[Tuple[str, np.ndarray[Any, Any]]]
                 ) -> Tuple[List[Dict[str, Any]], int]:
    """The ``publish_begin`` descriptions of `arrays` with their payload offsets (each at
    the next multiple of 8), and the payload's total bytes."""
    described: List[Dict[str, Any]] = []
    offset = 0
    for key, array in arrays:
        described.append({"name": key, "dtype": array.dtype.name, "shape": list(array.shape),
                          "offset": offset})
        offset += padded(array.nbytes)
    return described, offset


def _parts(arrays: Sequence[np.ndarray[Any, Any]], size: int
           ) -> List[Tuple[int, List[memoryview]]]:
    """The payload cut into parts of at most `size` bytes (a multiple of 8): (offset,
    pieces) each, the pieces being memoryviews of the arrays. The frame encoder pads each
    piece to 8 bytes; only an array's last piece may need it, which gives the layout's
    padding, so every part but the last is exactly `size` bytes."""
    parts: List[Tuple[int, List[memoryview]]] = []
    pieces: List[memoryview] = []
    offset = filled = 0
    for array in arrays:
        view = array.reshape(-1).view(np.uint8).data if array.nbytes else None
        start = 0
        while view is not None and start < array.nbytes:
            take = min(size - filled, array.nbytes - start)
            pieces.append(view[start:start + take])
            start += take
            filled += padded(take)
            if filled == size:
                parts.append((offset, pieces))
                offset, pieces, filled = offset + size, [], 0
    if pieces:
        parts.append((offset, pieces))
    return parts


def publish(conn: Connection, name: str, arrays: Mapping[str, Any], *,
            version: Optional[int], seconds: Optional[float], shared: bool = False) -> int:
    """Publishes `arrays` as value `name` on `conn`; returns the committed version.

    `shared`: the connection has the shared-memory plane; a value of STAGED_MIN_BYTES or
    more is then staged (written here into the block the server sends, unmapped, then
    committed) instead of sent in parts.

    `version`: None for the current one + 1, or an explicit higher one. `seconds` bounds
    each wait for replies (``publish_begin``'s, then those of the parts and the commit once
    all are written); writing the parts goes as fast as the server reads them.
    Raises the server's error (ResourceExhausted naming the budget, InvalidArgument for a
    version not above the current one, ...); after a failure past ``publish_begin`` the
    connection is closed, which drops the unfinished upload on the server.
    """
    if version is not None and (isinstance(version, bool) or
                                not isinstance(version, (int, np.integer))):
        raise InvalidArgument(f"value '{name}': version must be an int or None, got "
                              f"{version!r}")
    prepared = value_arrays(name, arrays)
    described, total = value_layout(prepared)
    begin = {"op": "publish_begin", "name": name,
             "version": None if version is None else int(version),
             "arrays": [{k: v for k, v in d.items() if k != "offset"} for d in described]}
    if shared and total >= STAGED_MIN_BYTES:
        begin["staged"] = True
    try:
        reply = conn.call(begin, timeout=seconds)
    except BaseException as exc:
        if not (isinstance(exc, ReplayError) and exc.code not in _UNANSWERED):
            conn.close()  # publish_begin may still execute and hold an upload
        raise
    sent: List[Tuple[int, "Future[Any]"]] = []
    try:
        upload = reply["upload"]
        _check_layout(name, reply, described, total)
        if reply.get("staged"):
            _fill_staged_block(name, reply, prepared, described, total)
        else:
            for offset, pieces in _parts([a for _, a in prepared], part_bytes(conn.limits)):
                sent.append(conn.submit({"op": "publish_part", "upload": upload,
                                         "offset": offset}, pieces, caller_waits=True))
        sent.append(conn.submit({"op": "publish_commit", "upload": upload},
                                caller_waits=True))
        deadline = None if seconds is None else time.monotonic() + seconds
        for request_id, future in sent:
            reply = conn.wait(request_id, future, None if deadline is None
                              else max(0.0, deadline - time.monotonic()))
        return int(reply["version"])
    except BaseException as exc:
        # A refused commit (another publisher committed a higher version meanwhile) ended
        # the upload on the server; after anything else it may still be held there.
        if not (isinstance(exc, ReplayError) and exc.code not in _UNANSWERED and
                all(future.done() and future.exception() is None for _, future in sent[:-1])
                and sent and sent[-1][1].done()):
            conn.close()  # the only way to drop an unfinished upload (see the module's notes)
        raise


def _fill_staged_block(name: str, reply: Mapping[str, Any],
                       prepared: Sequence[Tuple[str, np.ndarray[Any, Any]]],
                       described: Sequence[Mapping[str, Any]], total: int) -> None:
    """Copies the arrays into the staged block the ``publish_begin`` reply carries (its one
    descriptor), at their offsets, then unmaps it and closes the descriptor: the server
    seals the block at the commit only once no writable mapping of it is left."""
    fds = reply.get("descriptors")
    if not isinstance(fds, list) or len(fds) != 1:
        for fd in fds if isinstance(fds, list) else ():
            os.close(fd)
        raise ProtocolError(f"value '{name}': a staged publish_begin reply without its one "
                            f"descriptor: {fds!r}")
    fd = int(fds[0])
    try:
        flags = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)
        with mmap.mmap(fd, total, flags, mmap.PROT_READ | mmap.PROT_WRITE) as block:
            for (_, array), layout in zip(prepared, described):
                if array.size == 0:
                    continue
                destination = np.frombuffer(block, dtype=array.dtype, count=array.size,
                                            offset=int(layout["offset"]))
                destination[...] = array.reshape(-1)
                del destination  # the mapping closes only without views of it
    finally:
        os.close(fd)


def _check_layout(name: str, reply: Mapping[str, Any], described: List[Dict[str, Any]],
                  total: int) -> None:
    """The server's layout must be the one the parts are cut for."""
    offsets = [a.get("offset") for a in reply.get("arrays", [])]
    if reply.get("bytes") != total or offsets != [d["offset"] for d in described]:
        raise ProtocolError(f"value '{name}': the server laid the upload out as "
                            f"{reply.get('bytes')!r} bytes at offsets {offsets}, the client "
                            f"as {total} bytes at {[d['offset'] for d in described]}")


def fetch(conn: Connection, name: str, *, newer_than: Optional[int],
          seconds: Optional[float], grace: float, shared: bool = False) -> Fetched:
    """The value `name` once its version is above `newer_than` (None: any version),
    waiting on the server at most `seconds` (None: without limit); `Fetched(current version,
    None)` when the wait ends without one. The local wait is `seconds` + `grace`, for the
    reply to arrive; past it, replayd.TimeoutError. `shared`: the connection has the
    shared-memory plane; the server then sends the value's sealed block, which is mapped
    copy-on-write here (the arrays view it: nothing is copied until written)."""
    if not isinstance(name, str):
        raise InvalidArgument(f"a value's name must be a str, got {name!r}")
    if newer_than is not None and (isinstance(newer_than, bool) or
                                   not isinstance(newer_than, (int, np.integer))):
        raise InvalidArgument(f"value '{name}': newer_than must be an int or None, got "
                              f"{newer_than!r}")
    meta = {"op": "fetch", "name": name,
            "newer_than": None if newer_than is None else int(newer_than),
            "timeout_ms": timeout_ms(seconds)}
    if shared:
        meta["shared_memory"] = True
    result: Fetched = conn.call(meta, decode=decode_fetch,
                                timeout=None if seconds is None else seconds + grace)
    return result


def decode_fetch(meta: Mapping[str, Any], payload: np.ndarray[Any, Any]) -> Fetched:
    """A ``fetch`` reply as `Fetched`: its arrays are views of `payload` (no copy)."""
    version = meta.get("version")
    version = None if version is None else int(version)
    if meta.get("changed") is False:
        return Fetched(version, None)
    if meta.get("shared_memory"):
        payload = _mapped_block(meta)
    if meta.get("bytes") != payload.nbytes:
        raise ProtocolError(f"a fetch reply announces {meta.get('bytes')!r} bytes and carries "
                            f"{payload.nbytes}")
    arrays: Dict[str, np.ndarray[Any, Any]] = {}
    for described in meta["arrays"]:
        dtype = np.dtype(str(described["dtype"])).newbyteorder("<")
        shape = tuple(int(d) for d in described["shape"])
        offset = int(described["offset"])
        end = offset + math.prod(shape) * dtype.itemsize
        if not 0 <= offset <= end <= payload.nbytes:
            raise ProtocolError(f"array '{described['name']}' of a fetch reply lies at bytes "
                                f"{offset}..{end} of a {payload.nbytes}-byte payload")
        arrays[str(described["name"])] = payload[offset:end].view(dtype).reshape(shape)
    return Fetched(version, arrays)


def _mapped_block(meta: Mapping[str, Any]) -> np.ndarray[Any, Any]:
    """The value's block a shared-memory fetch reply carries, mapped privately (writes stay
    in this process, copy-on-write; untouched pages are the server's, not copied) and its
    descriptor closed: the mapping holds no descriptor (Python's mmap would keep a
    duplicate per fetch). Unmapped when no array views it any more."""
    from .shm import take_descriptor
    fd = take_descriptor(dict(meta))
    try:
        size = int(meta["bytes"])
        held = os.fstat(fd).st_size
        if held < size:
            raise ProtocolError(f"a fetch reply's block holds {held} bytes, less than the "
                                f"value's {size}")
        block = _PrivateMapping(fd, size)
    finally:
        os.close(fd)
    return np.asarray(block)


class _PrivateMapping:
    """A MAP_PRIVATE, read-write mapping of a file's first `size` bytes (libc's mmap: no
    descriptor kept), exposed to numpy; unmapped when garbage collected, which happens once
    no array views it (numpy keeps this object as the arrays' base)."""

    def __init__(self, fd: int, size: int) -> None:
        import ctypes
        import mmap
        libc = _libc()
        self._size = max(size, 1)
        address = libc.mmap(None, self._size, mmap.PROT_READ | mmap.PROT_WRITE,
                            mmap.MAP_PRIVATE, fd, 0)
        if address is None or address == ctypes.c_void_p(-1).value:
            errno = ctypes.get_errno()
            raise ResourceExhausted(f"cannot map a fetched value of {size} bytes: "
                                    f"{os.strerror(errno)}")
        self._address: Optional[int] = address
        self.__array_interface__ = {"data": (address, False), "shape": (size,),
                                    "typestr": "|u1", "version": 3}

    def __del__(self) -> None:
        address, self._address = getattr(self, "_address", None), None
        if address is not None:
            _libc().munmap(address, self._size)


_LIBC: List[Any] = []


def _libc() -> Any:
    """libc with mmap/munmap typed (loaded once)."""
    if not _LIBC:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mmap.restype = ctypes.c_void_p
        libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                              ctypes.c_int, ctypes.c_long]
        libc.munmap.restype = ctypes.c_int
        libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        _LIBC.append(libc)
    return _LIBC[0]
