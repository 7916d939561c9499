"""Compressed frames that are wrong (docs/PIXELS.md, docs/PROTOCOL.md "Frame fields"): a
frame whose zstd header is invalid or declares the wrong size is refused at append with an
error naming the field, and nothing is stored; one corrupt past its header (the server
does not decompress on the hot path) gives the reader that samples it an error naming the
table and key, never a crash or wrong data; the server decompresses for readers that ask
for raw values and reports the same. Also: a compressed table survives a restart from its
snapshot with every frame intact."""
from __future__ import annotations

from typing import Any, List, Tuple

import numpy as np
import pytest
import zstandard

import replayd
from replayd.columns import decode_sample, decode_keys

FRAME = (6, 7)


def create(client: replayd.Client, table: str) -> None:
    client.create_table(table, {"obs": (np.uint8, FRAME), "rew": (np.float32, ())}, 64,
                        episodic=True, next_of=["obs"], stack={"obs": 2},
                        compression={"obs": "zstd"})


def good_frame(value: int) -> bytes:
    compressor = zstandard.ZstdCompressor(level=3, write_checksum=True)
    return compressor.compress(np.full(FRAME, value, np.uint8).tobytes())


def append(client: replayd.Client, table: str, frames: List[bytes]) -> Any:
    """append_steps of one step per frame to a new episode, built by hand, on the client's
    connection (which is the episodes' writer)."""
    episode = client._call({"op": "open_episodes", "table": table, "n": 1})["episodes"][0]
    n = len(frames)
    meta = {"op": "append_steps", "table": table, "n": n,
            "columns": [{"name": "obs", "dtype": "uint8", "shape": [n, *FRAME],
                         "compression": "zstd", "bytes": sum(map(len, frames))},
                        {"name": "rew", "dtype": "float32", "shape": [n]}]}
    buffers: List[Any] = [np.array([len(f) for f in frames], "<u4"),
                          np.frombuffer(b"".join(frames), np.uint8),
                          np.ones(n, "<f4"), np.full(n, episode, "<u8")]
    keys = client.connection().submit(meta, buffers, decode_keys)[1].result(10)
    client._call({"op": "end_episode", "table": table, "episode": episode})
    return keys


@pytest.mark.parametrize("spoil, words", [
    (lambda f: b"\x00" + f[1:], "wrong magic number"),
    (lambda f: f[:5] + bytes([f[5] ^ 0x01]) + f[6:], "declares"),  # the content size
    (lambda f: f[:-2], "given"),                                     # cut short
    (lambda f: f + b"\x00\x00", "given"),                            # trailing bytes
], ids=["magic", "declared-size", "truncated", "trailing"])
def test_a_frame_with_a_bad_header_is_refused_and_nothing_is_stored(
        client: replayd.Client, table_name: str, spoil: Any, words: str) -> None:
    create(client, table_name)
    frame = good_frame(3)
    assert frame[4] & 0x20, "the writer's frames are single-segment (one content-size byte)"
    with pytest.raises(replayd.InvalidArgument) as raised:
        append(client, table_name, [good_frame(1), spoil(frame)])
    message = str(raised.value)
    assert "field 'obs'" in message and "row 1" in message and words in message, message
    assert client.size(table_name) == 0
    append(client, table_name, [good_frame(1), good_frame(2)])  # the table still works
    assert client.size(table_name) == 2


def corrupt_table(client: replayd.Client, table: str) -> Tuple[int, bytes]:
    """A table whose episode holds a frame corrupt inside its block (header intact); returns
    that step's key."""
    create(client, table)
    frame = bytearray(good_frame(9))
    frame[-6] ^= 0xFF  # inside the compressed block or checksum: the header stays valid
    keys = append(client, table, [good_frame(1), bytes(frame)])
    return int(keys[1]), bytes(frame)


def test_a_frame_corrupt_past_its_header_fails_its_reader_with_the_table_and_key(
        client: replayd.Client, table_name: str) -> None:
    key, _ = corrupt_table(client, table_name)
    with pytest.raises(replayd.ReplayError) as raised:
        for _ in range(20):  # the start with the good frame decodes; the corrupt one fails
            client.sample(table_name, 8)
    message = str(raised.value)
    assert f"table '{table_name}'" in message and "field 'obs'" in message, message
    assert "corrupt" in message
    assert isinstance(raised.value, replayd.frame_fields.CorruptFrame)
    client.ping()  # the server is unharmed


