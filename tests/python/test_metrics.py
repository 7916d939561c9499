"""The operator's view: /metrics, /healthz and /readyz on the metrics listener, checked
against the real server binary, real promtool and a real Prometheus server."""
from __future__ import annotations

import json
import re
import shutil
import signal
import socket
import struct
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Dict, FrozenSet, Iterator, Optional, Tuple

import numpy as np
import pytest

import replayd
from conftest import REPO, ServerProcess, server_binary

METRICS_ARGS = ["--metrics", "127.0.0.1:0"]
DASHBOARD = REPO / "config" / "grafana" / "replayd.json"
PROMETHEUS_CONFIG = REPO / "config" / "prometheus.yml"
FIELDS = {"obs": (np.float32, 4), "act": (np.int64, ())}

Samples = Dict[Tuple[str, FrozenSet[Tuple[str, str]]], float]
_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)$")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


# -- helpers -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def metrics_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A server of this module with the metrics listener on an ephemeral port."""
    proc = ServerProcess(tmp_path_factory.mktemp("metrics"), extra_args=METRICS_ARGS).start()
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture
def metrics_client(metrics_server: ServerProcess) -> Iterator[replayd.Client]:
    with replayd.Client(metrics_server.unix_address, timeout=30) as c:
        yield c


def http_get(address: str, path: str, timeout: float = 10.0) -> Tuple[int, str, Dict[str, str]]:
    """(status, body, headers) of GET http://address/path."""
    try:
        with urllib.request.urlopen(f"http://{address}{path}", timeout=timeout) as reply:
            return reply.status, reply.read().decode(), dict(reply.headers)
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode(), dict(error.headers)


def scrape(server: ServerProcess) -> str:
    status, body, headers = http_get(server.ready["metrics"], "/metrics")
    assert status == 200
    assert headers["Content-Type"].startswith("text/plain; version=0.0.4")
    return body


def parse_samples(text: str) -> Samples:
    samples: Samples = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        match = _SAMPLE.match(line)
        assert match, f"unparsable exposition line: {line!r}"
        name, labels, value = match.groups()
        samples[(name, frozenset(_LABEL.findall(labels or "")))] = float(value)
    return samples


def value(samples: Samples, name: str, **labels: str) -> Optional[float]:
    return samples.get((name, frozenset(labels.items())))


def delta(before: Samples, after: Samples, name: str, **labels: str) -> float:
    return (value(after, name, **labels) or 0.0) - (value(before, name, **labels) or 0.0)


