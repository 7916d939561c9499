"""The replay distributions on /metrics (docs/OPERATIONS.md, "Replay"): after known inserts,
samples, evictions, updates, resets and episodes, each histogram's count, sum and every
bucket match what was done; promtool accepts the exposition; `replayd-cli status` prints the
headline figures. Against the real server binary."""
from __future__ import annotations

import subprocess
import time
from collections import Counter
from typing import Dict, Iterable, Iterator

import numpy as np
import pytest

import replayd
from conftest import ServerProcess
from replayd.cli import main as cli_main
from test_metrics import FIELDS, METRICS_ARGS, batch, parse_samples, require_tool, scrape, value

EPISODE_FIELDS = {"obs": (np.float32, (2,)), "rew": (np.float32, ()),
                  "next_obs": (np.float32, (2,))}


@pytest.fixture(scope="module")
def metrics_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    proc = ServerProcess(tmp_path_factory.mktemp("replay-metrics"),
                         extra_args=METRICS_ARGS).start()
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture
def c(metrics_server: ServerProcess) -> Iterator[replayd.Client]:
    with replayd.Client(metrics_server.unix_address, timeout=30) as client:
        yield client


def buckets(text: str, name: str, table: str) -> Dict[float, float]:
    """le -> cumulative count of histogram `name`'s series for `table`."""
    out = {}
    for (sample, labels), count in parse_samples(text).items():
        labels = dict(labels)
        if sample == f"{name}_bucket" and labels.get("table") == table:
            out[float(labels["le"])] = count
    assert out, f"no {name} buckets for table {table}"
    return out


def assert_histogram(text: str, name: str, table: str, observed: Iterable[float],
                     sum_tolerance: float = 1e-9) -> None:
    """Every bucket holds exactly the observed values <= its bound; _count and _sum agree."""
    observed = list(observed)
    got = buckets(text, name, table)
    assert float("inf") in got and len(got) >= 20
    for le, cumulative in got.items():
        assert cumulative == sum(1 for v in observed if v <= le), (name, le, observed)
    samples = parse_samples(text)
    assert value(samples, f"{name}_count", table=table) == len(observed)
    assert value(samples, f"{name}_sum", table=table) == pytest.approx(
        sum(observed), rel=sum_tolerance, abs=sum_tolerance)


