#!/usr/bin/env python3
"""Offline to online: a DQN on CartPole whose batches are half demonstrations, against the
same DQN without them.

- Demonstrations: a scripted demonstrator (push toward the side the pole falls to,
  angle + 0.5 * angular velocity; it balances CartPole for all 500 steps) plays
  --demo-episodes episodes, the last --noisy-demos of them with a random action at a
  rate of --demo-noise (so some fail). They are written through an EpisodeWriter into an
  episodic table and exported as a Minari dataset (replayd.datasets.export) to
  examples/out/minari/replayd/cartpole-scripted-v0/data, which `minari.load_dataset`
  reads with MINARI_DATASETS_PATH=examples/out/minari. Each run loads it into its
  `demos` table (replayd.datasets.load); --demos PATH loads another Minari dataset.
- Online: explorer processes (as in dqn_cartpole.py) act epsilon-greedily with the
  learner's latest weights and write their episodes into the episodic table `online`
  through an EpisodeWriter (each observation stored once, `next_of`, as the dataset load
  stores the demonstrations, so both tables have the same fields).
- The learner: double DQN with prioritized replay on one-step transitions from
  replayd.torch.ReplayDataset(client, {"online": 0.5, "demos": 0.5}, 64, nstep=1), a
  mixed batch (docs/MIXED.md): 32 rows of each table, each table's own importance
  weights; |TD| + eps goes back to each row's own table. On the demonstration rows it
  adds DQfD's large-margin loss (--margin): the demonstrated action's Q value is kept
  --margin above the others', so the greedy policy follows the demonstrator where it
  went while the TD loss learns the values.

Both arms run with the same hyperparameters and seeds; only the demonstrations' share of
each batch differs (--demo-share, 0 without). The learner takes --updates-per-step learner
steps per environment step in both: the online table's SampleToInsertRatio counts only its
own rows, so its ratio is that times the online rows per batch.

A run stops at the solve threshold (mean return of the last 20 episodes >= 475) or at
--max-steps environment steps. For every seed both arms run; it prints the environment
steps each took to the threshold, the median per arm, and writes
examples/out/offline_to_online.png (the mean return of the last 20 episodes against
environment steps, every seed of both arms) and offline_to_online.json:

    REPLAYD_BIN=build/service/replayd /usr/bin/python3 examples/offline_to_online.py --seeds 0 1 2

--no-demos runs only the arm without demonstrations, --demos-only only the other. A short
run of both arms (seconds, what the test suite runs):

    REPLAYD_BIN=build/service/replayd /usr/bin/python3 examples/offline_to_online.py --smoke

It starts its own server (replayd.testing) unless --address names one. Needs torch, numpy
and h5py (python3-h5py, for the Minari files); matplotlib for the plot.
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
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Deque, Dict, Iterator, List, Optional, Tuple

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "client" / "python"))

import replayd  # noqa: E402
import replayd.datasets  # noqa: E402
from _cartpole import (SOLVED_RETURN, SOLVED_WINDOW, Progress, SharedWeights,  # noqa: E402
                       make_env, numpy_q, q_network)

# The tables' fields: what a Minari load of the exported demonstrations creates.
STEP_FIELDS = {"obs": (np.float32, 4), "act": (np.int64, ()), "rew": (np.float32, ())}
DATASET_ID = "replayd/cartpole-scripted-v0"
# The spaces the exported metadata.json gives Minari (CartPole-v1's).
OBSERVATION_SPACE = {"type": "Box", "dtype": "float32", "shape": [4],
                     "low": [-4.8, -np.inf, -0.41887903, -np.inf],
                     "high": [4.8, np.inf, 0.41887903, np.inf]}
ACTION_SPACE = {"type": "Discrete", "dtype": "int64", "n": 2, "start": 0}


# -- demonstrations ----------------------------------------------------------------------

def demonstrator(obs: np.ndarray) -> int:
    """Pushes toward the side the pole is falling to: balances CartPole for 500 steps."""
    return int(obs[2] + 0.5 * obs[3] > 0)


def record_demos(client: replayd.Client, table: str, args: argparse.Namespace,
                 path: Path) -> replayd.datasets.ExportResult:
    """Plays the demonstrator into the episodic `table` and exports it as a Minari dataset
    at `path` (replaced). The table's metadata gives the export CartPole's spaces, as a
    table loaded from a Minari dataset keeps them."""
    description = {"format": "minari", "minari": {
        "dataset_id": DATASET_ID, "algorithm_name": "scripted: angle + 0.5 * angular velocity",
        "observation_space": json.dumps(OBSERVATION_SPACE),
        "action_space": json.dumps(ACTION_SPACE)}}
    with contextlib.suppress(replayd.NotFound):
        client.drop_table(table)
    client.create_table(table, STEP_FIELDS, args.demo_episodes * 501, episodic=True,
                        next_of=["obs"], metadata={replayd.datasets.DATASET_KEY: description})
    env = make_env(seed=args.demo_seed)
    rng = np.random.default_rng(args.demo_seed)
    with client.episode_writer(table, batch=256) as writer:
        for episode in range(args.demo_episodes):
            noisy = episode >= args.demo_episodes - args.noisy_demos
            obs, done = env.reset(), False
            while not done:
                action = demonstrator(obs)
                if noisy and rng.random() < args.demo_noise:
                    action = int(rng.integers(2))
                next_obs, reward, terminated, truncated = env.step(action)
                writer.append(obs=obs, act=action, rew=reward)
                obs, done = next_obs, terminated or truncated
            writer.end_episode(terminated=terminated, obs=obs)  # the final observation
    if path.exists():
        shutil.rmtree(path)
    try:
        return replayd.datasets.export(client, table, str(path), format="minari",
                                       dataset_id=DATASET_ID, progress=False)
    finally:
        client.drop_table(table)


# -- explorers ---------------------------------------------------------------------------

def explorer(client: replayd.Client, table: str, index: int, seed: int,
             args: argparse.Namespace, published: SharedWeights, stop: Any,
             reports: Any) -> None:
    """Acts epsilon-greedily with the latest published weights, writes each episode,
    reports each episode's (explorer's env steps, return)."""
    env = make_env(seed=1000 * seed + index)
    rng = np.random.default_rng(1000 * seed + index)
    params = published.snapshot()
    steps_budget = args.max_steps // args.explorers
    try:
        run_explorer(client, table, args, env, rng, params, published, stop, reports, index,
                     steps_budget)
    except replayd.ReplayError:
        if not stop.is_set():  # the learner dropping the table at the end is expected
            raise


def run_explorer(client: replayd.Client, table: str, args: argparse.Namespace, env: Any,
                 rng: np.random.Generator, params: np.ndarray, published: SharedWeights,
                 stop: Any, reports: Any, index: int, steps_budget: int) -> None:
    seen = -1
    obs, episode_return, steps = env.reset(), 0.0, 0
    with client.episode_writer(table, batch=32) as writer:
        while steps < steps_budget and not stop.is_set():
            seen = published.copy_if_newer(params, seen)
            epsilon = max(args.epsilon_min, 1.0 - steps / args.epsilon_decay_steps)
            if rng.random() < epsilon:
                action = int(rng.integers(2))
            else:
                action = int(np.argmax(numpy_q(params, args.hidden, obs)))
            next_obs, reward, terminated, truncated = env.step(action)
            writer.append(obs=obs, act=action, rew=reward)
            episode_return += reward
            steps += 1
            obs = next_obs
            if terminated or truncated:
                writer.end_episode(terminated=terminated, obs=obs)  # the final observation
                reports.put((index, steps, episode_return))
                obs, episode_return = env.reset(), 0.0
    reports.put((index, steps, None))  # finished


# -- one run: a seed, a demo share -------------------------------------------------------

def mix(args: argparse.Namespace, demo_share: float) -> Dict[str, float]:
    """Each batch's fractions; the demos table only when it has a share."""
    if demo_share == 0:
        return {args.online_table: 1.0}
    return {args.online_table: 1.0 - demo_share, args.demos_table: demo_share}


