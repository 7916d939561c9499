#!/usr/bin/env python3
"""Double DQN with prioritized replay on CartPole: explorer processes feed a torch learner
through replayd.

- Explorers (processes started with "spawn", each given the pickled replayd.Client) run
  CartPole (gymnasium's CartPole-v1 when importable, else the numpy copy in _cartpole.py
  with the same dynamics), act epsilon-greedily with a numpy copy of the learner's Q
  network, and append transitions through a Writer.
- The learner iterates replayd.torch.ReplayDataset (a prefetching sampler thread, tensors
  sharing the received memory), takes double-DQN steps (online net picks the next action,
  target net scores it; Huber loss weighted by the importance weights), sends |TD| + eps
  back as priorities, and publishes its weights to the explorers every few steps as a
  published value (docs/VALUES.md: replayd.torch.publish_module); explorers fetch a newer
  version, if any, between episodes (``fetch(..., newer_than=version, timeout=0)``: an
  unchanged value costs a round trip and no bytes).
- The table's SampleToInsertRatio limiter keeps `--samples-per-insert` sampled items per
  inserted transition, so learner and explorers keep the same pace on any machine.

CartPole-v1 is solved at a mean return of 475 over recent episodes (500 is the most an
episode can return). A full run stops there or at --env-steps:

    REPLAYD_BIN=build/service/replayd /usr/bin/python3 examples/dqn_cartpole.py

It starts its own server (replayd.testing) unless --address names one, prints progress
(tqdm when installed, plain lines otherwise), and writes examples/out/returns.png (return
vs environment steps) and examples/out/replay_wait.png (the learner's replay-wait time)
with matplotlib when installed. Needs torch and numpy.

With --prometheus (and the `prometheus` binary on PATH) the server's metrics listener is
scraped every second by a real Prometheus during training; at the end the replay
distributions (docs/OPERATIONS.md, "Replay") are read back from Prometheus: the age of the
data the learner trained on and how often a transition was replayed before it was evicted,
printed and drawn in examples/out/replay_distributions.png.
"""
from __future__ import annotations

import argparse
import collections
import contextlib
import copy
import json
import multiprocessing
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any, Deque, Dict, Iterator, List, Optional, Tuple

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "client" / "python"))

import replayd  # noqa: E402
from _cartpole import (SOLVED_RETURN, SOLVED_WINDOW, Progress, make_env,  # noqa: E402
                       numpy_q, q_network)

TABLE_FIELDS = {"obs": (np.float32, 4), "act": (np.int64, ()), "rew": (np.float32, ()),
                "next_obs": (np.float32, 4), "done": (np.uint8, ())}


def explorer(client: replayd.Client, table: str, index: int, args: argparse.Namespace,
             stop: Any, reports: Any) -> None:
    """Acts with the latest published weights, writes every transition, reports each
    episode's (explorer's env steps, return)."""
    env = make_env(seed=1000 + index)
    rng = np.random.default_rng(index)
    steps_budget = args.env_steps // args.explorers
    try:
        run_explorer(client, table, args, env, rng, stop, reports, index, steps_budget)
    except replayd.ReplayError:
        if not stop.is_set():  # the learner dropping the table at the end is expected
            raise


def run_explorer(client: replayd.Client, table: str, args: argparse.Namespace, env: Any,
                 rng: np.random.Generator, stop: Any, reports: Any, index: int,
                 steps_budget: int) -> None:
    # The learner published its first weights before starting the explorers.
    version, params = newer_params(client, args, None, None, timeout=60)
    obs, episode_return, steps = env.reset(), 0.0, 0
    with client.writer(table, batch=32, max_in_flight=4) as writer:
        while steps < steps_budget and not stop.is_set():
            epsilon = max(args.epsilon_min, 1.0 - steps / args.epsilon_decay_steps)
            if rng.random() < epsilon:
                action = int(rng.integers(2))
            else:
                action = int(np.argmax(numpy_q(params, args.hidden, obs)))
            next_obs, reward, terminated, truncated = env.step(action)
            writer.append(obs=obs, act=action, rew=reward, next_obs=next_obs,
                          done=int(terminated))
            episode_return += reward
            steps += 1
            obs = next_obs
            if terminated or truncated:
                reports.put((index, steps, episode_return))
                obs, episode_return = env.reset(), 0.0
                version, params = newer_params(client, args, version, params, timeout=0)
    reports.put((index, steps, None))  # finished


