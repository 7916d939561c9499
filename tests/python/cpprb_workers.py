"""Process entry points for the cpprb facade tests (a port of cpprb's example/apex.py)."""
from __future__ import annotations

import numpy as np


def apex_explorer(global_rb, explorer_id: int, steps: int, local_size: int) -> None:
    """Collects `local_size` transitions locally, then adds them with priorities |TD|."""
    rng = np.random.default_rng(explorer_id)
    local = {"obs": [], "act": [], "rew": [], "next_obs": [], "done": []}
    obs = rng.standard_normal(4)
    for step in range(steps):
        next_obs = rng.standard_normal(4)
        done = float(step % 25 == 24)
        for name, value in (("obs", obs), ("act", explorer_id), ("rew", 1.0),
                            ("next_obs", next_obs), ("done", done)):
            local[name].append(value)
        obs = next_obs
        if done:
            global_rb.on_episode_end()
        if len(local["obs"]) == local_size:
            sample = {k: np.asarray(v) for k, v in local.items()}
            abs_td = np.abs(rng.standard_normal(local_size))
            global_rb.add(**sample, priorities=abs_td)
            local = {k: [] for k in local}


def add_single(rb, n: int) -> None:
    """Adds `n` transitions one by one and returns without flushing."""
    for i in range(n):
        rb.add(x=float(i))


def add_then_report(rb, values, seen) -> None:
    """Adds `values` one by one, each add's ring position and the buffer's next index after
    it going to the `seen` queue, then exits without flushing."""
    for value in values:
        position = rb.add(x=float(value))
        seen.put((position, rb.get_next_index(), rb.get_stored_size()))
