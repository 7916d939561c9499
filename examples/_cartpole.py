"""What the CartPole examples share (dqn_cartpole.py, offline_to_online.py): the
environment, the Q network and its numpy copy for explorers, progress lines.

Not an example itself (the leading underscore): the examples import it from their own
folder, which Python puts first on sys.path when it runs one of them as a script, and
processes they spawn inherit that path.
"""
from __future__ import annotations

import math
import sys
import time
from typing import Any, List, Optional, Tuple

import numpy as np

SOLVED_RETURN = 475.0  # CartPole-v1 is solved at this mean return over recent episodes
SOLVED_WINDOW = 20     # episodes in that mean


class CartPole:
    """CartPole-v1 in numpy: gymnasium's dynamics (Euler steps of 0.02 s), reward 1 per
    step, the episode ends when |x| > 2.4 or |theta| > 12 degrees (terminal) or after 500
    steps (truncated: not terminal, so the learner still bootstraps)."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.state = np.zeros(4)
        self.steps = 0

    def reset(self) -> np.ndarray:
        self.state = self.rng.uniform(-0.05, 0.05, 4)
        self.steps = 0
        return self.state.astype(np.float32)

    def step(self, action: int) -> Tuple[np.ndarray, float, bool, bool]:
        x, x_dot, theta, theta_dot = self.state
        force = 10.0 if action == 1 else -10.0
        cos, sin = math.cos(theta), math.sin(theta)
        total_mass, pole_mass_length, length = 1.1, 0.05, 0.5
        temp = (force + pole_mass_length * theta_dot ** 2 * sin) / total_mass
        theta_acc = (9.8 * sin - cos * temp) / (length * (4.0 / 3.0 - 0.1 * cos ** 2 /
                                                          total_mass))
        x_acc = temp - pole_mass_length * theta_acc * cos / total_mass
        x, x_dot = x + 0.02 * x_dot, x_dot + 0.02 * x_acc
        theta, theta_dot = theta + 0.02 * theta_dot, theta_dot + 0.02 * theta_acc
        self.state = np.array([x, x_dot, theta, theta_dot])
        self.steps += 1
        terminated = abs(x) > 2.4 or abs(theta) > 12 * 2 * math.pi / 360
        return self.state.astype(np.float32), 1.0, terminated, self.steps >= 500


class GymCartPole:
    """gymnasium's CartPole-v1 behind the same small interface."""

    def __init__(self, seed: int) -> None:
        import gymnasium
        self.env = gymnasium.make("CartPole-v1")
        self.seed: Optional[int] = seed

    def reset(self) -> np.ndarray:
        obs, _ = self.env.reset(seed=self.seed)
        self.seed = None
        return np.asarray(obs, np.float32)

    def step(self, action: int) -> Tuple[np.ndarray, float, bool, bool]:
        obs, reward, terminated, truncated, _ = self.env.step(action)
        return np.asarray(obs, np.float32), float(reward), bool(terminated), bool(truncated)


def make_env(seed: int) -> Any:
    """gymnasium's CartPole-v1 when importable, else the numpy copy."""
    try:
        import gymnasium  # noqa: F401
    except ImportError:
        return CartPole(seed)
    return GymCartPole(seed)


# -- the Q network, shared as a flat float32 vector --------------------------------------

def layer_shapes(hidden: int) -> List[Tuple[int, ...]]:
    """Weight and bias shapes of the MLP 4 -> hidden -> hidden -> 2 (torch's layout)."""
    return [(hidden, 4), (hidden,), (hidden, hidden), (hidden,), (2, hidden), (2,)]


def q_network(hidden: int) -> Any:
    """The torch MLP whose flat parameters `numpy_q` reads."""
    import torch
    return torch.nn.Sequential(torch.nn.Linear(4, hidden), torch.nn.ReLU(),
                               torch.nn.Linear(hidden, hidden), torch.nn.ReLU(),
                               torch.nn.Linear(hidden, 2))


def numpy_q(params: np.ndarray, hidden: int, obs: np.ndarray) -> np.ndarray:
    """The Q values of `obs` with the flat parameter vector of the torch net."""
    layers, offset = [], 0
    for shape in layer_shapes(hidden):
        size = int(np.prod(shape))
        layers.append(params[offset:offset + size].reshape(shape))
        offset += size
    h = np.maximum(layers[0] @ obs + layers[1], 0)
    h = np.maximum(layers[2] @ h + layers[3], 0)
    return layers[4] @ h + layers[5]


class SharedWeights:
    """The learner's Q network as a flat float32 multiprocessing Array and a version
    counter: the learner publishes, explorers copy when the version moved. Pickles into
    processes started by `context` (pass it in their arguments)."""

    def __init__(self, context: Any, flat: np.ndarray) -> None:
        self.array = context.Array("f", len(flat))
        np.frombuffer(self.array.get_obj(), np.float32)[:] = flat
        self.version = context.Value("i", 0)

    def publish(self, flat: np.ndarray) -> None:
        with self.array.get_lock():
            np.frombuffer(self.array.get_obj(), np.float32)[:] = flat
            self.version.value += 1

    def copy_if_newer(self, params: np.ndarray, seen: int) -> int:
        """Copies the weights into `params` when their version is not `seen`; returns the
        version `params` now holds."""
        if self.version.value != seen:
            with self.array.get_lock():
                params[:] = np.frombuffer(self.array.get_obj(), np.float32)
                seen = self.version.value
        return seen

    def snapshot(self) -> np.ndarray:
        return np.frombuffer(self.array.get_obj(), np.float32).copy()


# -- progress ----------------------------------------------------------------------------

class Progress:
    """tqdm over environment steps when installed and stderr is a terminal; otherwise a
    line every 5 seconds."""

    def __init__(self, total: int, quiet: bool) -> None:
        self.quiet = quiet
        self.bar: Any = None
        self.last_line = time.monotonic()
        if not quiet and sys.stderr.isatty():
            try:
                from tqdm import tqdm
                self.bar = tqdm(total=total, unit="step", dynamic_ncols=True)
            except ImportError:
                pass

    def update(self, env_steps: int, mean_return: float, learner_steps: int,
               wait_share: float) -> None:
        text = (f"return {mean_return:6.1f}  learner steps {learner_steps}  "
                f"replay wait {100 * wait_share:4.1f} %")
        if self.bar is not None:
            self.bar.n = env_steps
            self.bar.set_postfix_str(text, refresh=False)
            self.bar.refresh()
        elif not self.quiet and time.monotonic() - self.last_line > 5:
            self.last_line = time.monotonic()
            print(f"env steps {env_steps:7d}  {text}", flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