def newer_params(client: replayd.Client, args: argparse.Namespace, version: Optional[int],
                 params: Any, timeout: float) -> Tuple[Optional[int], np.ndarray]:
    """The learner's weights as the flat vector `numpy_q` reads, when a version newer than
    `version` is published (waiting up to `timeout` s for one); else `params` unchanged.
    The value is the net's state_dict: its parameters in order, as parameters_to_vector
    lays them out."""
    newer, arrays = client.fetch(args.policy, newer_than=version, timeout=timeout)
    if arrays is None:
        if params is None:
            raise SystemExit(f"no weights published as '{args.policy}' within {timeout} s")
        return version, params
    return newer, np.concatenate([array.ravel() for array in arrays.values()])


# -- the learner -------------------------------------------------------------------------

@contextlib.contextmanager
def server_address(args: argparse.Namespace) -> Iterator[Tuple[str, Optional[str]]]:
    """(client address, metrics host:port or None)."""
    if args.address:
        yield args.address, args.metrics
        return
    import replayd.testing
    if not args.prometheus:
        with replayd.testing.server() as srv:
            yield srv.address, None
        return
    # replayd.testing starts servers without a metrics listener: start one with it here.
    with tempfile.TemporaryDirectory(prefix="dqn-replayd-") as tmp:
        ready_file = Path(tmp) / "ready.json"
        with open(Path(tmp) / "replayd.log", "wb") as log:
            process = subprocess.Popen(
                [replayd.testing.find_binary(None), "--unix", f"{tmp}/replayd.sock", "--tcp", "",
                 "--metrics", "127.0.0.1:0", "--ready-file", str(ready_file)],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 30
            ready: Dict[str, Any] = {}
            while not ready:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("replayd did not start: " +
                                       (Path(tmp) / "replayd.log").read_text())
                time.sleep(0.05)
                with contextlib.suppress(OSError, ValueError):
                    ready = json.loads(ready_file.read_text())
            yield f"unix://{ready['unix']}", ready["metrics"]
        finally:
            process.terminate()
            process.wait(30)


# -- Prometheus: scrapes the server during training, answers the replay questions after ----

class Prometheus:
    """A real Prometheus server scraping `target` (host:port) every second, in a temporary
    directory; query() runs an instant PromQL query."""

    def __init__(self, target: str) -> None:
        binary = shutil.which("prometheus")
        if binary is None:
            raise SystemExit("--prometheus: no prometheus binary on PATH (Debian: prometheus)")
        self.dir = tempfile.TemporaryDirectory(prefix="dqn-prometheus-")
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.web = f"127.0.0.1:{sock.getsockname()[1]}"
        config = Path(self.dir.name) / "prometheus.yml"
        config.write_text("global:\n  scrape_interval: 1s\n"
                          "scrape_configs:\n  - job_name: replayd\n    static_configs:\n"
                          f"      - targets: ['{target}']\n")
        self.process = subprocess.Popen(
            [binary, f"--config.file={config}", f"--storage.tsdb.path={self.dir.name}/data",
             f"--web.listen-address={self.web}", "--log.level=warn"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while self.query("up") is None:  # listening and scraping
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise RuntimeError("prometheus did not start scraping within 30 s")
            time.sleep(0.25)

    def query(self, promql: str) -> Optional[List[Dict[str, Any]]]:
        url = f"http://{self.web}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
        try:
            with urllib.request.urlopen(url, timeout=5) as reply:
                body = json.loads(reply.read())
        except OSError:
            return None
        result = body["data"]["result"] if body.get("status") == "success" else []
        return result or None

    def scalar(self, promql: str) -> float:
        result = self.query(promql)
        return float(result[0]["value"][1]) if result else float("nan")

    def buckets(self, metric: str, table: str) -> List[Tuple[float, float]]:
        """(le, cumulative count) of a histogram's series for `table`, le ascending."""
        result = self.query(f'{metric}_bucket{{table="{table}"}}') or []
        return sorted((float(r["metric"]["le"]), float(r["value"][1])) for r in result)

    def close(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.dir.cleanup()


def replay_figures(prometheus: Prometheus, table: str) -> Dict[str, Any]:
    """The whole run's replay distributions, read from Prometheus after a last scrape."""
    time.sleep(2.5)  # at least two scrapes after the learner's last step
    figures: Dict[str, Any] = {}
    for key, metric in (("age_inserts", "replayd_table_sample_age_inserts"),
                        ("age_seconds", "replayd_table_sample_age_seconds"),
                        ("times_sampled", "replayd_table_times_sampled_at_removal")):
        selector = f'{metric}_bucket{{table="{table}"}}'
        figures[key] = {
            "p50": prometheus.scalar(f"histogram_quantile(0.5, {selector})"),
            "p99": prometheus.scalar(f"histogram_quantile(0.99, {selector})"),
            "mean": prometheus.scalar(f'{metric}_sum{{table="{table}"}} / '
                                      f'{metric}_count{{table="{table}"}}'),
            "count": prometheus.scalar(f'{metric}_count{{table="{table}"}}'),
            "buckets": prometheus.buckets(metric, table),
        }
    removed = figures["times_sampled"]
    never = prometheus.scalar(
        f'replayd_table_times_sampled_at_removal_bucket{{table="{table}",le="0"}}')
    removed["never_share"] = never / removed["count"] if removed["count"] else float("nan")
    figures["samples_per_insert"] = prometheus.scalar(
        f'replayd_table_samples_per_insert{{table="{table}"}}')
    return figures


def train(args: argparse.Namespace) -> Dict[str, Any]:
    import torch
    import replayd.torch

    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    net = q_network(args.hidden)
    target = copy.deepcopy(net)
    optimizer = torch.optim.Adam(net.parameters(), lr=args.lr)

    with server_address(args) as (address, metrics_address):
        prometheus: Optional[Prometheus] = None
        if args.prometheus:
            if metrics_address is None:
                raise SystemExit("--prometheus with --address needs --metrics HOST:PORT")
            prometheus = Prometheus(metrics_address)
        client = replayd.Client(address, timeout=60)
        table = args.table
        with contextlib.suppress(replayd.NotFound):
            client.drop_table(table)
        # The table follows the published weights (docs/VERSIONS.md): each transition carries
        # the version of the weights its explorer acted with (stamped by the client from its
        # last fetch), and the server measures how stale the learner's draws are.
        client.create_table(
            table, TABLE_FIELDS, args.capacity, sampler="prioritized", priority_exponent=0.6,
            rate_limiter=replayd.SampleToInsertRatio(
                args.samples_per_insert, args.min_replay,
                error_buffer=args.samples_per_insert * args.min_replay),
            versions={"value": args.policy})

        context = multiprocessing.get_context("spawn")
        replayd.torch.publish_module(client, args.policy, net)  # the explorers' first weights
        stop = context.Event()
        reports = context.Queue()
        explorers = [context.Process(target=explorer, args=(client, table, i, args, stop,
                                                            reports))
                     for i in range(args.explorers)]
        for process in explorers:
            process.start()

        dataset = replayd.torch.ReplayDataset(client, table, args.batch_size, timeout=5.0)
        progress = Progress(args.env_steps, args.quiet)
        env_steps = [0] * args.explorers
        finished = 0
        history: List[Tuple[int, float]] = []  # (total env steps, episode return)
        recent: Deque[float] = collections.deque(maxlen=SOLVED_WINDOW)
        waits: List[Tuple[float, float]] = []  # per learner step: (replay wait, step), s
        learner_steps, solved = 0, False
        started = time.monotonic()
        step_time = 0.0
        batches = iter(dataset)
        try:
            while finished < args.explorers and not solved:
                while not reports.empty():
                    index, steps, episode_return = reports.get()
                    env_steps[index] = steps
                    if episode_return is None:
                        finished += 1
                        continue
                    history.append((sum(env_steps), episode_return))
                    recent.append(episode_return)
                    solved = len(recent) == recent.maxlen and \
                        float(np.mean(recent)) >= SOLVED_RETURN
                waited_before = dataset.wait_seconds
                step_started = time.perf_counter()
                try:
                    batch = next(batches)
                except (replayd.TimeoutError, StopIteration):
                    # Explorers finishing: the limiter holds the learner back.
                    if not any(p.is_alive() for p in explorers) and reports.empty():
                        break
                    continue
                waited = dataset.wait_seconds - waited_before
                beta = min(1.0, 0.4 + 0.6 * sum(env_steps) / args.env_steps)
                weights = batch["weights"] ** (beta / 0.4)  # the sample's beta is 0.4
                q = net(batch["obs"]).gather(1, batch["act"][:, None]).squeeze(1)
                with torch.no_grad():
                    next_action = net(batch["next_obs"]).argmax(1, keepdim=True)
                    next_q = target(batch["next_obs"]).gather(1, next_action).squeeze(1)
                    y = batch["rew"] + args.gamma * (1 - batch["done"].float()) * next_q
                td = y - q
                loss = (weights / weights.max() * torch.nn.functional.smooth_l1_loss(
                    q, y, reduction="none")).mean()
                optimizer.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(net.parameters(), 10.0)
                optimizer.step()
                dataset.update_priorities(batch["keys"], td.detach().abs() + 1e-3)
                learner_steps += 1
                waits.append((waited, time.perf_counter() - step_started))
                step_time += waits[-1][1]
                if learner_steps % args.target_every == 0:
                    target.load_state_dict(net.state_dict())
                if learner_steps % args.publish_every == 0:
                    replayd.torch.publish_module(client, args.policy, net)
                mean_return = float(np.mean(recent)) if recent else 0.0
                progress.update(sum(env_steps), mean_return, learner_steps,
                                dataset.wait_seconds / max(step_time, 1e-9))
        finally:
            stop.set()
            progress.close()
            batches.close()  # closes the sampler
            replay = None
            staleness = client.info(table)["replay"]["sample_staleness_versions"]
            if prometheus is not None:
                try:
                    replay = replay_figures(prometheus, table)  # before the table goes
                finally:
                    prometheus.close()
            client.drop_table(table)  # inserts still waiting for the limiter fail now
            for process in explorers:
                process.join(30)
                if process.is_alive():
                    process.terminate()
    elapsed = time.monotonic() - started
    result = {"env_steps": sum(env_steps), "learner_steps": learner_steps,
              "episodes": len(history), "solved": solved,
              "mean_return_last_20": float(np.mean(recent)) if recent else 0.0,
              "best_return": max((r for _, r in history), default=0.0),
              "replay_wait_share": dataset.wait_seconds / max(step_time, 1e-9),
              "seconds": elapsed, "history": history, "waits": waits, "replay": replay,
              "staleness": staleness}
    return result


def plot(result: Dict[str, Any], out: Path) -> List[Path]:
    """returns.png and replay_wait.png in `out` (nothing without matplotlib)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    out.mkdir(parents=True, exist_ok=True)
    steps = [s for s, _ in result["history"]]
    returns = [r for _, r in result["history"]]
    smooth = [float(np.mean(returns[max(0, i - 19):i + 1])) for i in range(len(returns))]
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(steps, returns, ".", alpha=0.3, label="episode return")
    ax.plot(steps, smooth, label="mean of the last 20")
    ax.axhline(SOLVED_RETURN, color="grey", linestyle="--", label="solved (475)")
    ax.set_xlabel("environment steps (all explorers)")
    ax.set_ylabel("return")
    ax.set_title("Double DQN, prioritized replay through replayd, CartPole-v1")
    ax.legend(loc="upper left")
    fig.tight_layout()
    paths = [out / "returns.png"]
    fig.savefig(paths[0], dpi=100)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(7, 4))
    waits = np.array(result["waits"]).reshape(-1, 2)
    window = max(1, min(500, len(waits) // 20))
    kernel = np.ones(window)
    share = 100 * np.convolve(waits[:, 0], kernel, "valid") / \
        np.maximum(np.convolve(waits[:, 1], kernel, "valid"), 1e-12)
    ax.plot(np.arange(window, len(waits) + 1), share)
    ax.set_xlabel("learner step")
    ax.set_ylabel(f"% of step time waiting for replay\n(over {window} steps)")
    ax.set_ylim(bottom=0)
    ax.set_title(f"Learner replay wait: {100 * result['replay_wait_share']:.1f} % of step "
                 f"time overall (rate limiter included)")
    fig.tight_layout()
    paths.append(out / "replay_wait.png")
    fig.savefig(paths[1], dpi=100)
    plt.close(fig)
    if result.get("replay"):
        paths.append(plot_replay(result["replay"], out / "replay_distributions.png", plt))
    return paths


def plot_replay(replay: Dict[str, Any], path: Path, plt: Any) -> Path:
    """Bars of the replay-age and times-sampled-at-eviction histograms (one bar per
    power-of-two bucket, as Prometheus stored them), with p50 and p99 marked."""
    panels = (("age_inserts", "replay age at the draw (inserts since stored)"),
              ("age_seconds", "replay age at the draw (seconds)"),
              ("times_sampled", "times sampled when evicted"))
    fig, axes = plt.subplots(1, 3, figsize=(10.5, 3.2))
    for ax, (key, title) in zip(axes, panels):
        figures = replay[key]
        bounds = [(le, c) for le, c in figures["buckets"] if le != float("inf")]
        counts = np.diff([0.0] + [c for _, c in bounds])
        keep = np.nonzero(counts)[0]
        lo, hi = (keep[0], keep[-1] + 1) if len(keep) else (0, 0)
        labels = [f"{le:g}" for le, _ in bounds[lo:hi]]
        total = max(figures["count"], 1.0)
        ax.bar(range(len(labels)), 100 * counts[lo:hi] / total, color="tab:blue")
        ax.set_xticks(range(len(labels)))
        ax.set_xticklabels(labels, rotation=90, fontsize=7)
        ax.set_xlabel("bucket upper bound (le)", fontsize=8)
        ax.set_ylabel("% of observations", fontsize=8)
        unit = " s" if key == "age_seconds" else ""
        ax.set_title(f"{title}\np50 {figures['p50']:.3g}{unit}, p99 {figures['p99']:.3g}{unit}, "
                     f"mean {figures['mean']:.3g}{unit}", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--address", help="a running server (default: start one)")
    parser.add_argument("--table", default="dqn_cartpole")
    parser.add_argument("--explorers", type=int, default=2)
    parser.add_argument("--env-steps", type=int, default=300_000,
                        help="environment steps of all explorers together, at most")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--hidden", type=int, default=64, help="units per hidden layer")
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--gamma", type=float, default=0.99)
    parser.add_argument("--capacity", type=int, default=50_000)
    parser.add_argument("--min-replay", type=int, default=1000,
                        help="transitions stored before the learner starts")
    parser.add_argument("--samples-per-insert", type=float, default=16.0,
                        help="sampled items per inserted transition (batch 64: a learner "
                             "step per 4 environment steps)")
    parser.add_argument("--epsilon-decay-steps", type=int, default=10_000)
    parser.add_argument("--epsilon-min", type=float, default=0.02)
    parser.add_argument("--target-every", type=int, default=250,
                        help="learner steps between target network updates")
    parser.add_argument("--publish-every", type=int, default=25,
                        help="learner steps between weight updates to the explorers")
    parser.add_argument("--policy", default=None,
                        help="the published value the weights go through "
                             "(default: TABLE/q)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent / "out"),
                        help="where the plots go (default examples/out)")
    parser.add_argument("--no-plots", action="store_true")
    parser.add_argument("--prometheus", action="store_true",
                        help="scrape the server with a real Prometheus during training and "
                             "report the replay distributions from it (needs `prometheus`)")
    parser.add_argument("--metrics", help="with --address and --prometheus: the server's "
                                          "metrics listener, HOST:PORT")
    parser.add_argument("--quiet", action="store_true", help="only the final summary")
    args = parser.parse_args()
    if args.policy is None:
        args.policy = f"{args.table}/q"
    if args.explorers < 1:
        parser.error("--explorers must be >= 1")
    result = train(args)
    print(f"{'solved' if result['solved'] else 'not solved'}: mean return of the last 20 "
          f"episodes {result['mean_return_last_20']:.1f} (best {result['best_return']:.0f}) "
          f"after {result['env_steps']} env steps, {result['episodes']} episodes, "
          f"{result['learner_steps']} learner steps in {result['seconds']:.0f} s; "
          f"learner waited for replay {100 * result['replay_wait_share']:.1f} % of its "
          f"step time")
    staleness = result["staleness"]
    print(f"the learner's draws were p50 {staleness['p50']:.1f} / p99 {staleness['p99']:.1f} "
          f"versions of the published weights behind ({staleness['count']:,} draws recorded)")
    replay = result["replay"]
    if replay:
        age, age_s, removed = replay["age_inserts"], replay["age_seconds"], replay["times_sampled"]
        print(f"replay (from Prometheus): age at the draw p50 {age['p50']:,.0f} / p99 "
              f"{age['p99']:,.0f} inserts, p50 {age_s['p50']:.1f} / p99 {age_s['p99']:.1f} s "
              f"over {age['count']:,.0f} draws; times sampled when evicted p50 "
              f"{removed['p50']:.1f} / p99 {removed['p99']:.1f}, mean {removed['mean']:.2f}, "
              f"never sampled {100 * removed['never_share']:.1f} % of {removed['count']:,.0f}; "
              f"samples per insert {replay['samples_per_insert']:.2f}")
    if not args.no_plots:
        for path in plot(result, Path(args.out)):
            print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    sys.exit(main())
