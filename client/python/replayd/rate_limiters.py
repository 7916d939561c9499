"""Rate limiter descriptions for `Client.create_table` (Reverb semantics, docs/CONFIG.md).

Each helper is plain data that renders the JSON form the server expects. With inserts I,
samples S and samples_per_insert spi, the server keeps ``I*spi - S`` within
``[min_diff, max_diff]`` once ``min_size_to_sample`` items exist; requests that would leave
that band wait.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional, Union

__all__ = ["RateLimiter", "MinSize", "SampleToInsertRatio", "Queue", "Custom",
           "rate_limiter_json"]


class RateLimiter:
    """Base class of the rate limiter helpers."""

    def to_json(self) -> Dict[str, Any]:
        """The JSON object for a table description."""
        raise NotImplementedError


@dataclass(frozen=True)
class MinSize(RateLimiter):
    """Sampling waits until `min_size_to_sample` items exist; inserts never wait."""

    min_size_to_sample: int = 1

    def to_json(self) -> Dict[str, Any]:
        return {"kind": "min_size", "min_size_to_sample": int(self.min_size_to_sample)}


@dataclass(frozen=True)
class SampleToInsertRatio(RateLimiter):
    """Keeps about `samples_per_insert` sampled items per inserted item, within
    ``± error_buffer``, once `min_size_to_sample` items exist."""

    samples_per_insert: float
    min_size_to_sample: int
    error_buffer: float

    def to_json(self) -> Dict[str, Any]:
        return {"kind": "sample_to_insert_ratio",
                "samples_per_insert": float(self.samples_per_insert),
                "min_size_to_sample": int(self.min_size_to_sample),
                "error_buffer": float(self.error_buffer)}


@dataclass(frozen=True)
class Queue(RateLimiter):
    """At most `size` items between inserts and samples; use with ``sampler="fifo"`` and
    ``max_times_sampled=1`` for a FIFO queue."""

    size: int

    def to_json(self) -> Dict[str, Any]:
        return {"kind": "queue", "size": int(self.size)}


@dataclass(frozen=True)
class Custom(RateLimiter):
    """The general form: `min_diff` / `max_diff` of None mean unbounded."""

    samples_per_insert: float = 1.0
    min_size_to_sample: int = 1
    min_diff: Optional[float] = None
    max_diff: Optional[float] = None

    def to_json(self) -> Dict[str, Any]:
        return {"kind": "custom",
                "samples_per_insert": float(self.samples_per_insert),
                "min_size_to_sample": int(self.min_size_to_sample),
                "min_diff": None if self.min_diff is None else float(self.min_diff),
                "max_diff": None if self.max_diff is None else float(self.max_diff)}


def rate_limiter_json(limiter: Union[None, RateLimiter, Mapping[str, Any]]
                      ) -> Optional[Dict[str, Any]]:
    """None (the server's default, min_size 1), a helper, or a JSON-ready mapping."""
    if limiter is None:
        return None
    if isinstance(limiter, RateLimiter):
        return limiter.to_json()
    if isinstance(limiter, Mapping):
        return dict(limiter)
    raise TypeError(f"rate_limiter must be None, a replayd rate limiter (MinSize, "
                    f"SampleToInsertRatio, Queue, Custom) or a dict, got {limiter!r}")
