"""replayd-cli against the real server: what it prints and the exit codes scripts rely on
(0 done, 1 refused by the server, 2 bad command line, 3 server unreachable)."""
from __future__ import annotations

import json
import subprocess
import sys
import threading

import numpy as np
import pytest

import replayd
from replayd.cli import main


def run(capsys, *argv):
    try:
        code = main([str(a) for a in argv])
    except SystemExit as exc:  # argparse: --version, usage errors
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def test_status_shows_tables_sizes_and_why_samples_wait(capsys, server, client, table_name):
    client.create_table(table_name, {"x": (np.float32, 2)}, 500,
                        rate_limiter=replayd.MinSize(100))
    client.insert(table_name, {"x": np.zeros((10, 2), np.float32)})
    code, out, _ = run(capsys, "status", server.unix_address, "--interval", "0")
    assert code == 0
    assert f"{table_name}: 10 / 500 items, uniform sampler" in out
    assert "holds 10 items and its rate limiter samples from 100" in out


def test_status_reports_rates_measured_over_the_interval(capsys, server, client, table_name):
    client.create_table(table_name, {"x": (np.float32, ())}, 100_000)
    stop = threading.Event()

    def insert():
        with replayd.Client(server.unix_address) as c:
            while not stop.is_set():
                c.insert(table_name, {"x": np.zeros(100, np.float32)})

    thread = threading.Thread(target=insert)
    thread.start()
    try:
        code, out, _ = run(capsys, "status", server.unix_address, "--interval", "0.3", "--json")
    finally:
        stop.set()
        thread.join()
    assert code == 0
    table = next(t for t in json.loads(out)["tables"] if t["name"] == table_name)
    assert table["inserts_per_s"] > 0 and table["samples_per_s"] == 0
    assert table["sample_limiter"] == "ready" and table["insert_limiter"] == "ready"


def test_status_explains_an_insert_held_by_a_queue_limiter(capsys, server, client, table_name):
    client.create_table(table_name, {"x": (np.float32, ())}, 100, sampler="fifo",
                        rate_limiter=replayd.Queue(5))
    client.insert(table_name, {"x": np.zeros(5, np.float32)})
    code, out, _ = run(capsys, "status", server.unix_address, "--interval", "0")
    assert code == 0
    assert "inserts: waits: inserts are ahead of samples (5 inserted, 0 sampled" in out


def test_create_table_then_again_is_refused_unless_exist_ok(capsys, server, client, table_name):
    args = ["create-table", server.unix_address, table_name, "--field", "obs:float32:84x84",
            "--field", "act:int64", "--capacity", "1000", "--sampler", "prioritized",
            "--min-size", "10"]
    code, out, _ = run(capsys, *args)
    assert code == 0 and f"table {table_name}: 2 fields" in out
    schema = client.schema(table_name)
    assert [(f.name, f.dtype.name, f.shape) for f in schema.fields] == \
        [("obs", "float32", (84, 84)), ("act", "int64", ())]
    info = client.table_info(table_name)
    assert info["description"]["sampler"]["kind"] == "prioritized"
    assert run(capsys, *args[:-1], "20")[0] == 1  # a different description
    assert run(capsys, *args, "--exist-ok")[0] == 0


def test_drop_table_removes_it_and_a_missing_one_exits_1(capsys, server, client, table_name):
    client.create_table(table_name, {"x": (np.float32, ())}, 10)
    assert run(capsys, "drop-table", server.unix_address, table_name)[0] == 0
    assert table_name not in client.tables()
    code, _, err = run(capsys, "drop-table", server.unix_address, table_name)
    assert code == 1 and "not_found" in err and table_name in err


def test_snapshot_writes_a_file_and_without_data_dir_exits_1(capsys, make_server, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    srv = make_server(tcp=False, extra_args=["--data-dir", str(data)])
    code, out, _ = run(capsys, "snapshot", srv.unix_address)
    assert code == 0 and "snapshot " in out
    assert list(data.glob("snapshot-*"))
    bare = make_server(tcp=False)
    code, _, err = run(capsys, "snapshot", bare.unix_address)
    assert code == 1 and "data directory" in err


def test_bad_command_lines_exit_2_and_unreachable_servers_exit_3(capsys, server, tmp_path):
    code, _, err = run(capsys, "create-table", server.unix_address, "t", "--field", "obs",
                       "--capacity", "5")
    assert code == 2 and "NAME:DTYPE" in err
    assert run(capsys, "status", "ftp://nowhere")[0] == 2
    assert run(capsys, "frobnicate", server.unix_address)[0] == 2
    code, _, err = run(capsys, "status", f"unix://{tmp_path}/none.sock")
    assert code == 3 and "cannot connect" in err


def test_python_dash_m_replayd_is_the_cli(server):
    result = subprocess.run([sys.executable, "-m", "replayd", "status", server.unix_address,
                             "--interval", "0"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "replayd" in result.stdout and "tables" in result.stdout


def test_status_json_piped_into_head_stops_quietly(make_server):
    """`replayd-cli status --json | head -c 100`: the reader leaves after 100 bytes of a
    reply larger than a pipe holds; the CLI drops the rest without a traceback, exit 0."""
    server = make_server(tcp=False)
    with replayd.Client(server.unix_address) as c:
        for i in range(80):  # about 100 KB of INFO: more than the 64 KB a pipe buffers
            c.create_table(f"table_{i:03d}", {"obs": (np.float32, 4)}, 10)
    script = (f"{sys.executable} -m replayd status {server.unix_address} --json "
              "--interval 0 | head -c 100; echo; echo \"cli exit ${PIPESTATUS[0]}\"")
    result = subprocess.run(["bash", "-c", script], capture_output=True, text=True,
                            timeout=60)
    assert result.stdout.startswith("{") and result.stdout.endswith("cli exit 0\n"), \
        result.stdout[-300:] + result.stderr
    assert result.stderr == ""
