"""Keys and draws of a table spread over shards (replayd.sharded): global keys (the shard's
index in the top `SHARD_BITS` bits above the shard's own key), each shard's share of a draw,
and the union Sample built from the shards' parts with union-wide probabilities and weights.

Pure functions over numpy arrays and Samples; thread-safe.
"""
from __future__ import annotations

import math
from typing import Any, Dict, List, Mapping, Tuple

import numpy as np

from ..errors import InvalidArgument
from ..sample import Sample

__all__ = ["SHARD_BITS", "MAX_SHARDS", "global_keys", "split_keys", "draw_shares",
           "union_sample"]

SHARD_BITS = 8
LOCAL_BITS = 64 - SHARD_BITS
LOCAL_MASK = np.uint64((1 << LOCAL_BITS) - 1)
MAX_SHARDS = 1 << SHARD_BITS


def global_keys(shard: int, local: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """`local` keys (or episode ids) of `shard` with the shard's index in the top bits."""
    local = np.asarray(local, dtype=np.uint64)
    if local.size and int(local.max()) >> LOCAL_BITS:
        raise InvalidArgument(f"shard {shard} issued a key >= 2^{LOCAL_BITS}; it cannot be "
                              f"combined with a shard index")
    return local | np.uint64(shard << LOCAL_BITS)


def split_keys(keys: Any, shard_count: int) -> Dict[int, np.ndarray[Any, Any]]:
    """Groups global keys by shard: shard index -> positions into `keys`."""
    keys = np.asarray(keys, dtype=np.uint64).reshape(-1)
    shards = (keys >> np.uint64(LOCAL_BITS)).astype(np.int64)
    if keys.size and int(shards.max()) >= shard_count:
        raise InvalidArgument(f"key {int(keys[int(np.argmax(shards))])} names shard "
                              f"{int(shards.max())}, but there are {shard_count} shards")
    return {int(s): np.flatnonzero(shards == s) for s in np.unique(shards)}


def union_sample(samples: List[Tuple[int, Sample]], shares: np.ndarray[Any, Any],
                 masses: List[Tuple[int, float, float]],
                 states: Mapping[int, Tuple[int, float, float]], beta: float) -> Sample:
    """One Sample of the parts `samples` ((shard, its Sample), drawn with `shares`): global
    keys, probabilities P = share * local probability, weights (P / min P)^-beta where min P
    is the smallest probability any stored item had over the union: per shard, its share
    times its smallest local probability, from `states` (size, mass, min_mass as the draw
    saw the shard) or else `masses` (as known before the draw)."""
    smallest = math.inf
    for s, known in enumerate(masses):
        known = states.get(s, known)
        if shares[s] > 0 and known[0] > 0:
            smallest = min(smallest, shares[s] * smallest_local_probability(*known))
    probabilities = np.concatenate([shares[s] * sample.probabilities for s, sample in samples])
    if beta and math.isfinite(smallest):
        weights = (probabilities / smallest) ** -beta
    else:
        weights = np.ones_like(probabilities)
    masks = [sample.mask for _, sample in samples if sample.mask is not None]
    return Sample(
        data={name: np.concatenate([sample.flat[name] for _, sample in samples])
              for name in samples[0][1].flat},
        keys=np.concatenate([global_keys(s, sample.keys) for s, sample in samples]),
        probabilities=probabilities,
        weights=weights,
        times_sampled=np.concatenate([sample.times_sampled for _, sample in samples]),
        state=None,
        mask=np.concatenate(masks) if masks else None)


def draw_shares(masses: List[Tuple[int, float, float]]) -> np.ndarray[Any, Any]:
    """Each shard's share of the draws: in proportion to its mass; when every stored item has
    priority 0 (no mass anywhere), in proportion to the sizes, as one table would fall back
    to uniform; when nothing is known to be stored, evenly (each shard's limiter decides)."""
    sizes = np.array([size for size, _, _ in masses], float)
    weights = np.array([mass if size > 0 else 0.0 for size, mass, _ in masses])
    if not weights.sum() > 0:
        weights = sizes
    if not weights.sum() > 0:
        weights = np.ones(len(masses))
    shares: np.ndarray[Any, Any] = weights / weights.sum()
    return shares


def smallest_local_probability(size: int, mass: float, min_mass: float) -> float:
    """The smallest probability a draw on one shard gives any of its items."""
    return min_mass / mass if mass > 0 else 1.0 / size
