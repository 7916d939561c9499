"""The server's busy polling (``--busy-poll-us`` / ``"busy_poll_us"``, docs/OPERATIONS.md,
"Busy polling") against the real binary: a polling server answers every request as one
that sleeps, shows its polling in /metrics, stops on SIGTERM; a bad value is refused with
the flag's or the key's name."""
from __future__ import annotations

import json
import signal
import subprocess

import numpy as np

import replayd
from conftest import server_binary
from test_metrics import METRICS_ARGS, parse_samples, scrape, value

FIELDS = {"obs": (np.float32, 3), "act": (np.int64, ())}


def rows(start: int, n: int) -> dict:
    return {"obs": np.arange(start * 3, (start + n) * 3, dtype=np.float32).reshape(n, 3),
            "act": np.arange(start, start + n, dtype=np.int64)}


def test_a_polling_server_stores_and_samples_what_it_is_sent_and_counts_its_polling(
        make_server):
    server = make_server(extra_args=["--busy-poll-us", "200", *METRICS_ARGS])
    with replayd.Client(server.unix_address, timeout=30) as client:
        client.create_table("t", FIELDS, 1000)
        keys = [client.insert("t", rows(i * 10, 10)) for i in range(20)]
        pending = [client.insert_async("t", rows(200 + i * 10, 10)) for i in range(20)]
        keys += [future.result() for future in pending]
        assert client.size("t") == 400
        sample = client.sample("t", 64)
        # Every sampled row is one that was inserted: obs holds 3 x act .. 3 x act + 2.
        act = sample.data["act"]
        assert np.array_equal(sample.data["obs"],
                              (act[:, None] * 3 + np.arange(3)).astype(np.float32))
        assert len(set(np.concatenate(keys).tolist())) == 400
    polled = value(parse_samples(scrape(server)), "replayd_busy_poll_seconds_total")
    assert polled is not None and polled > 0
    server.proc.send_signal(signal.SIGTERM)
    assert server.proc.wait(15) == 0


def test_a_server_that_does_not_poll_reports_no_polling(make_server):
    server = make_server(extra_args=METRICS_ARGS)
    with replayd.Client(server.unix_address, timeout=30) as client:
        client.create_table("t", FIELDS, 100)
        for i in range(10):
            client.insert("t", rows(i, 1))
    polled = value(parse_samples(scrape(server)), "replayd_busy_poll_seconds_total")
    assert polled == 0


def test_a_busy_poll_out_of_range_is_refused_naming_the_flag_or_the_key(tmp_path):
    flag = subprocess.run([str(server_binary()), "--busy-poll-us", "100001", "--unix", "",
                           "--tcp", "", "--metrics", ""],
                          capture_output=True, text=True, timeout=10)
    assert flag.returncode != 0
    assert "--busy-poll-us" in flag.stderr and "100000" in flag.stderr
    config = tmp_path / "replayd.json"
    config.write_text(json.dumps({"busy_poll_us": -5}))
    keyed = subprocess.run([str(server_binary()), "--config", str(config), "--check-config"],
                           capture_output=True, text=True, timeout=10)
    assert keyed.returncode == 2
    assert "busy_poll_us" in keyed.stderr
