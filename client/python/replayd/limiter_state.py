"""Why a table's requests wait: its rate limiter's state in words, from an INFO object.

The rules are docs/CONFIG.md's (Reverb semantics): with I inserts, S sampled items, D
removed items, size = I - D and spi = samples_per_insert, a sample of n may proceed when
size >= min_size_to_sample and I*spi - (S + n) >= min_diff; an insert of n may proceed
while size + n <= min_size_to_sample, or when (I + n)*spi - S <= max_diff.

Pure functions of the INFO dict; thread-safe.
"""
from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Tuple

__all__ = ["limiter_bounds", "sample_state", "insert_state"]


def limiter_bounds(info: Mapping[str, Any]
                   ) -> Tuple[float, int, Optional[float], Optional[float]]:
    """(samples_per_insert, min_size_to_sample, min_diff, max_diff) of a table's limiter,
    whatever kind its description names."""
    limiter: Dict[str, Any] = dict(info.get("description", {}).get("rate_limiter") or {})
    kind = limiter.get("kind", "min_size")
    min_size = int(limiter.get("min_size_to_sample", 1))
    if kind == "min_size":
        return 1.0, min_size, None, None
    if kind == "queue":
        size = float(limiter["size"])
        return 1.0, 1, 0.0, size
    spi = float(limiter.get("samples_per_insert", 1.0))
    if kind == "sample_to_insert_ratio":
        target = min_size * spi
        buffer = float(limiter.get("error_buffer", 0.0))
        return spi, min_size, target - buffer, target + buffer
    min_diff = limiter.get("min_diff")
    max_diff = limiter.get("max_diff")
    return (spi, min_size, None if min_diff is None else float(min_diff),
            None if max_diff is None else float(max_diff))


def _counts(info: Mapping[str, Any]) -> Tuple[int, int, int]:
    """(I, S, I - D) as the limiter counts them (its size is not the table's after
    evictions)."""
    counts = info.get("rate_limiter") or {}
    inserts = int(counts.get("inserts", 0))
    return inserts, int(counts.get("samples", 0)), inserts - int(counts.get("deletes", 0))


def sample_state(info: Mapping[str, Any], n: int = 1) -> str:
    """"ready", or why a sample of n items of the table must wait."""
    spi, min_size, min_diff, _ = limiter_bounds(info)
    inserts, samples, size = _counts(info)
    if size < min_size:
        return (f"waits: the table holds {size} items and its rate limiter samples from "
                f"{min_size} (min_size_to_sample)")
    if min_diff is not None and inserts * spi - (samples + n) < min_diff:
        return (f"waits: samples are ahead of inserts ({samples} sampled for {inserts} "
                f"inserted at {spi:g} samples per insert; the limiter allows "
                f"{inserts * spi - min_diff:g}); more inserts release it")
    return "ready"


def insert_state(info: Mapping[str, Any], n: int = 1) -> str:
    """"ready", or why an insert of n items into the table must wait."""
    spi, min_size, _, max_diff = limiter_bounds(info)
    inserts, samples, size = _counts(info)
    if max_diff is None or size + n <= min_size or (inserts + n) * spi - samples <= max_diff:
        return "ready"
    return (f"waits: inserts are ahead of samples ({inserts} inserted, {samples} sampled at "
            f"{spi:g} samples per insert; max_diff {max_diff:g}); more samples release it")
