#!/usr/bin/env python3
"""Ape-X style training loop on replayd: N explorer processes, one prioritized learner.

Each explorer (started with the "spawn" method, receiving a pickled replayd.Client) runs a
small environment with an epsilon-greedy linear Q policy and appends transitions to a
replayd Writer, which sends them in batches without waiting for replies. The learner
iterates a prefetching Sampler, takes a TD step on a linear Q function weighted by the
importance weights, and sends the new |TD| errors back as priorities. The policy goes
back to the explorers through the server as a published value (docs/VALUES.md): the
learner publishes its weights every --publish-every steps, and each explorer fetches a
newer version, if there is one, between episodes (a fetch of an unchanged value moves no
bytes).

From the repository root, with a server running (`./scripts/run` in another terminal
serves unix:///tmp/replayd.sock, the default --address):

    /usr/bin/python3 examples/apex_style.py --explorers 4

Prints insert and sample rates at the end. Needs only numpy; it imports the client of the
checkout it is in (or an installed replayd package, run from elsewhere).
"""
from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import time
from pathlib import Path
from typing import Tuple

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "client" / "python"))  # this checkout's client

import replayd  # noqa: E402


class Corridor:
    """A 1-D corridor of `length` cells: actions 0 (left) and 1 (right); reaching the right
    end pays 1 and ends the episode; episodes also end after 4*length steps. Observations
    are a fixed random projection of the one-hot position."""

    def __init__(self, length: int, obs_dim: int, seed: int) -> None:
        self.length = length
        self.rng = np.random.default_rng(seed)
        self.features = np.random.default_rng(0).standard_normal((length, obs_dim))
        self.features = self.features.astype(np.float32)
        self.position = 0
        self.steps = 0

    def reset(self) -> np.ndarray:
        self.position = int(self.rng.integers(0, self.length // 2))
        self.steps = 0
        return self.features[self.position]

    def step(self, action: int) -> Tuple[np.ndarray, float, bool]:
        self.position = min(max(self.position + (1 if action == 1 else -1), 0),
                            self.length - 1)
        self.steps += 1
        reward = 1.0 if self.position == self.length - 1 else 0.0
        done = reward > 0 or self.steps >= 4 * self.length
        return self.features[self.position], reward, done


def explorer(client: replayd.Client, table: str, explorer_id: int, args: argparse.Namespace,
             results) -> None:
    """Runs the environment and writes every transition; reports its insert rate and the
    policy versions it acted with."""
    env = Corridor(args.corridor, args.obs_dim, seed=explorer_id)
    rng = np.random.default_rng(100 + explorer_id)
    epsilon = 0.4 ** (1 + 7 * explorer_id / max(1, args.explorers - 1))  # Ape-X epsilons
    version, q = latest_policy(client, args, None, np.zeros((2, args.obs_dim)))
    versions = {version}
    obs = env.reset()
    start = time.perf_counter()
    with client.writer(table, batch=args.writer_batch) as writer:
        for _ in range(args.steps):
            if rng.random() < epsilon:
                action = int(rng.integers(0, 2))
            else:
                action = int(np.argmax(q @ obs))
            next_obs, reward, done = env.step(action)
            writer.append(obs=obs, act=action, rew=reward, next_obs=next_obs, done=done)
            if done:
                version, q = latest_policy(client, args, version, q)
                versions.add(version)
            obs = env.reset() if done else next_obs
    elapsed = time.perf_counter() - start
    results.put((explorer_id, writer.items_written, elapsed, len(versions)))
    client.close()


def latest_policy(client: replayd.Client, args: argparse.Namespace, version, q):
    """The learner's newest published weights when newer than `version`, else `q` as it
    is: the fetch does not wait (timeout=0), and moves no bytes when nothing changed."""
    newer, arrays = client.fetch(args.policy, newer_than=version, timeout=0)
    return (newer, arrays["q"]) if arrays is not None else (version, q)


def learn(client: replayd.Client, table: str, args: argparse.Namespace,
          q: np.ndarray) -> dict:
    """The learner: prioritized samples in, TD steps, new priorities out, the policy
    published every --publish-every steps."""
    gamma, lr = 0.95, 0.05
    published = 0
    pending = []
    items = 0
    start = time.perf_counter()
    with client.sampler(table, args.batch_size, prefetch=args.prefetch, beta=0.4) as sampler:
        for step, sample in zip(range(args.learner_steps), sampler):
            d = sample.data
            obs, next_obs = d["obs"].astype(np.float64), d["next_obs"].astype(np.float64)
            act = d["act"].astype(np.int64)
            target = d["rew"] + gamma * (~d["done"]) * (next_obs @ q.T).max(axis=1)
            predicted = (obs * q[act]).sum(axis=1)
            td = target - predicted
            grad = (sample.weights * td)[:, None] * obs
            np.add.at(q, act, lr * grad / len(sample))
            if (step + 1) % args.publish_every == 0:
                client.publish(args.policy, {"q": q})
                published += 1
            pending.append(client.update_priorities_async(table, sample.keys,
                                                          np.abs(td) + 1e-3))
            if len(pending) >= 32:
                for future in pending:
                    future.result()
                pending.clear()
            items += len(sample)
    for future in pending:
        future.result()
    elapsed = time.perf_counter() - start
    return {"batches": args.learner_steps, "items": items, "elapsed": elapsed,
            "published": published}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--address", default=os.environ.get("REPLAYD_ADDRESS",
                                                            "unix:///tmp/replayd.sock"))
    parser.add_argument("--table", default="apex")
    parser.add_argument("--explorers", type=int, default=4)
    parser.add_argument("--steps", type=int, default=20_000, help="steps per explorer")
    parser.add_argument("--learner-steps", type=int, default=2_000)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--prefetch", type=int, default=4)
    parser.add_argument("--writer-batch", type=int, default=64)
    parser.add_argument("--capacity", type=int, default=100_000)
    parser.add_argument("--obs-dim", type=int, default=16)
    parser.add_argument("--corridor", type=int, default=20)
    parser.add_argument("--publish-every", type=int, default=10,
                        help="learner steps between two publishes of the policy")
    parser.add_argument("--policy", default=None,
                        help="the published value of the policy (default: TABLE/policy)")
    args = parser.parse_args()
    if args.policy is None:
        args.policy = f"{args.table}/policy"

    client = replayd.Client(args.address, timeout=60)
    fields = {"obs": (np.float32, args.obs_dim), "act": (np.int64, ()),
              "rew": (np.float32, ()), "next_obs": (np.float32, args.obs_dim),
              "done": (np.bool_, ())}
    client.create_table(args.table, fields, args.capacity, sampler="prioritized",
                        priority_exponent=0.6,
                        rate_limiter=replayd.MinSize(args.batch_size), exist_ok=True)
    client.reset(args.table)  # counters are cumulative: remember where they stand
    baseline = client.table_info(args.table)["counters"]

    q = np.zeros((2, args.obs_dim))
    client.publish(args.policy, {"q": q})  # the explorers' first policy
    ctx = multiprocessing.get_context("spawn")
    results = ctx.Queue()
    procs = [ctx.Process(target=explorer, args=(client, args.table, e, args, results))
             for e in range(args.explorers)]
    wall = time.perf_counter()
    for p in procs:
        p.start()
    learner = learn(client, args.table, args, q)
    reports = [results.get(timeout=600) for _ in procs]
    for p in procs:
        p.join()
        if p.exitcode != 0:
            raise SystemExit(f"explorer exited with {p.exitcode}")
    wall = time.perf_counter() - wall

    inserted = sum(n for _, n, _, _ in reports)
    slowest = max(t for _, _, t, _ in reports)
    seen = [v for _, _, _, v in sorted(reports)]
    info = client.table_info(args.table)
    counters = {k: v - baseline[k] for k, v in info["counters"].items()}
    print(f"explorers: {args.explorers} x {args.steps} steps, {inserted} transitions in "
          f"{slowest:.2f} s -> {inserted / slowest:,.0f} inserts/s "
          f"({inserted / slowest / args.explorers:,.0f} per explorer)")
    print(f"learner: {learner['batches']} batches of {args.batch_size} in "
          f"{learner['elapsed']:.2f} s -> {learner['batches'] / learner['elapsed']:,.0f} "
          f"batches/s, {learner['items'] / learner['elapsed']:,.0f} samples/s "
          f"(prefetch {args.prefetch})")
    print(f"policy '{args.policy}': published {learner['published'] + 1} times; explorers "
          f"acted with {', '.join(map(str, seen))} versions of it")
    print(f"table '{args.table}': size {info['size']}, inserts {counters['inserts']}, "
          f"samples {counters['samples']}, priority updates "
          f"{counters['priority_updates']}, wall {wall:.2f} s")
    if counters["inserts"] != inserted:
        raise SystemExit("inserted transitions are missing")
    client.close()


if __name__ == "__main__":
    main()