def promtool_clean(text: str) -> None:
    result = subprocess.run([require_tool("promtool"), "check", "metrics"], input=text,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and not (result.stdout + result.stderr).strip(), (
        result.stdout + result.stderr)


def test_times_sampled_at_eviction_counts_each_evicted_item_once_with_its_draws(
        metrics_server, c, table_name):
    c.create_table(table_name, FIELDS, 4, sampler="uniform", remover="fifo", seed=5)
    first = c.insert(table_name, batch(4))
    draws: Counter = Counter()
    for _ in range(7):
        draws.update(int(k) for k in c.sample(table_name, 3).keys)
    later = np.concatenate([c.insert(table_name, batch(1)) for _ in range(6)])
    # FIFO: the 4 first items leave, then the 2 oldest of the later ones (never sampled).
    removed = [draws[int(k)] for k in first] + [0, 0]
    assert sum(removed) == 21
    text = scrape(metrics_server)
    assert_histogram(text, "replayd_table_times_sampled_at_removal", table_name, removed)
    samples = parse_samples(text)
    assert value(samples, "replayd_table_evictions_total", table=table_name) == 6
    assert value(samples, "replayd_table_items", table=table_name) == 4
    assert len(later) == 6
    promtool_clean(text)


def test_sampled_items_report_their_age_in_inserts_and_seconds_and_their_priority(
        metrics_server, c, table_name):
    c.create_table(table_name, FIELDS, 100, sampler="prioritized", priority_exponent=1.0,
                   seed=7)
    priorities = [0.5, 1.0, 3.0, 7.5, 1000.0, 2e-7, 64.0, 0.75, 5.0, 2.0]
    keys = [int(c.insert(table_name, batch(1), priorities=[p])[0]) for p in priorities]
    time.sleep(0.35)
    drawn = np.concatenate([c.sample(table_name, 8).keys for _ in range(5)])
    index = {k: i for i, k in enumerate(keys)}
    ages = [len(keys) - 1 - index[int(k)] for k in drawn]  # the newest item has age 0
    text = scrape(metrics_server)
    assert_histogram(text, "replayd_table_sample_age_inserts", table_name, ages)
    assert_histogram(text, "replayd_table_sample_priority", table_name,
                     [priorities[index[int(k)]] for k in drawn], sum_tolerance=1e-6)
    seconds = buckets(text, "replayd_table_sample_age_seconds", table_name)
    assert seconds[0.256] == 0 and seconds[float("inf")] == len(drawn)  # slept 0.35 s
    samples = parse_samples(text)
    total_s = value(samples, "replayd_table_sample_age_seconds_sum", table=table_name)
    assert 0.35 * len(drawn) <= total_s < 30 * len(drawn)
    assert value(samples, "replayd_table_samples_per_insert", table=table_name) == 4.0


def test_update_priorities_reports_the_age_of_each_stored_key_and_skips_stale_ones(
        metrics_server, c, table_name):
    c.create_table(table_name, FIELDS, 100, sampler="prioritized")
    keys = np.concatenate([c.insert(table_name, batch(1)) for _ in range(10)])
    stale = np.array([10**12], dtype=np.uint64)
    assert c.update_priorities(table_name, np.concatenate([keys[[2, 9, 9]], stale]),
                               np.ones(4)) == 1
    text = scrape(metrics_server)
    assert_histogram(text, "replayd_table_update_age_inserts", table_name, [7, 0, 0])


def test_the_stored_priority_summary_gives_the_quantiles_of_the_stored_items(
        metrics_server, c, table_name):
    c.create_table(table_name, FIELDS, 100, sampler="prioritized")
    c.insert(table_name, batch(10), priorities=np.arange(1, 11, dtype=np.float64))
    samples = parse_samples(scrape(metrics_server))
    name = "replayd_table_stored_priority"
    for q, expected in (("0", 1), ("0.5", 5), ("0.9", 9), ("0.99", 10), ("1", 10)):
        assert value(samples, name, table=table_name, quantile=q) == expected, q
    assert value(samples, f"{name}_count", table=table_name) == 10
    assert value(samples, f"{name}_sum", table=table_name) == 55


def test_reset_table_is_counted_so_inserts_balance_against_items_and_removals(
        metrics_server, c, table_name):
    c.create_table(table_name, FIELDS, 100)
    c.insert(table_name, batch(10))
    draws = Counter(int(k) for k in c.sample(table_name, 3).keys)
    before = parse_samples(scrape(metrics_server))
    assert value(before, "replayd_table_samples_per_insert", table=table_name) == 0.3
    c.reset(table_name)
    c.insert(table_name, batch(2))
    samples = parse_samples(scrape(metrics_server))
    v = lambda name: value(samples, name, table=table_name)  # noqa: E731
    assert v("replayd_table_resets_total") == 1
    assert v("replayd_table_reset_items_total") == 10
    assert v("replayd_table_inserts_total") == 12 == (
        v("replayd_table_items") + v("replayd_table_evictions_total")
        + v("replayd_table_deletes_total") + v("replayd_table_expirations_total")
        + v("replayd_table_reset_items_total"))
    # The limiter's counts start again at the reset: 0 samples for 2 inserts.
    assert v("replayd_table_samples_per_insert") == 0
    assert_histogram(scrape(metrics_server), "replayd_table_times_sampled_at_removal",
                     table_name, [0] * (10 - len(draws)) + list(draws.values()))
    counters = c.table_info(table_name)["counters"]
    assert counters["resets"] == 1 and counters["reset_items"] == 10


def test_episodic_tables_report_episode_lengths_and_the_episode_age_of_draws(
        metrics_server, c, table_name):
    c.create_table(table_name, EPISODE_FIELDS, 64, episodic=True, reward="rew", seed=3)
    c.create_table(table_name + "-items", FIELDS, 8)
    lengths = [3, 5, 1, 9]
    with c.episode_writer(table_name, batch=4) as writer:
        for length in lengths:
            for i in range(length):
                writer.append(obs=np.zeros(2, np.float32), rew=np.float32(i),
                              next_obs=np.zeros(2, np.float32))
            writer.end_episode(terminated=True)
    # Requests of at most 16 draws are recorded whole (docs/OPERATIONS.md).
    nstep = [c.sample(table_name, 16, nstep=2) for _ in range(3)]
    sequences = [c.sample_sequences(table_name, 11, 2) for _ in range(2)]
    text = scrape(metrics_server)
    assert_histogram(text, "replayd_table_episode_length_steps", table_name, lengths)
    age = buckets(text, "replayd_table_draw_episode_age_episodes", table_name)
    assert age[float("inf")] == 70 and age[4] == 70  # 4 episodes: ages 0 .. 3
    assert age[0] > 0  # the newest episode holds 9 of the 18 steps
    assert buckets(text, "replayd_table_sample_age_inserts", table_name)[float("inf")] == 70
    # Item tables have no episodes, hence no episode series.
    assert f'replayd_table_episode_length_steps_count{{table="{table_name}-items"}}' not in text
    assert [len(s.keys) for s in nstep + sequences] == [16, 16, 16, 11, 11]
    promtool_clean(text)
    c.drop_table(table_name + "-items")


def test_cli_status_prints_replay_age_times_sampled_at_removal_and_samples_per_insert(
        capsys, metrics_server, c, table_name):
    c.create_table(table_name, FIELDS, 10, seed=1)
    keys = c.insert(table_name, batch(10))
    for _ in range(4):
        c.sample(table_name, 5)
    c.insert(table_name, batch(10))  # every first item leaves, each after some draws
    code = cli_main(["status", metrics_server.unix_address, "--interval", "0"])
    out = capsys.readouterr().out
    assert code == 0
    section = out.split(f"\n{table_name}:")[1].split("\n\n")[0]
    info = c.table_info(table_name)["replay"]
    age = info["sample_age_inserts"]
    assert age["count"] == 20 and 0 <= age["p50"] <= age["p99"] <= 16
    assert (f"replay age: p50 {age['p50']:,.0f} inserts / " in section
            and "(20 draws)" in section)
    removed = info["times_sampled_at_removal"]
    assert removed["count"] == len(keys) and removed["mean"] == 2.0
    assert "times sampled at removal: p50 " in section and "mean 2 (10 items left)" in section
    assert "samples per insert: 1" in section


def test_the_dqn_example_reads_its_replay_figures_back_from_a_real_prometheus(tmp_path):
    pytest.importorskip("torch", reason="torch is not importable (Debian: python3-torch)")
    require_tool("prometheus")
    import os
    import sys
    from conftest import REPO, server_binary
    env = dict(os.environ, PYTHONPATH=str(REPO / "client" / "python"),
               REPLAYD_BIN=str(server_binary()))
    result = subprocess.run(
        [sys.executable, str(REPO / "examples" / "dqn_cartpole.py"), "--prometheus",
         "--env-steps", "3000", "--min-replay", "200", "--capacity", "1000", "--hidden", "32",
         "--quiet", "--out", str(tmp_path)], env=env, capture_output=True, text=True,
        timeout=240)
    assert result.returncode == 0, result.stdout + result.stderr
    line = next(x for x in result.stdout.splitlines() if x.startswith("replay (from Prometheus)"))
    # 3000 transitions into a table of 1000: 2000 evicted, each counted once.
    assert "of 2,000; samples per insert" in line, line
    p50, p99 = (float(v.replace(",", "")) for v in
                line.split("age at the draw p50 ")[1].split(" inserts")[0].split(" / p99 "))
    assert 0 < p50 <= p99 <= 1024  # the capacity's bucket: (512, 1024]
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return
    assert (tmp_path / "replay_distributions.png").stat().st_size > 0