def train(client: replayd.Client, args: argparse.Namespace, seed: int, demo_share: float,
          demos: Optional[Path]) -> Dict[str, Any]:
    """One run: a fresh network, fresh tables, explorers; until solved or --max-steps."""
    import torch
    import replayd.torch

    torch.manual_seed(seed)
    torch.set_num_threads(1)
    net = q_network(args.hidden)
    target = copy.deepcopy(net)
    optimizer = torch.optim.Adam(net.parameters(), lr=args.lr)

    online, demos_table = args.online_table, args.demos_table
    for name in (online, demos_table):
        with contextlib.suppress(replayd.NotFound):
            client.drop_table(name)
    if demo_share > 0:
        assert demos is not None
        replayd.datasets.load(client, demos_table, str(demos), infos=False,
                              sampler="prioritized", priority_exponent=0.6, progress=False)
    # Sampled online rows per inserted step: the same learner steps per env step whatever
    # the demonstrations' share of a batch.
    online_per_insert = args.updates_per_step * args.batch_size * (1.0 - demo_share)
    client.create_table(
        online, STEP_FIELDS, args.capacity, episodic=True, next_of=["obs"],
        sampler="prioritized", priority_exponent=0.6,
        rate_limiter=replayd.SampleToInsertRatio(
            online_per_insert, args.min_replay,
            error_buffer=max(online_per_insert * args.min_replay, 2 * args.batch_size)))

    context = multiprocessing.get_context("spawn")
    published = SharedWeights(
        context, torch.nn.utils.parameters_to_vector(net.parameters()).detach().numpy())
    stop = context.Event()
    reports = context.Queue()
    explorers = [context.Process(target=explorer, args=(client, online, i, seed, args,
                                                        published, stop, reports))
                 for i in range(args.explorers)]
    for process in explorers:
        process.start()

    dataset = replayd.torch.ReplayDataset(client, mix(args, demo_share), args.batch_size,
                                          nstep=1, gamma=args.gamma, timeout=5.0)
    demo_index = dataset.tables.index(demos_table) if demo_share > 0 else None
    progress = Progress(args.max_steps, args.quiet)
    env_steps = [0] * args.explorers
    finished = 0
    curve: List[Tuple[int, float]] = []  # (total env steps, mean return of the window)
    recent: Deque[float] = collections.deque(maxlen=SOLVED_WINDOW)
    learner_steps, solved_at = 0, None
    started = time.monotonic()
    batches = iter(dataset)
    try:
        while finished < args.explorers and solved_at is None:
            while not reports.empty():
                index, steps, episode_return = reports.get()
                env_steps[index] = steps
                if episode_return is None:
                    finished += 1
                    continue
                recent.append(episode_return)
                curve.append((sum(env_steps), float(np.mean(recent))))
                if len(recent) == recent.maxlen and curve[-1][1] >= SOLVED_RETURN:
                    solved_at = sum(env_steps)
            try:
                batch = next(batches)
            except (replayd.TimeoutError, StopIteration):
                # Explorers finishing: the limiter holds the learner back.
                if not any(p.is_alive() for p in explorers) and reports.empty():
                    break
                continue
            beta = min(1.0, 0.4 + 0.6 * sum(env_steps) / args.max_steps)
            weights = batch["weights"] ** (beta / 0.4)  # the sample's beta is 0.4
            q_values = net(batch["obs"])
            q = q_values.gather(1, batch["act"][:, None]).squeeze(1)
            with torch.no_grad():
                next_action = net(batch["next_obs"]).argmax(1, keepdim=True)
                next_q = target(batch["next_obs"]).gather(1, next_action).squeeze(1)
                # discount: gamma, or 0 where the episode terminated at this step
                y = batch["rew"] + batch["discount"] * next_q
            td = y - q
            loss = (weights / weights.max() * torch.nn.functional.smooth_l1_loss(
                q, y, reduction="none")).mean()
            if demo_index is not None and args.margin > 0:
                loss = loss + margin_loss(q_values, batch["act"],
                                          batch["table"] == demo_index, args.margin)
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(net.parameters(), 10.0)
            optimizer.step()
            dataset.update_priorities(batch["keys"], td.detach().abs() + 1e-3,
                                      table=batch["table"])
            learner_steps += 1
            if learner_steps % args.target_every == 0:
                target.load_state_dict(net.state_dict())
            if learner_steps % args.publish_every == 0:
                published.publish(
                    torch.nn.utils.parameters_to_vector(net.parameters()).detach().numpy())
            progress.update(sum(env_steps), curve[-1][1] if curve else 0.0, learner_steps,
                            dataset.wait_seconds / max(time.monotonic() - started, 1e-9))
    finally:
        stop.set()
        progress.close()
        batches.close()  # closes the sampler
        for name in (online, demos_table):  # inserts still waiting for the limiter fail now
            with contextlib.suppress(replayd.NotFound):
                client.drop_table(name)
        for process in explorers:
            process.join(30)
            if process.is_alive():
                process.terminate()
    return {"seed": seed, "demo_share": demo_share, "solved_at": solved_at,
            "env_steps": sum(env_steps), "learner_steps": learner_steps,
            "episodes": len(curve), "seconds": time.monotonic() - started, "curve": curve}


