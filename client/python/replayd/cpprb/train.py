"""cpprb.train: the loop of an off-policy agent (act, step, add, sample, update, repeat)
on a replayd.cpprb buffer, with cpprb's arguments and callbacks.

Behaviour kept from cpprb, quirks included: a warning that the API is beta; ``env`` uses
gym's old API (``reset() -> obs``, ``step(a) -> (obs, rew, done, info)``); sampling starts
after ``n_warmups`` steps; the prioritized buffers get ``update_policy``'s return value as
new priorities; without ``rew_sum`` the logged episode reward is the last step's reward
(cpprb does not sum it); ``max_steps`` must be below 2**64 - 1.
"""
from __future__ import annotations

import logging
import time
import warnings
from typing import Any, Callable, Optional

from .buffers import PrioritizedReplayBuffer, ReplayBuffer

__all__ = ["train"]

_SIZE_T_LIMIT = 2**64 - 1


def _default_logger() -> logging.Logger:
    logger = logging.getLogger("replayd.cpprb")
    if not logger.handlers:
        logger.addHandler(logging.StreamHandler())
        logger.setLevel(logging.INFO)
    return logger


def train(buffer: ReplayBuffer, env: Any, get_action: Callable[..., Any],
          update_policy: Callable[..., Any], *, max_steps: int = int(1e6),
          max_episodes: Optional[int] = None, batch_size: int = 64, n_warmups: int = 0,
          after_step: Optional[Callable[..., Any]] = None,
          done_check: Optional[Callable[..., Any]] = None,
          obs_update: Optional[Callable[..., Any]] = None,
          rew_sum: Optional[Callable[[float, Any], float]] = None,
          episode_callback: Optional[Callable[[int, int, float], Any]] = None,
          logger: Optional[logging.Logger] = None) -> None:
    """Runs `max_steps` environment steps (or `max_episodes` episodes).

    Per step: ``action = get_action(obs, step, episode, is_warmup)``; the transition is
    ``after_step(obs, action, env.step(action), step, episode)`` or cpprb's
    ``{obs, act, rew, next_obs, done}``; it is added; after the warm-up,
    ``update_policy(buffer.sample(batch_size), step, episode)`` returns |TD| (used as
    priorities by prioritized buffers). An episode ends when ``done_check(transition)``
    (default ``transition["done"]``) holds: it is logged, ``episode_callback(episode,
    episode_step, episode_reward)`` is called, the env is reset and
    ``buffer.on_episode_end()`` called. Raises ValueError when max_steps >= 2**64 - 1.
    """
    warnings.warn("`cpprb.train` is still beta release. API can be changed.")
    logger = logger or _default_logger()
    if max_steps >= _SIZE_T_LIMIT:
        raise ValueError(f"max_steps ({max_steps}) is too big. max_steps < {_SIZE_T_LIMIT}")
    last_episode = min(max(max_episodes or _SIZE_T_LIMIT, 0), _SIZE_T_LIMIT)
    n_warmup = max(0, n_warmups)
    episode = episode_step = 0
    episode_reward = 0.0
    obs = env.reset()
    episode_start = time.perf_counter()
    for step in range(max(max_steps, 0)):
        is_warmup = step < n_warmup
        action = get_action(obs, step, episode, is_warmup)
        if after_step is not None:
            transition = after_step(obs, action, env.step(action), step, episode)
        else:
            next_obs, reward, done, _ = env.step(action)
            transition = {"obs": obs, "act": action, "rew": reward, "next_obs": next_obs,
                          "done": done}
        buffer.add(**transition)
        # Without Nstep an add always stores, so the size check needs no round trip.
        if not is_warmup and (not buffer.is_Nstep() or buffer.get_stored_size() > 0):
            sample = buffer.sample(batch_size)
            abs_td = update_policy(sample, step, episode)
            if isinstance(buffer, PrioritizedReplayBuffer):
                buffer.update_priorities(sample["indexes"], abs_td)
        episode_reward = (rew_sum(episode_reward, transition) if rew_sum is not None
                          else transition["rew"])
        if done_check(transition) if done_check is not None else transition["done"]:
            seconds = max(time.perf_counter() - episode_start, 1e-9)
            logger.info(f"{episode: 6}th Episode: {episode_step + 1: 5} Steps "
                        f"({step + 1: 7} Total Steps), {episode_reward: =+7.2f} Reward, "
                        f"{(episode_step + 1) / seconds: =+5.2f} Steps/s")
            if episode_callback is not None:
                episode_callback(episode, episode_step, episode_reward)
            obs = env.reset()
            buffer.on_episode_end()
            episode_reward = 0.0
            episode_step = 0
            episode += 1
            if episode >= last_episode:
                break
            episode_start = time.perf_counter()
        else:
            obs = obs_update(transition) if obs_update is not None else transition["next_obs"]
            episode_step += 1