def test_raw_readers_get_the_servers_error_naming_table_and_key(
        client: replayd.Client, table_name: str) -> None:
    key, _ = corrupt_table(client, table_name)
    meta = {"op": "sample", "table": table_name, "n": 8, "nstep": 1, "raw": True}
    with pytest.raises(replayd.InvalidArgument) as raised:
        for _ in range(20):
            client.connection().submit(meta, (), decode_sample)[1].result(10)
    message = str(raised.value)
    assert f"table '{table_name}'" in message and f"key {key}" in message, message
    client.ping()


def test_raw_readers_get_the_frames_decompressed(client: replayd.Client,
                                                  table_name: str) -> None:
    create(client, table_name)
    append(client, table_name, [good_frame(v) for v in (1, 2, 3)])
    meta = {"op": "sample", "table": table_name, "n": 16, "nstep": 1, "raw": True}
    sample = client.connection().submit(meta, (), decode_sample)[1].result(10)
    for obs, nxt in zip(sample["obs"], sample["next_obs"]):
        # Stacks of 2 over an episode 1, 2, 3 whose last step is its final observation.
        assert obs[1, 0, 0] in (1, 2) and nxt[1, 0, 0] == obs[1, 0, 0] + 1
        assert obs[0, 0, 0] == max(1, obs[1, 0, 0] - 1)


def server_with_snapshots(make_server: Any, tmp_path: Any) -> Any:
    """A server that snapshots to a data directory at exit and restores at start."""
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    return make_server(extra_args=["--data-dir", str(data_dir)])


def test_a_compressed_table_survives_a_restart_from_its_snapshot(make_server: Any,
                                                                 tmp_path: Any) -> None:
    server = server_with_snapshots(make_server, tmp_path)
    with replayd.Client(server.unix_address) as c:
        create(c, "pixels")
        with c.episode_writer("pixels", batch=3) as writer:
            for episode in range(4):
                for t in range(5):
                    writer.append(obs=np.full(FRAME, 10 * episode + t, np.uint8), rew=1.0)
                writer.end_episode(obs=np.full(FRAME, 10 * episode + 5, np.uint8))
        before = {int(k): bytes(o) for page in c.read_all("pixels")
                  for k, o in zip(page["key"], page["obs"])}
    server.restart()  # SIGTERM writes the final snapshot; the start restores it
    with replayd.Client(server.unix_address) as c:
        after = {int(k): bytes(o) for page in c.read_all("pixels")
                 for k, o in zip(page["key"], page["obs"])}
        assert after == before and len(after) == 24
        sample = c.sample("pixels", 64)
        assert np.array_equal(sample["next_obs"][:, 1], sample["obs"][:, 1] + 1)


def test_a_table_without_history_padding_keeps_it_over_a_restart(make_server: Any,
                                                                 tmp_path: Any) -> None:
    server = server_with_snapshots(make_server, tmp_path)
    with replayd.Client(server.unix_address) as c:
        c.create_table("pixels", {"obs": (np.uint8, FRAME), "rew": (np.float32, ())}, 64,
                       episodic=True, stack={"obs": 3}, pad_history=False)
        with c.episode_writer("pixels", batch=3) as writer:
            for episode in range(4):
                for t in range(5):  # positions 0 and 1 hold history only
                    writer.append(obs=np.full(FRAME, 10 * episode + t, np.uint8), rew=1.0)
                writer.end_episode()
        assert c.table_info("pixels")["history_steps"] == 8
    server.restart()
    with replayd.Client(server.unix_address) as c:
        info = c.table_info("pixels")
        assert info["description"]["pad_history"] is False
        assert info["history_steps"] == 8 and info["size"] == 20
        sample = c.sample("pixels", 200, nstep=1)
        newest = sample["obs"][:, 2, 0, 0]
        assert set(newest.tolist()) == {10 * e + t for e in range(4) for t in (2, 3, 4)}
        assert np.array_equal(sample["obs"][:, 0, 0, 0], newest - 2)  # never padded
