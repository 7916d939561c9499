"""Honest capacity (docs/CONFIG.md, "max_tables_total_bytes"): a table that could not be
filled within the memory tables may take is refused when it is created, with a message
that names what it would take and every option that makes it fit; a large table is set up
off the server's thread, and the server stays exact about names and limits meanwhile (the
real server)."""
from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

import replayd

GIB = 1 << 30


@pytest.fixture
def limited_server(make_server, tmp_path: Path):
    def start(limits):
        path = tmp_path / f"limits-{len(list(tmp_path.glob('limits-*')))}.json"
        path.write_text(json.dumps({"limits": limits}))
        return make_server(extra_args=["--config", str(path)])
    return start


def test_a_table_beyond_the_tables_memory_is_refused_naming_every_way_to_fit(limited_server):
    server = limited_server({"max_tables_total_bytes": 256 << 20})
    with replayd.Client(server.unix_address, timeout=30) as client:
        client.create_table("first", {"x": ("float32", (1024,))}, 40_000)  # ~165 MB
        with pytest.raises(replayd.ResourceExhausted) as refused:
            client.create_table("second", {"x": ("float32", (1024,))}, 40_000)
        message = str(refused.value)
        assert "table 'second' may take" in message
        assert "max_tables_total_bytes" in message
        assert "a capacity of at most" in message
        assert "second" not in [t["name"] for t in client.info()["tables"]]
        client.drop_table("first")  # its bytes are free again
        client.create_table("second", {"x": ("float32", (1024,))}, 40_000)


def test_a_compressed_table_is_told_about_max_compressed_bytes(limited_server):
    server = limited_server({"max_tables_total_bytes": 1 << 30})
    with replayd.Client(server.unix_address, timeout=30) as client:
        fields = {"obs": ("uint8", (84, 84)), "rew": ("float32", ())}
        kwargs = dict(episodic=True, reward="rew", compression={"obs": "zstd"},
                      bootstrap=[], next_of=())
        with pytest.raises(replayd.ResourceExhausted, match="max_compressed_bytes"):
            client.create_table("pixels", fields, 200_000, **kwargs)
        client.create_table("pixels", fields, 200_000, max_compressed_bytes=256 << 20,
                            **kwargs)


def test_by_default_tables_may_take_the_machines_memory(make_server):
    server = make_server()
    with replayd.Client(server.unix_address, timeout=30) as client:
        total = 0
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                total = int(line.split()[1]) * 1024
        capacity = int(2 * total // 4096)  # 4 KiB items: twice the machine's memory
        with pytest.raises(replayd.ResourceExhausted, match="machine's memory"):
            client.create_table("huge", {"x": ("uint8", (4096,))}, capacity)


def test_concurrent_creates_of_one_large_table_make_it_once(make_server):
    server = make_server()
    results = []

    def create(exist_ok: bool) -> None:
        with replayd.Client(server.unix_address, timeout=120) as client:
            try:
                client.create_table("large", {"x": ("uint8", ())}, 1 << 21, exist_ok=exist_ok)
                results.append("created")
            except replayd.ReplayError as error:
                results.append(error.code)

    threads = [threading.Thread(target=create, args=(i % 2 == 0,)) for i in range(4)]
    for thread in threads:
        thread.start()
    with replayd.Client(server.unix_address, timeout=30) as pinger:
        for _ in range(20):
            pinger.ping()  # served while the tables are being set up
    for thread in threads:
        thread.join()
    # Two asked with exist_ok (both succeed, same description); of the other two, the first
    # to finish wins and the other is told the table exists.
    assert results.count("created") + results.count("already_exists") == 4
    assert results.count("created") >= 1
    with replayd.Client(server.unix_address, timeout=30) as client:
        assert [t["name"] for t in client.info()["tables"]] == ["large"]
        client.insert("large", {"x": [1, 2, 3]})
        assert client.info("large")["size"] == 3
