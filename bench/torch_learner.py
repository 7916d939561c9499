#!/usr/bin/env python3
"""How long a torch learner fed by replayd.torch.ReplayDataset waits for replay.

Starts a server (replayd.testing: REPLAYD_BIN or replayd on PATH), fills a prioritized W1
table (obs f32[4], act i64, rew f32, next_obs f32[4], done u8; docs/BENCHMARKS.md), then
runs a DQN-style learner on the CPU: a 2-layer MLP (4 -> hidden -> hidden -> 2, ReLU),
Adam, a TD loss weighted by the importance weights, and a priority update per step. The
learner iterates a ReplayDataset (prefetching sampler thread, tensors sharing the received
memory). Optionally explorer processes insert at the same time.

Reports, over the measured steps: step time, the time the learner spent in `next()` waiting
for a batch (ReplayDataset.wait_seconds) and its share of the step time.

    REPLAYD_BIN=build/service/replayd /usr/bin/python3 bench/torch_learner.py
    ... --steps 3000 --batch-size 256 --hidden 256 --explorers 1 --json out.json
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import time
from pathlib import Path
from typing import Any, Dict

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "client" / "python"))

import replayd  # noqa: E402
import replayd.testing  # noqa: E402

W1 = {"obs": (np.float32, 4), "act": (np.int64, ()), "rew": (np.float32, ()),
      "next_obs": (np.float32, 4), "done": (np.uint8, ())}


def w1_batch(rng: np.random.Generator, n: int) -> Dict[str, np.ndarray]:
    return {"obs": rng.standard_normal((n, 4)).astype(np.float32),
            "act": rng.integers(0, 2, n), "rew": rng.random(n).astype(np.float32),
            "next_obs": rng.standard_normal((n, 4)).astype(np.float32),
            "done": (rng.random(n) < 0.05).astype(np.uint8)}


def explorer(client: replayd.Client, table: str, seed: int, stop: Any) -> None:
    """Inserts W1 transitions through a Writer until told to stop."""
    rng = np.random.default_rng(seed)
    items = w1_batch(rng, 4096)
    with client.writer(table, batch=64) as writer:
        i = 0
        while not stop.is_set():
            writer.append({name: column[i % 4096] for name, column in items.items()})
            i += 1


def run(args: argparse.Namespace) -> Dict[str, Any]:
    import torch
    import replayd.torch

    torch.set_num_threads(args.torch_threads)
    torch.manual_seed(0)
    results: Dict[str, Any] = {}
    with replayd.testing.server() as srv:
        client = replayd.Client(srv.address, timeout=60)
        client.create_table("w1", W1, args.capacity, sampler="prioritized",
                            priority_exponent=0.6)
        rng = np.random.default_rng(0)
        for start in range(0, args.fill, 50_000):
            client.insert("w1", w1_batch(rng, min(50_000, args.fill - start)))
        context = multiprocessing.get_context("spawn")
        stop = context.Event()
        explorers = [context.Process(target=explorer, args=(client, "w1", i, stop))
                     for i in range(args.explorers)]
        for process in explorers:
            process.start()
        deadline = time.monotonic() + 60
        while explorers and client.table_info("w1")["counters"]["inserts"] <= args.fill:
            if time.monotonic() > deadline:  # measure with the explorers running
                raise RuntimeError("the explorers inserted nothing within 60 s")
            time.sleep(0.05)
        net = torch.nn.Sequential(torch.nn.Linear(4, args.hidden), torch.nn.ReLU(),
                                  torch.nn.Linear(args.hidden, args.hidden), torch.nn.ReLU(),
                                  torch.nn.Linear(args.hidden, 2))
        optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)
        dataset = replayd.torch.ReplayDataset(client, "w1", args.batch_size,
                                              prefetch=args.prefetch,
                                              num_batches=args.warmup + args.steps)
        inserted_before = 0
        started = 0.0
        for step, batch in enumerate(dataset):
            if step == args.warmup:
                dataset.wait_seconds = 0.0
                inserted_before = client.table_info("w1")["counters"]["inserts"]
                started = time.perf_counter()
            q = net(batch["obs"]).gather(1, batch["act"][:, None]).squeeze(1)
            with torch.no_grad():
                target = batch["rew"] + 0.99 * (1 - batch["done"].float()) * \
                    net(batch["next_obs"]).max(1).values
            td = target - q
            loss = (batch["weights"] * td.pow(2)).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            dataset.update_priorities(batch["keys"], td.detach().abs() + 1e-3)
        elapsed = time.perf_counter() - started
        inserted = client.table_info("w1")["counters"]["inserts"] - inserted_before
        stop.set()
        for process in explorers:
            process.join(30)
        results = {
            "steps": args.steps, "batch_size": args.batch_size, "hidden": args.hidden,
            "explorers": args.explorers, "torch_threads": args.torch_threads,
            "step_ms": 1000 * elapsed / args.steps,
            "wait_ms_per_step": 1000 * dataset.wait_seconds / args.steps,
            "wait_share": dataset.wait_seconds / elapsed,
            "steps_per_s": args.steps / elapsed,
            "inserts_per_s": inserted / elapsed,
        }
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=3000, help="measured learner steps")
    parser.add_argument("--warmup", type=int, default=200, help="steps before measuring")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--hidden", type=int, default=256, help="units per hidden layer")
    parser.add_argument("--prefetch", type=int, default=4)
    parser.add_argument("--capacity", type=int, default=1_000_000)
    parser.add_argument("--fill", type=int, default=200_000, help="items inserted first")
    parser.add_argument("--explorers", type=int, default=0,
                        help="processes inserting while the learner runs")
    parser.add_argument("--torch-threads", type=int, default=1)
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()
    results = run(args)
    print(f"W1, batch {results['batch_size']}, MLP 4-{args.hidden}-{args.hidden}-2, "
          f"{args.explorers} explorers, torch threads {args.torch_threads}, "
          f"{args.steps} steps on {os.cpu_count()} CPUs")
    print(f"step {results['step_ms']:.3f} ms ({results['steps_per_s']:.0f} steps/s), "
          f"waiting for replay {results['wait_ms_per_step']:.4f} ms per step = "
          f"{100 * results['wait_share']:.2f} % of step time; "
          f"{results['inserts_per_s']:.0f} inserts/s")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