def margin_loss(q_values: Any, actions: Any, demo_rows: Any, margin: float) -> Any:
    """DQfD's large-margin loss on the demonstration rows: max over actions of Q(s, a) +
    margin (0 for the demonstrated action), minus Q(s, demonstrated action); it keeps the
    demonstrated action ahead of the others by `margin` on the demonstrations' states."""
    import torch
    q_demo = q_values[demo_rows]
    if q_demo.shape[0] == 0:
        return q_values.sum() * 0.0
    act = actions[demo_rows]
    margins = torch.full_like(q_demo, margin)
    margins.scatter_(1, act[:, None], 0.0)
    return ((q_demo + margins).max(1).values - q_demo.gather(1, act[:, None]).squeeze(1)).mean()


# -- the comparison ----------------------------------------------------------------------

@contextlib.contextmanager
def server_address(args: argparse.Namespace) -> Iterator[str]:
    if args.address:
        yield args.address
        return
    import replayd.testing
    with replayd.testing.server() as srv:
        yield srv.address


def median_steps(runs: List[Dict[str, Any]]) -> float:
    """The median environment steps to the threshold; a run that did not reach it counts
    as infinitely many (it is above every run that did)."""
    return statistics.median(r["solved_at"] if r["solved_at"] is not None else float("inf")
                             for r in runs)


