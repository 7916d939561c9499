"""Wire codec unit tests (no server): frames against the bytes of docs/PROTOCOL.md."""
from __future__ import annotations

import json

import numpy as np
import pytest

from replayd import ProtocolError
from replayd.wire import (HEADER_BYTES, KIND_REPLY, FrameReader, decode_header,
                            encode_frame, encode_header, padded, padding)

# "A complete exchange" in docs/PROTOCOL.md: request 7, a ping, and its reply.
PING_HEADER = bytes.fromhex("52504C59 01010000 0700000000000000 0D000000 00000000 "
                            "0000000000000000")
PING_REQUEST = PING_HEADER + b'{"op":"ping"}'
PING_REPLY = bytes.fromhex("52504C59 01020000 0700000000000000 02000000 00000000 "
                           "0000000000000000") + b"{}"


def joined(pieces) -> bytes:
    return b"".join(bytes(memoryview(p).cast("B")) for p in pieces)


def read_all(data: bytes, chunk: int, **kwargs):
    """Feeds `data` to a FrameReader `chunk` bytes at a time, as a socket would."""
    reader = FrameReader(**kwargs)
    frames = []
    offset = 0
    while offset < len(data):
        target = reader.buffer()
        n = min(len(target), chunk, len(data) - offset)
        target[:n] = data[offset:offset + n]
        del target
        offset += n
        frames += reader.advance(n)
    assert reader.idle
    return frames


def test_ping_request_encodes_to_the_documented_bytes():
    assert joined(encode_frame(7, {"op": "ping"})) == PING_REQUEST


def test_header_is_32_bytes_little_endian():
    header = encode_header(KIND_REPLY, 0x0102030405060708, 0x11223344, 0x55)
    assert len(header) == HEADER_BYTES == 32
    assert header[8:16] == bytes([8, 7, 6, 5, 4, 3, 2, 1])
    assert header[16:20] == bytes([0x44, 0x33, 0x22, 0x11])
    assert decode_header(header) == (KIND_REPLY, 0x0102030405060708, 0x11223344, 0x55)


@pytest.mark.parametrize("chunk", [1, 3, 32, 34, 4096])
def test_documented_ping_reply_decodes_whatever_the_chunking(chunk):
    frames = read_all(PING_REPLY * 3, chunk)
    assert [(f.kind, f.request_id, f.meta, f.payload.nbytes) for f in frames] == \
        [(KIND_REPLY, 7, {}, 0)] * 3


def test_columns_are_padded_to_8_bytes_with_zeros():
    a = np.arange(3, dtype=np.uint8)  # 3 bytes -> 5 bytes of padding
    b = np.arange(2, dtype=np.float64)  # 16 bytes, no padding
    c = np.ones((2, 3), dtype=np.int16)  # 12 bytes -> 4 bytes of padding
    data = joined(encode_frame(9, {"op": "x"}, [a, b, c]))
    meta_bytes = int.from_bytes(data[16:20], "little")
    payload_bytes = int.from_bytes(data[24:32], "little")
    payload = data[32 + meta_bytes:]
    assert payload_bytes == len(payload) == 8 + 16 + 16
    assert payload[:8] == bytes([0, 1, 2, 0, 0, 0, 0, 0])
    assert np.frombuffer(payload, np.float64, 2, 8).tolist() == [0.0, 1.0]
    assert np.frombuffer(payload, np.int16, 6, 24).tolist() == [1] * 6
    assert payload[36:] == bytes(4)


def test_padding_rule():
    assert [padding(b) for b in (0, 1, 7, 8, 9, 16)] == [0, 7, 1, 0, 7, 0]
    assert [padded(b) for b in (0, 1, 7, 8, 9)] == [0, 8, 8, 8, 16]


def test_non_contiguous_columns_are_refused():
    with pytest.raises(ValueError, match="contiguous"):
        encode_frame(1, {"op": "x"}, [np.arange(10)[::2]])


def reply(request_id: int, meta: dict, payload: bytes = b"") -> bytes:
    raw = json.dumps(meta).encode()
    return encode_header(KIND_REPLY, request_id, len(raw), len(payload)) + raw + payload


@pytest.mark.parametrize("chunk", [1, 7, 100, 1 << 16, 1 << 20])
def test_large_payloads_and_metadata_survive_any_chunking(chunk):
    big = np.random.default_rng(1).integers(0, 255, 300_000, dtype=np.uint8).tobytes()
    big_meta = {"tables": ["t" * 50] * 3000}  # larger than the 64 KiB staging buffer
    stream = reply(1, {"n": 1}, big) + reply(2, big_meta) + reply(3, {}, b"12345678")
    frames = read_all(stream, chunk)
    assert [f.request_id for f in frames] == [1, 2, 3]
    assert frames[0].payload.tobytes() == big
    assert frames[1].meta == big_meta
    assert frames[2].payload.tobytes() == b"12345678"


def test_payload_is_aligned_and_owned_by_the_frame():
    frames = read_all(reply(1, {}, bytes(64)) + reply(2, {}, bytes(64)), 1 << 16)
    for frame in frames:
        assert frame.payload.ctypes.data % 8 == 0
        assert frame.payload.flags.owndata and frame.payload.flags.writeable


@pytest.mark.parametrize("offset,value,message", [
    (0, b"XPLY", "magic"), (4, b"\x02", "version"), (5, b"\x03", "kind"),
    (6, b"\x01", "flags"), (20, b"\x01", "reserved")])
def test_broken_headers_raise_protocol_error(offset, value, message):
    data = bytearray(PING_REPLY)
    data[offset:offset + len(value)] = value
    with pytest.raises(ProtocolError, match=message):
        read_all(bytes(data), 4096)


def test_metadata_must_be_a_json_object():
    with pytest.raises(ProtocolError, match="JSON"):
        read_all(encode_header(KIND_REPLY, 1, 3, 0) + b"{x}", 4096)
    with pytest.raises(ProtocolError, match="object"):
        read_all(encode_header(KIND_REPLY, 1, 2, 0) + b"[]", 4096)
    for broken in (b'{"a":1}x', b'{"a":1}{}', b'x{"a":1}', b'{"a":"\xff"}', b" "):
        with pytest.raises(ProtocolError, match="not valid JSON"):
            read_all(encode_header(KIND_REPLY, 1, len(broken), 0) + broken, 4096)
    # As json.loads: whitespace may surround the object.
    for meta in (b'{"a":1} \n', ' \t{"a":[1,"\u00e9"]}'.encode(), b'{"a":{}}'):
        frames = read_all(encode_header(KIND_REPLY, 1, len(meta), 0) + meta, 4096)
        assert frames[0].meta == json.loads(meta)


def test_absurd_sizes_are_refused_before_allocating():
    with pytest.raises(ProtocolError, match="payload"):
        read_all(encode_header(KIND_REPLY, 1, 2, 1 << 50) + b"{}", 4096)
