#!/usr/bin/env python3
"""An Ape-X style script written for cpprb, run on replayd.

The only changes from the plain cpprb script are the import
(``from replayd.cpprb import ...`` instead of ``from cpprb import ...``) and the
``address=`` given to the global buffer (and the line that finds this checkout's client). Explorer processes collect transitions of a toy
environment with a linear epsilon-greedy policy and add them, with priorities |TD|, to the
global MPPrioritizedReplayBuffer; the learner samples it, takes TD steps and updates the
priorities.

From the repository root, with a server running (`./scripts/run` in another terminal
serves unix:///tmp/replayd.sock, the default --address):

    /usr/bin/python3 examples/cpprb_apex.py --explorers 4

Needs only numpy (and no cpprb).
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "client" / "python"))  # this checkout's client

from replayd.cpprb import MPPrioritizedReplayBuffer

OBS_DIM, N_ACTIONS, GAMMA = 4, 2, 0.99


def q_values(weights, obs):
    return obs @ weights  # (batch, OBS_DIM) @ (OBS_DIM, N_ACTIONS)


def explorer(global_rb, env_dict, weights_q, stop, seed, local_size, max_steps):
    rng = np.random.default_rng(seed)
    weights = np.zeros((OBS_DIM, N_ACTIONS))
    local = {name: [] for name in env_dict}
    obs = rng.standard_normal(OBS_DIM)
    for step in range(max_steps):
        if stop.is_set():
            break
        if not weights_q.empty():
            weights = weights_q.get()
        act = int(rng.integers(N_ACTIONS)) if rng.random() < 0.1 else \
            int(np.argmax(q_values(weights, obs[None])[0]))
        next_obs = rng.standard_normal(OBS_DIM)
        rew = float(act == int(obs[0] > 0))
        done = float(step % 50 == 49)
        for name, value in (("obs", obs), ("act", act), ("rew", rew),
                            ("next_obs", next_obs), ("done", done)):
            local[name].append(value)
        obs = next_obs
        if done:
            global_rb.on_episode_end()
        if len(local["obs"]) == local_size:
            batch = {name: np.asarray(values) for name, values in local.items()}
            target = batch["rew"] + GAMMA * (1 - batch["done"]) * \
                q_values(weights, batch["next_obs"]).max(axis=1)
            td = target - q_values(weights, batch["obs"])[np.arange(local_size),
                                                           batch["act"]]
            global_rb.add(**batch, priorities=np.abs(td))
            local = {name: [] for name in env_dict}


def learner(global_rb, queues, stop, n_warmup, train_steps, batch_size):
    weights = np.zeros((OBS_DIM, N_ACTIONS))
    while global_rb.get_stored_size() < n_warmup and not stop.is_set():
        pass
    for step in range(train_steps):
        sample = global_rb.sample(batch_size, beta=0.4)
        act = sample["act"].ravel().astype(int)
        target = sample["rew"].ravel() + GAMMA * (1 - sample["done"].ravel()) * \
            q_values(weights, sample["next_obs"]).max(axis=1)
        td = target - q_values(weights, sample["obs"])[np.arange(batch_size), act]
        for a in range(N_ACTIONS):
            mask = act == a
            weights[:, a] += 0.01 * (sample["weights"][mask] * td[mask]) @ sample["obs"][mask]
        global_rb.update_priorities(sample["indexes"], np.abs(td))
        if step % 10 == 0:
            for q in queues:
                if q.empty():
                    q.put(weights.copy())
    stop.set()
    return weights


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--address", default="unix:///tmp/replayd.sock")
    parser.add_argument("--explorers", type=int, default=4)
    parser.add_argument("--explorer-steps", type=int, default=2000)
    parser.add_argument("--local-size", type=int, default=100)
    parser.add_argument("--train-steps", type=int, default=1000)
    parser.add_argument("--batch-size", type=int, default=32)
    args = parser.parse_args()

    buffer_size = 100_000
    env_dict = {"obs": {"shape": OBS_DIM}, "act": {"dtype": np.int64}, "rew": {},
                "next_obs": {"shape": OBS_DIM}, "done": {}}
    global_rb = MPPrioritizedReplayBuffer(buffer_size, env_dict, alpha=0.6,
                                          address=args.address)
    ctx = mp.get_context("spawn")
    stop = ctx.Event()
    queues = [ctx.Queue() for _ in range(args.explorers)]
    explorers = [ctx.Process(target=explorer,
                             args=(global_rb, env_dict, queues[i], stop, i,
                                   args.local_size, args.explorer_steps))
                 for i in range(args.explorers)]
    for p in explorers:
        p.start()
    weights = learner(global_rb, queues, stop, n_warmup=args.local_size,
                      train_steps=args.train_steps, batch_size=args.batch_size)
    for p in explorers:
        p.join()
    print(f"learner steps {args.train_steps}, stored {global_rb.get_stored_size()}, "
          f"max priority {global_rb.get_max_priority():.3f}, "
          f"|weights| {np.abs(weights).sum():.3f}")


if __name__ == "__main__":
    main()