def family_names(text: str) -> set:
    return {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")}


def raw_http(address: str, payload: bytes, timeout: float = 10.0) -> bytes:
    """Sends `payload` and reads until the server closes the connection."""
    host, port = address.rsplit(":", 1)
    chunks = []
    with socket.create_connection((host, int(port)), timeout=timeout) as sock:
        sock.sendall(payload)
        while True:
            data = sock.recv(65536)
            if not data:
                break
            chunks.append(data)
    return b"".join(chunks)


def batch(n: int) -> dict:
    return {"obs": np.zeros((n, 4), np.float32), "act": np.arange(n, dtype=np.int64)}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def require_tool(name: str) -> str:
    path = shutil.which(name) or (f"/usr/bin/{name}" if Path(f"/usr/bin/{name}").exists() else None)
    if path is None:
        pytest.fail(f"{name} is not installed: run scripts/setup-deps", pytrace=False)
    return path


# -- the counters follow what clients did ----------------------------------------------


def test_table_counters_match_the_inserts_samples_updates_and_deletes_done(
        metrics_server, metrics_client, table_name):
    c = metrics_client
    c.create_table(table_name, FIELDS, 100, sampler="prioritized")
    keys = np.concatenate([c.insert(table_name, batch(n)) for n in (10, 10, 5)])
    c.sample(table_name, 4)
    c.sample(table_name, 4)
    never_issued = np.array([10**12, 10**12 + 1, 10**12 + 2], dtype=np.uint64)
    stale = c.update_priorities(table_name, np.concatenate([keys[:2], never_issued]), np.ones(5))
    assert stale == 3
    assert c.delete(table_name, keys[-2:]) == 2

    samples = parse_samples(scrape(metrics_server))
    assert value(samples, "replayd_table_inserts_total", table=table_name) == 25
    assert value(samples, "replayd_table_samples_total", table=table_name) == 8
    assert value(samples, "replayd_table_priority_updates_total", table=table_name) == 2
    assert value(samples, "replayd_table_stale_updates_total", table=table_name) == 3
    assert value(samples, "replayd_table_deletes_total", table=table_name) == 2
    assert value(samples, "replayd_table_items", table=table_name) == 23
    assert value(samples, "replayd_table_capacity_items", table=table_name) == 100
    assert value(samples, "replayd_table_evictions_total", table=table_name) == 0


def test_requests_and_errors_are_counted_by_op_outcome_and_code(
        metrics_server, metrics_client, table_name):
    c = metrics_client
    c.create_table(table_name, FIELDS, 100, rate_limiter=replayd.MinSize(10))
    before = parse_samples(scrape(metrics_server))

    for _ in range(3):
        c.insert(table_name, batch(2))
    with pytest.raises(replayd.InvalidArgument):
        c.sample(table_name, 1, beta=-1.0)
    with pytest.raises(replayd.InvalidArgument):
        c._call({"op": "no_such_op"})
    with pytest.raises(replayd.NotFound):
        c.sample(table_name + "-missing", 1)
    with pytest.raises(replayd.TimeoutError):
        c.sample(table_name, 10, timeout=0)

    after = parse_samples(scrape(metrics_server))
    assert delta(before, after, "replayd_requests_total", op="insert", outcome="ok") == 3
    assert delta(before, after, "replayd_requests_total", op="sample",
                 outcome="invalid_argument") == 1
    assert delta(before, after, "replayd_requests_total", op="unknown",
                 outcome="invalid_argument") == 1
    assert delta(before, after, "replayd_requests_total", op="sample", outcome="not_found") == 1
    assert delta(before, after, "replayd_requests_total", op="sample", outcome="timeout") == 1
    assert delta(before, after, "replayd_errors_total", code="invalid_argument") == 2
    assert delta(before, after, "replayd_errors_total", code="not_found") == 1
    assert delta(before, after, "replayd_errors_total", code="timeout") == 1
    assert delta(before, after, "replayd_errors_total", code="protocol_error") == 0
    assert delta(before, after, "replayd_request_duration_seconds_count", op="insert") == 3
    assert delta(before, after, "replayd_request_duration_seconds_count", op="sample") == 3
    assert delta(before, after, "replayd_received_bytes_total") > 3 * 2 * (16 + 8)
    assert delta(before, after, "replayd_sent_bytes_total") > 0
    assert value(after, "replayd_connections_open") >= 1


def test_a_broken_frame_counts_as_a_protocol_error(metrics_server):
    before = parse_samples(scrape(metrics_server))
    with socket.socket(socket.AF_UNIX) as sock:
        sock.connect(metrics_server.ready["unix"])
        sock.sendall(b"NOPE" + bytes(28))
        sock.settimeout(10)
        while sock.recv(4096):
            pass
    after = parse_samples(scrape(metrics_server))
    assert delta(before, after, "replayd_errors_total", code="protocol_error") == 1
    assert delta(before, after, "replayd_connections_accepted_total") == 1


def test_a_recreated_table_starts_its_counters_again_and_a_dropped_one_disappears(
        metrics_server, metrics_client, table_name):
    c = metrics_client
    c.create_table(table_name, FIELDS, 100)
    c.insert(table_name, batch(5))
    c.drop_table(table_name)
    assert value(parse_samples(scrape(metrics_server)), "replayd_table_inserts_total",
                 table=table_name) is None
    c.create_table(table_name, FIELDS, 100)
    c.insert(table_name, batch(2))
    samples = parse_samples(scrape(metrics_server))
    assert value(samples, "replayd_table_inserts_total", table=table_name) == 2


def test_a_sample_held_by_the_rate_limiter_shows_as_waiting_then_in_the_wait_histogram(
        metrics_server, metrics_client, table_name):
    c = metrics_client
    c.create_table(table_name, FIELDS, 100, rate_limiter=replayd.MinSize(4))
    before = parse_samples(scrape(metrics_server))
    pending = c.sample_async(table_name, 2, timeout=30)
    deadline = time.monotonic() + 10
    while True:
        samples = parse_samples(scrape(metrics_server))
        if value(samples, "replayd_rate_limiter_waiting_requests", table=table_name,
                 op="sample") == 1:
            break
        assert time.monotonic() < deadline, "the parked sample never showed as waiting"
        time.sleep(0.02)
    assert value(samples, "replayd_rate_limiter_waiting_requests", table=table_name,
                 op="insert") == 0
    time.sleep(0.05)
    c.insert(table_name, batch(4))
    assert pending.result(timeout=10).keys.shape == (2,)
    after = parse_samples(scrape(metrics_server))
    assert value(after, "replayd_rate_limiter_waiting_requests", table=table_name,
                 op="sample") == 0
    assert delta(before, after, "replayd_rate_limiter_wait_seconds_count", op="sample") == 1
    assert delta(before, after, "replayd_rate_limiter_wait_seconds_sum", op="sample") >= 0.05


# -- the exposition is valid ----------------------------------------------------------------


def test_promtool_accepts_the_live_exposition_of_a_server_under_load_without_warnings(
        metrics_server, metrics_client, table_name):
    promtool = require_tool("promtool")
    metrics_client.create_table(table_name, FIELDS, 1000, sampler="prioritized")
    stop = threading.Event()

    def load() -> None:
        with replayd.Client(metrics_server.unix_address, timeout=30) as c:
            while not stop.is_set():
                keys = c.insert(table_name, batch(32))
                c.sample(table_name, 16)
                c.update_priorities(table_name, keys, np.full(len(keys), 2.0))
                with pytest.raises(replayd.NotFound):
                    c.sample(table_name + "-absent", 1)

    worker = threading.Thread(target=load)
    worker.start()
    try:
        time.sleep(0.3)
        texts = [scrape(metrics_server) for _ in range(3)]
    finally:
        stop.set()
        worker.join(30)
    for text in texts:
        assert f'replayd_table_inserts_total{{table="{table_name}"}}' in text
        result = subprocess.run([promtool, "check", "metrics"], input=text,
                                capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stdout + result.stderr
        assert result.stdout.strip() == "" and result.stderr.strip() == "", (
            "promtool printed lint warnings:\n" + result.stdout + result.stderr)


def test_every_family_has_help_and_the_expected_names_exist(metrics_server, metrics_client,
                                                            table_name):
    metrics_client.create_table(table_name, FIELDS, 10)
    text = scrape(metrics_server)
    names = family_names(text)
    helps = {line.split()[2] for line in text.splitlines() if line.startswith("# HELP ")}
    assert names == helps
    for expected in ("replayd_build_info", "replayd_connections_open",
                     "replayd_connections_accepted_total", "replayd_requests_total",
                     "replayd_request_duration_seconds", "replayd_received_bytes_total",
                     "replayd_sent_bytes_total", "replayd_errors_total",
                     "replayd_rate_limiter_wait_seconds", "replayd_rate_limiter_waiting_requests",
                     "replayd_table_items", "replayd_table_inserts_total",
                     "process_resident_memory_bytes", "process_cpu_seconds_total",
                     "process_open_fds"):
        assert expected in names, expected
    with replayd.Client(metrics_server.unix_address) as c:
        version = c.server["server"]  # "replayd X.Y.Z"
    assert f'replayd_build_info{{version="{version.split()[-1]}"}} 1' in text


# -- health endpoints and HTTP handling --------------------------------------------------


def test_healthz_and_readyz_answer_200_on_a_serving_server(metrics_server):
    assert http_get(metrics_server.ready["metrics"], "/healthz")[:2] == (200, "ok\n")
    assert http_get(metrics_server.ready["metrics"], "/readyz")[:2] == (200, "ready\n")


def test_unknown_paths_are_404_and_other_methods_405(metrics_server):
    address = metrics_server.ready["metrics"]
    assert http_get(address, "/")[0] == 404
    assert http_get(address, "/metrics/extra")[0] == 404
    reply = raw_http(address, b"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
    assert reply.startswith(b"HTTP/1.1 405 ")
    assert b"\r\nAllow: GET, HEAD\r\n" in reply


def test_a_malformed_request_is_answered_400_and_the_connection_closed(metrics_server):
    for garbage in (b"GARBAGE\r\n\r\n", b"GET /metrics HTTP/9.9\r\n\r\n",
                    b"GET /metrics HTTP/1.1\nHost: x\n\n", b"\x16\x03\x01\x00\xa5\x01\x00"):
        reply = raw_http(metrics_server.ready["metrics"], garbage)  # returns once closed
        assert reply.startswith(b"HTTP/1.1 400 Bad Request\r\n"), (garbage, reply)
        assert b"Connection: close" in reply


def test_an_oversized_request_is_answered_400_and_the_connection_closed(metrics_server):
    request = b"GET /metrics HTTP/1.1\r\nX-Padding: " + b"a" * 20000 + b"\r\n\r\n"
    reply = raw_http(metrics_server.ready["metrics"], request)
    assert reply.startswith(b"HTTP/1.1 400 Bad Request\r\n")
    assert b"larger than 8192 bytes" in reply


def test_one_connection_serves_several_requests_and_head(metrics_server):
    import http.client
    host, port = metrics_server.ready["metrics"].rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        for path in ("/healthz", "/metrics", "/readyz"):
            conn.request("GET", path)
            reply = conn.getresponse()
            assert reply.status == 200
            reply.read()
        conn.request("HEAD", "/metrics")
        reply = conn.getresponse()
        assert reply.status == 200 and int(reply.headers["Content-Length"]) > 0
        assert reply.read() == b""
    finally:
        conn.close()


def test_pipelined_requests_are_answered_in_order(metrics_server):
    reply = raw_http(metrics_server.ready["metrics"],
                     b"GET /healthz HTTP/1.1\r\n\r\nGET /nope HTTP/1.1\r\n\r\n"
                     b"GET /readyz HTTP/1.1\r\nConnection: close\r\n\r\n")
    statuses = re.findall(rb"HTTP/1.1 (\d{3}) ", reply)
    assert statuses == [b"200", b"404", b"200"]


def request_frame(request_id: int, meta: dict) -> bytes:
    body = json.dumps(meta).encode()
    return struct.pack("<4sBBHQIIQ", b"RPLY", 1, 1, 0, request_id, len(body), 0, 0) + body


def test_readyz_answers_503_while_the_server_drains_and_healthz_stays_200(make_server):
    server = make_server(extra_args=METRICS_ARGS)
    address = server.ready["metrics"]
    with replayd.Client(server.unix_address, timeout=30) as c:
        c.create_table("big", {"pixels": (np.uint8, 1 << 16)}, 64)
        c.insert("big", {"pixels": np.zeros((64, 1 << 16), np.uint8)})
    # A client that asks for 32 MB of samples and reads none of it keeps its connection
    # busy flushing, so the server drains for its whole shutdown grace period.
    stuck = socket.socket(socket.AF_UNIX)
    stuck.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    stuck.connect(server.ready["unix"])
    try:
        stuck.sendall(b"".join(request_frame(i, {"op": "sample", "table": "big", "n": 64})
                               for i in range(8)))
        time.sleep(0.3)
        server.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 4
        status = body = None
        while time.monotonic() < deadline:
            status, body, _ = http_get(address, "/readyz")
            if status == 503:
                break
            time.sleep(0.02)
        assert (status, body) == (503, "not ready: shutting down\n")
        assert http_get(address, "/healthz")[0] == 200
    finally:
        stuck.close()
    assert server.proc.wait(15) == 0


# -- configuration and startup -------------------------------------------------------------


def test_the_ready_file_names_the_bound_metrics_address(metrics_server):
    host, port = metrics_server.ready["metrics"].rsplit(":", 1)
    assert host == "127.0.0.1" and int(port) > 0


def test_an_empty_metrics_address_disables_the_listener(make_server):
    server = make_server(extra_args=["--metrics", ""])
    assert "metrics" not in server.ready


def test_listen_metrics_in_the_config_file_enables_the_listener(tmp_path):
    config = tmp_path / "replayd.json"
    config.write_text(json.dumps({"listen": {"unix": str(tmp_path / "s.sock"), "tcp": None,
                                             "metrics": "127.0.0.1:0"}}))
    ready_file = tmp_path / "ready.json"
    proc = subprocess.Popen([str(server_binary()), "--config", str(config),
                             "--ready-file", str(ready_file), "--log-level", "warn"])
    try:
        deadline = time.monotonic() + 10
        while not ready_file.exists():
            assert proc.poll() is None, "replayd exited"
            assert time.monotonic() < deadline, "replayd not ready"
            time.sleep(0.02)
        address = json.loads(ready_file.read_text())["metrics"]
        assert http_get(address, "/healthz")[0] == 200
    finally:
        proc.terminate()
        proc.wait(10)


def test_a_malformed_metrics_address_in_the_config_file_is_refused_naming_the_key(tmp_path):
    config = tmp_path / "replayd.json"
    config.write_text(json.dumps({"listen": {"metrics": "localhost"}}))
    result = subprocess.run([str(server_binary()), "--config", str(config)],
                            capture_output=True, text=True, timeout=10)
    assert result.returncode == 2
    assert "listen.metrics" in result.stderr


def test_a_metrics_port_in_use_stops_the_server_from_starting():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run([str(server_binary()), "--unix", "", "--tcp", "127.0.0.1:0",
                                 "--metrics", f"127.0.0.1:{port}"],
                                capture_output=True, text=True, timeout=10)
    assert result.returncode == 1
    assert f"cannot listen for metrics on 127.0.0.1:{port}" in result.stderr


# -- dashboard and scrape config -----------------------------------------------------------


def dashboard_exprs() -> list:
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = []

    def walk(panels):
        for panel in panels:
            exprs.extend(t["expr"] for t in panel.get("targets", []) if "expr" in t)
            walk(panel.get("panels", []))

    walk(dashboard["panels"])
    return exprs


def test_the_dashboard_parses_and_queries_only_metrics_that_replayd_exposes(
        metrics_server, metrics_client, table_name):
    exprs = dashboard_exprs()
    assert len(exprs) >= 8
    metrics_client.create_table(table_name, FIELDS, 10)
    # Episode families exist once an episodic table does.
    metrics_client.create_table(table_name + "-episodes", {"obs": (np.float32, ()),
                                                          "rew": (np.float32, ())},
                                10, episodic=True, reward="rew")
    exposed = family_names(scrape(metrics_server))
    queried = set()
    for expr in exprs:
        queried.update(re.findall(r"\b((?:replayd|process)_[a-z0-9_]+)", expr))
    assert queried
    for name in sorted(queried):
        family = re.sub(r"_(bucket|sum|count)$", "", name)
        assert name in exposed or family in exposed, f"the dashboard queries {name}"
    metrics_client.drop_table(table_name + "-episodes")


def test_the_dashboard_shows_every_replay_histogram_as_a_heatmap():
    dashboard = json.loads(DASHBOARD.read_text())
    heatmaps = [p for p in dashboard["panels"] if p["type"] == "heatmap"]
    shown = {re.search(r"(replayd_[a-z_]+)_bucket", t["expr"]).group(1)
             for p in heatmaps for t in p["targets"]}
    assert {"replayd_table_sample_age_inserts", "replayd_table_sample_age_seconds",
            "replayd_table_times_sampled_at_removal", "replayd_table_sample_priority",
            "replayd_table_update_age_inserts", "replayd_table_episode_length_steps",
            "replayd_table_sample_staleness_versions"} <= shown
    for panel in heatmaps:
        assert all(t.get("format") == "heatmap" for t in panel["targets"]), panel["title"]


def test_the_prometheus_config_is_valid_and_scrapes_the_default_address():
    promtool = require_tool("promtool")
    result = subprocess.run([promtool, "check", "config", str(PROMETHEUS_CONFIG)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "127.0.0.1:9700" in PROMETHEUS_CONFIG.read_text()


# -- a real Prometheus scrapes replayd ----------------------------------------------------


def prometheus_query(address: str, query: str) -> Optional[float]:
    url = f"http://{address}/api/v1/query?" + urllib.parse.urlencode({"query": query})
    with urllib.request.urlopen(url, timeout=5) as reply:
        body = json.loads(reply.read())
    assert body["status"] == "success", body
    result = body["data"]["result"]
    return float(result[0]["value"][1]) if result else None


def test_a_real_prometheus_scrapes_replayd_and_sees_every_insert(make_server, tmp_path):
    prometheus = require_tool("prometheus")
    server = make_server(extra_args=METRICS_ARGS)
    table = "scraped"
    with replayd.Client(server.unix_address, timeout=30) as c:
        c.create_table(table, FIELDS, 1000)
        for n in (7, 7, 7, 3):
            c.insert(table, batch(n))
    inserted = 24

    web = f"127.0.0.1:{free_port()}"
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        "scrape_configs:\n  - job_name: replayd\n    static_configs:\n"
        f"      - targets: ['{server.ready['metrics']}']\n")
    log = open(tmp_path / "prometheus.log", "wb")
    proc = subprocess.Popen([prometheus, f"--config.file={config}",
                             f"--storage.tsdb.path={tmp_path / 'data'}",
                             f"--web.listen-address={web}", "--log.level=warn"],
                            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    log.close()
    try:
        deadline = time.monotonic() + 30
        seen = None
        while time.monotonic() < deadline:
            assert proc.poll() is None, (tmp_path / "prometheus.log").read_text()[-3000:]
            try:
                seen = prometheus_query(web, f'replayd_table_inserts_total{{table="{table}"}}')
            except (urllib.error.URLError, ConnectionError):
                seen = None  # not listening yet
            if seen == inserted:
                break
            time.sleep(0.25)
        assert seen == inserted, f"Prometheus saw {seen}, expected {inserted}"
        assert prometheus_query(web, 'up{job="replayd"}') == 1
        assert prometheus_query(
            web, 'replayd_requests_total{op="insert",outcome="ok"}') == 4
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