def describe(steps: float, max_steps: int) -> str:
    return f"{steps:,.0f}" if steps != float("inf") else f"not within {max_steps:,}"


def plot(runs: List[Dict[str, Any]], args: argparse.Namespace, path: Path) -> bool:
    """Every run's mean return of the last 20 episodes against environment steps, one
    colour per arm, the median steps to the threshold marked (nothing without
    matplotlib)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, ax = plt.subplots(figsize=(7, 4))
    for share, colour in sorted({(r["demo_share"], c) for r, c in zip(
            runs, ["tab:green" if r["demo_share"] > 0 else "tab:blue" for r in runs])}):
        arm = [r for r in runs if r["demo_share"] == share]
        name = (f"{100 * share:.0f} % demonstrations" if share else "no demonstrations")
        median = median_steps(arm)
        label = f"{name}: median {describe(median, args.max_steps)} steps"
        for i, run in enumerate(arm):
            steps = [s for s, _ in run["curve"]]
            means = [m for _, m in run["curve"]]
            ax.plot(steps, means, color=colour, alpha=0.8, linewidth=1.2,
                    label=label if i == 0 else None)
            if run["solved_at"] is not None:
                ax.plot([run["solved_at"]], [means[-1]], "o", color=colour, markersize=4)
        if median != float("inf"):
            ax.axvline(median, color=colour, linestyle=":", linewidth=1)
    ax.axhline(SOLVED_RETURN, color="grey", linestyle="--", linewidth=1,
               label=f"solved ({SOLVED_RETURN:.0f})")
    ax.set_xlabel("environment steps (all explorers)")
    ax.set_ylabel(f"mean return of the last {SOLVED_WINDOW} episodes")
    seeds = sorted({r["seed"] for r in runs})
    ax.set_title(f"DQN on CartPole-v1 through replayd, with and without demonstrations\n"
                 f"(seeds {', '.join(map(str, seeds))}; dots: solved, dotted: the median)",
                 fontsize=10)
    ax.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--address", help="a running server (default: start one)")
    parser.add_argument("--online-table", default="online")
    parser.add_argument("--demos-table", default="demos")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    arms = parser.add_mutually_exclusive_group()
    arms.add_argument("--no-demos", action="store_true",
                      help="only the arm without demonstrations")
    arms.add_argument("--demos-only", action="store_true",
                      help="only the arm with demonstrations")
    parser.add_argument("--demo-share", type=float, default=0.5,
                        help="demonstrations' share of each batch in the arm with them")
    parser.add_argument("--demos", help="a Minari dataset to load as the demonstrations "
                                        "(default: record the scripted demonstrator)")
    parser.add_argument("--demo-episodes", type=int, default=30)
    parser.add_argument("--noisy-demos", type=int, default=10,
                        help="how many of the demo episodes take random actions")
    parser.add_argument("--demo-noise", type=float, default=0.2,
                        help="the rate of random actions in the noisy demo episodes")
    parser.add_argument("--demo-seed", type=int, default=12345)
    parser.add_argument("--max-steps", type=int, default=50_000,
                        help="environment steps of all explorers together, per run, at most")
    parser.add_argument("--margin", type=float, default=0.8,
                        help="DQfD's large-margin loss on demonstration rows (0: off)")
    parser.add_argument("--explorers", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--updates-per-step", type=float, default=0.5,
                        help="learner steps per environment step (both arms)")
    parser.add_argument("--hidden", type=int, default=64, help="units per hidden layer")
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--gamma", type=float, default=0.99)
    parser.add_argument("--capacity", type=int, default=50_000)
    parser.add_argument("--min-replay", type=int, default=1000,
                        help="online transitions stored before the learner starts")
    parser.add_argument("--epsilon-decay-steps", type=int, default=5_000,
                        help="steps of each explorer over which epsilon decays to its min")
    parser.add_argument("--epsilon-min", type=float, default=0.02)
    parser.add_argument("--target-every", type=int, default=250,
                        help="learner steps between target network updates")
    parser.add_argument("--publish-every", type=int, default=25,
                        help="learner steps between weight updates to the explorers")
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent / "out"),
                        help="where the dataset, plot and figures go (default examples/out)")
    parser.add_argument("--no-plots", action="store_true")
    parser.add_argument("--quiet", action="store_true", help="only the results")
    parser.add_argument("--smoke", action="store_true",
                        help="a short run of both arms (one seed, 1,500 steps): seconds")
    args = parser.parse_args()
    if args.smoke:
        args.seeds, args.max_steps, args.min_replay, args.hidden = [0], 1500, 200, 32
        args.demo_episodes, args.noisy_demos, args.quiet = 4, 1, True
    if args.explorers < 1:
        parser.error("--explorers must be >= 1")
    if not 0 < args.demo_share < 1:
        parser.error("--demo-share must be between 0 and 1 (the arm without runs with 0)")
    if not 0 <= args.noisy_demos <= args.demo_episodes:
        parser.error("--noisy-demos must be between 0 and --demo-episodes")
    shares = [0.0] if args.no_demos else [args.demo_share] if args.demos_only \
        else [args.demo_share, 0.0]

    out = Path(args.out)
    runs: List[Dict[str, Any]] = []
    with server_address(args) as address, replayd.Client(address, timeout=60) as client:
        demos = Path(args.demos).expanduser() if args.demos else None
        if demos is None and not args.no_demos:
            demos = out / "minari" / DATASET_ID / "data"
            exported = record_demos(client, args.online_table + "_recording", args, demos)
            print(f"demonstrations: {exported.episodes} episodes, {exported.steps} steps, "
                  f"as the Minari dataset {demos}")
        for seed in args.seeds:
            for share in shares:
                run = train(client, args, seed, share, demos)
                runs.append(run)
                arm = "with demos" if share else "without"
                print(f"seed {seed} {arm:<10}: "
                      + (f"solved after {run['solved_at']:,} env steps" if run["solved_at"]
                         else f"not solved in {run['env_steps']:,} env steps")
                      + f" ({run['episodes']} episodes, {run['learner_steps']:,} learner "
                        f"steps, {run['seconds']:.0f} s)", flush=True)
    medians = {share: median_steps([r for r in runs if r["demo_share"] == share])
               for share in shares}
    for share, median in medians.items():
        arm = f"with {100 * share:.0f} % demonstrations" if share else "without demonstrations"
        print(f"median env steps to a mean return of {SOLVED_RETURN:.0f} {arm}: "
              f"{describe(median, args.max_steps)}")
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "offline_to_online.json", "w") as f:
        json.dump({"args": {k: v for k, v in vars(args).items()}, "runs": runs}, f)
    if not args.no_plots and plot(runs, args, out / "offline_to_online.png"):
        print(f"wrote {out / 'offline_to_online.png'}")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    sys.exit(main())
