"""Raw protocol access for tests that misbehave on purpose: frames built byte by byte
(every header field settable) and a bare socket that sends them and reads reply frames,
with no client library in between. docs/PROTOCOL.md is the reference for every byte.
"""
from __future__ import annotations

import json
import socket
import struct
import time
from typing import Any, Dict, Optional, Tuple, Union

HEADER = struct.Struct("<4sBBHQIIQ")  # magic, version, kind, flags, id, meta, reserved, payload
HEADER_BYTES = HEADER.size


def header(meta_bytes: int, payload_bytes: int = 0, *, request_id: int = 1,
           magic: bytes = b"RPLY", version: int = 1, kind: int = 1, flags: int = 0,
           reserved: int = 0) -> bytes:
    return HEADER.pack(magic, version, kind, flags, request_id, meta_bytes, reserved,
                       payload_bytes)


def frame(meta: Union[Dict[str, Any], str, bytes], payload: bytes = b"", *,
          request_id: int = 1, **fields: Any) -> bytes:
    """One request frame; `meta` is a dict (JSON-encoded), or raw text/bytes sent as is."""
    if isinstance(meta, dict):
        meta = json.dumps(meta)
    raw = meta.encode() if isinstance(meta, str) else meta
    return header(len(raw), len(payload), request_id=request_id, **fields) + raw + payload


def padded(data: bytes) -> bytes:
    return data + bytes((8 - len(data) % 8) % 8)


class RawConnection:
    """A bare stream socket to the server at `address` (``unix://PATH`` or ``tcp://H:P``)."""

    def __init__(self, address: str, timeout: float = 10.0) -> None:
        if address.startswith("unix://"):
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.sock.settimeout(timeout)
            self.sock.connect(address[len("unix://"):])
        else:
            host, port = address[len("tcp://"):].rsplit(":", 1)
            self.sock = socket.create_connection((host.strip("[]"), int(port)), timeout)
        self.buffer = b""

    def __enter__(self) -> "RawConnection":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        self.sock.close()

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _fill(self, n: int, deadline: float) -> bool:
        """Reads until `n` bytes are buffered; False on EOF (or reset) first."""
        while len(self.buffer) < n:
            self.sock.settimeout(max(0.001, deadline - time.monotonic()))
            try:
                chunk = self.sock.recv(1 << 16)
            except ConnectionResetError:
                return False
            if not chunk:
                return False
            self.buffer += chunk
        return True

    def read_reply(self, timeout: float = 10.0
                   ) -> Optional[Tuple[int, Dict[str, Any], bytes]]:
        """The next reply frame as (request_id, meta, payload); None if the server closed
        the connection first. Raises socket.timeout when nothing complete arrives in time."""
        deadline = time.monotonic() + timeout
        if not self._fill(HEADER_BYTES, deadline):
            assert not self.buffer, f"connection closed inside a reply header: {self.buffer!r}"
            return None
        magic, version, kind, flags, request_id, meta_bytes, reserved, payload_bytes = \
            HEADER.unpack_from(self.buffer)
        assert (magic, version, kind, flags, reserved) == (b"RPLY", 1, 2, 0, 0)
        total = HEADER_BYTES + meta_bytes + payload_bytes
        assert self._fill(total, deadline), "connection closed inside a reply"
        meta = json.loads(self.buffer[HEADER_BYTES:HEADER_BYTES + meta_bytes])
        payload = self.buffer[HEADER_BYTES + meta_bytes:total]
        self.buffer = self.buffer[total:]
        return request_id, meta, payload

    def call(self, meta: Dict[str, Any], payload: bytes = b"", request_id: int = 1,
             timeout: float = 10.0) -> Dict[str, Any]:
        self.send(frame(meta, payload, request_id=request_id))
        reply = self.read_reply(timeout)
        assert reply is not None, "the server closed the connection"
        assert reply[0] == request_id
        return reply[1]

    def closed_by_server(self, timeout: float = 10.0) -> bool:
        """True once the server has closed the connection (EOF or reset) with nothing more
        to read; False if a frame or bytes arrive, or nothing happens within `timeout`."""
        deadline = time.monotonic() + timeout
        try:
            return not self._fill(len(self.buffer) + 1, deadline)
        except (socket.timeout, TimeoutError):
            return False


def error_code(meta: Dict[str, Any]) -> Optional[str]:
    error = meta.get("error")
    return error.get("code") if isinstance(error, dict) else None
