#!/usr/bin/env python3
"""Learners on an episodic replayd table: n-step prioritized TD, or R2D2-style sequences.

The environment is a random walk over states 1..N between two terminal ends: the right
end pays 1 and terminates, the left end pays 0 and terminates, and an episode is cut
(truncated) after `--time-limit` steps. The true value of state s is s / (N + 1). An
explorer appends steps of several environments at once through an EpisodeWriter (one
request per batch of steps). The learner estimates V (a table) from replay:

- ``--mode nstep``: prioritized n-step samples (``sample(..., nstep=k)``): target =
  return + discount * V[next_obs], the |TD| errors sent back as priorities;
- ``--mode sequences``: sequences with burn-in and stride (``sample_sequences``): a
  one-step target per real step of each sequence (the mask drops the padding).

From the repository root, with a server running (`./scripts/run` in another terminal
serves unix:///tmp/replayd.sock, the default --address):

    /usr/bin/python3 examples/episodic_learner.py --mode nstep
    /usr/bin/python3 examples/episodic_learner.py --mode sequences

Each mode has a table of its own unless ``--table`` names one (the default is
``episodic_learner_nstep`` or ``episodic_learner_sequences``): nstep samples a prioritized
table and sequences a uniform one, and a name already taken by a table of the other kind
is refused (``AlreadyExists``). A table left by an earlier run of the same mode is reused,
its steps included.

Prints the mean absolute error of V against the true values. Needs only numpy; it imports
the client of the checkout it is in.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "client" / "python"))  # this checkout's client

import replayd  # noqa: E402

FIELDS = {"obs": (np.int64, ()), "rew": (np.float32, ()), "next_obs": (np.int64, ()),
          "done": (np.uint8, ())}


def explore(client: replayd.Client, table: str, states: int, steps: int, envs: int,
            time_limit: int, rng: np.random.Generator) -> None:
    """Appends `steps` steps of `envs` random walks, ending episodes as they end."""
    position = [(states + 1) // 2] * envs
    age = [0] * envs
    with client.episode_writer(table, envs=envs, batch=64) as writer:
        for i in range(steps):
            env = i % envs
            s = position[env]
            s_next = s + (1 if rng.random() < 0.5 else -1)
            terminal = s_next in (0, states + 1)
            writer.append(env=env, obs=s, rew=1.0 if s_next == states + 1 else 0.0,
                          next_obs=s_next, done=int(terminal))
            age[env] += 1
            if terminal or age[env] >= time_limit:
                writer.end_episode(env=env, terminated=terminal)
                position[env], age[env] = (states + 1) // 2, 0
            else:
                position[env] = s_next


def learn_nstep(client: replayd.Client, table: str, values: np.ndarray, steps: int,
                batch: int, k: int, lr: float) -> None:
    for _ in range(steps):
        sample = client.sample(table, batch, nstep=k, gamma=1.0, beta=0.4)
        obs, nxt = sample["obs"], sample["next_obs"]
        target = sample["rew"] + sample["discount"] * values[nxt]
        td = target - values[obs]
        np.add.at(values, obs, lr * sample.weights * td)
        client.update_priorities(table, sample.keys, np.abs(td) + 1e-3)


def learn_sequences(client: replayd.Client, table: str, values: np.ndarray, steps: int,
                    batch: int, length: int, burn_in: int, lr: float) -> None:
    for _ in range(steps):
        sample = client.sample_sequences(table, batch, length, stride=2, burn_in=burn_in,
                                         pad=True)
        assert sample.mask is not None
        real = sample.mask[:, burn_in:].astype(bool)  # burn-in rows only warm up a state
        obs = sample["obs"][:, burn_in:][real]
        nxt = sample["next_obs"][:, burn_in:][real]
        done = sample["done"][:, burn_in:][real]
        target = sample["rew"][:, burn_in:][real] + (1 - done) * values[nxt]
        # One averaged step per state: a batch holds hundreds of rows of each state.
        delta = np.bincount(obs, target - values[obs], minlength=len(values))
        count = np.maximum(np.bincount(obs, minlength=len(values)), 1)
        values += lr * delta / count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--address", default=os.environ.get("REPLAYD_ADDRESS",
                                                            "unix:///tmp/replayd.sock"))
    parser.add_argument("--table", default=None,
                        help="table name (default: episodic_learner_<mode>)")
    parser.add_argument("--mode", choices=["nstep", "sequences"], default="nstep")
    parser.add_argument("--states", type=int, default=7)
    parser.add_argument("--env-steps", type=int, default=4000)
    parser.add_argument("--envs", type=int, default=4)
    parser.add_argument("--time-limit", type=int, default=30)
    parser.add_argument("--learner-steps", type=int, default=300)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--nstep", type=int, default=3)
    parser.add_argument("--length", type=int, default=8)
    parser.add_argument("--burn-in", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.table is None:
        args.table = f"episodic_learner_{args.mode}"

    rng = np.random.default_rng(args.seed)
    with replayd.Client(args.address, timeout=60) as client:
        client.create_table(args.table, FIELDS, capacity=max(args.env_steps, 1),
                            sampler="prioritized" if args.mode == "nstep" else "uniform",
                            episodic=True, reward="rew", exist_ok=True, seed=args.seed)
        explore(client, args.table, args.states, args.env_steps, args.envs,
                args.time_limit, rng)
        values = np.zeros(args.states + 2)  # terminal ends stay 0
        if args.mode == "nstep":
            learn_nstep(client, args.table, values, args.learner_steps, args.batch_size,
                        args.nstep, lr=0.05)
        else:
            learn_sequences(client, args.table, values, args.learner_steps,
                            args.batch_size, args.length, args.burn_in, lr=0.2)
    truth = np.arange(1, args.states + 1) / (args.states + 1)
    error = float(np.mean(np.abs(values[1:-1] - truth)))
    print(f"mode {args.mode}: V = {np.round(values[1:-1], 3).tolist()}")
    print(f"mean absolute error {error:.4f} after {args.learner_steps} learner steps")


if __name__ == "__main__":
    main()
