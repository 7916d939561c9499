#!/usr/bin/env python3
"""Cost of the metrics hooks on the request path: pipelined 1-item inserts against two replayd
binaries (one built without the hooks, one with), alternating runs, medians and ratios.

    /usr/bin/python3 bench/metrics_overhead.py BEFORE_BINARY AFTER_BINARY [--requests N] [--rounds R]

One Unix connection sends pre-encoded insert frames (W1 fields) back to back while a thread
reads the replies, so the server, not the client, is the bottleneck. Reported per binary:
requests per second (wall clock, sensitive to other load on the machine) and the server's CPU
time per request (user + system from /proc/PID/stat, less sensitive to load).
"""
import argparse
import json
import os
import socket
import statistics
import struct
import subprocess
import tempfile
import threading
import time

W1 = [("obs", "float32", [4], 16), ("act", "int64", [], 8), ("rew", "float32", [], 4),
      ("next_obs", "float32", [4], 16), ("done", "uint8", [], 1)]
BATCH = 256  # frames per sendall


def frame(request_id, meta, payload=b""):
    m = json.dumps(meta, separators=(",", ":")).encode()
    return struct.pack("<4sBBHQIIQ", b"RPLY", 1, 1, 0, request_id, len(m), 0,
                       len(payload)) + m + payload


def read_reply(sock):
    head = b""
    while len(head) < 32:
        head += sock.recv(32 - len(head))
    meta_bytes, payload_bytes = struct.unpack("<I4xQ", head[16:32])
    body = b""
    while len(body) < meta_bytes + payload_bytes:
        body += sock.recv(meta_bytes + payload_bytes - len(body))
    return head + body


def cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run(binary, requests):
    """(requests per second, server CPU microseconds per request) of one run."""
    tmp = tempfile.mkdtemp(prefix="replayd-bench-")
    path, ready = os.path.join(tmp, "s.sock"), os.path.join(tmp, "ready.json")
    args = [binary, "--unix", path, "--tcp", "", "--ready-file", ready, "--log-level", "warn"]
    if "--metrics" in subprocess.run([binary, "--help"], capture_output=True, text=True).stdout:
        args += ["--metrics", ""]  # the hooks run either way; no listener needed
    proc = subprocess.Popen(args)
    try:
        while not os.path.exists(ready):
            time.sleep(0.01)
        sock = socket.socket(socket.AF_UNIX)
        sock.connect(path)
        fields = [{"name": name, "dtype": dtype, "shape": shape} for name, dtype, shape, _ in W1]
        sock.sendall(frame(1, {"op": "create_table",
                               "table": {"name": "w1", "capacity": 100000, "fields": fields}}))
        read_reply(sock)
        columns = [{"name": name, "dtype": dtype, "shape": [1] + shape}
                   for name, dtype, shape, _ in W1]
        payload = b"".join(bytes(size + (8 - size % 8) % 8) for *_, size in W1)
        one = frame(7, {"op": "insert", "table": "w1", "n": 1, "columns": columns}, payload)
        sock.sendall(one)
        reply_bytes = len(read_reply(sock))
        requests = requests // BATCH * BATCH
        expected = reply_bytes * requests
        received = [0]

        def reader():
            buffer = bytearray(1 << 20)
            while received[0] < expected:
                n = sock.recv_into(buffer)
                if not n:
                    break
                received[0] += n

        thread = threading.Thread(target=reader)
        cpu_before = cpu_seconds(proc.pid)
        start = time.perf_counter()
        thread.start()
        chunk = one * BATCH
        for _ in range(requests // BATCH):
            sock.sendall(chunk)
        thread.join()
        elapsed = time.perf_counter() - start
        cpu = cpu_seconds(proc.pid) - cpu_before
        assert received[0] == expected, (received[0], expected)
        return requests / elapsed, cpu / requests * 1e6
    finally:
        proc.terminate()
        proc.wait()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("before")
    parser.add_argument("after")
    parser.add_argument("--requests", type=int, default=204800)
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    results = {"before": [], "after": []}
    for round_index in range(args.rounds):
        order = ("before", "after") if round_index % 2 == 0 else ("after", "before")
        for name in order:
            results[name].append(run(getattr(args, name), args.requests))
    medians = {}
    for name, values in results.items():
        rates, cpu = [v[0] for v in values], [v[1] for v in values]
        medians[name] = (statistics.median(rates), statistics.median(cpu))
        print(f"{name:6s} median {medians[name][0]:9.0f} req/s, "
              f"median server CPU {medians[name][1]:.2f} us/req")
    print(f"after/before: throughput {medians['after'][0] / medians['before'][0]:.3f}, "
          f"server CPU per request {medians['after'][1] / medians['before'][1]:.3f}")


if __name__ == "__main__":
    main()
