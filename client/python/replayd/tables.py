"""Reverb's queue and stack tables as replayd table descriptions.

A queue (``queue``) hands out every item exactly once, oldest first; a stack (``stack``)
newest first. Both hold at most `size` items: an insert into a full one waits until a sample
takes an item, and a sample from an empty one waits until an insert brings one. Like
Reverb's ``Table.queue`` / ``Table.stack``: FIFO (LIFO) sampler and remover,
``max_times_sampled=1`` and the ``Queue(size)`` rate limiter (spi 1, min_size 1, diff in
``[0, size]``), with capacity `size`. The remover never runs: the rate limiter keeps the
table from filling past `size`.

    client.create_queue("episodes", {"obs": (np.float32, 4)}, size=100)
    description = replayd.queue("episodes", {"obs": (np.float32, 4)}, 100)  # the JSON form
"""
from __future__ import annotations

from typing import Any, Dict, Optional

from .rate_limiters import Queue
from .schema import FieldsLike, table_description

__all__ = ["queue", "stack", "queue_options", "stack_options"]


def queue_options(size: int) -> Dict[str, Any]:
    """`Client.create_table` keyword arguments (besides name, fields, capacity=size) of a
    queue of at most `size` items."""
    return {"sampler": "fifo", "remover": "fifo", "max_times_sampled": 1,
            "rate_limiter": Queue(int(size))}


def stack_options(size: int) -> Dict[str, Any]:
    """Like `queue_options`, newest item first."""
    return {"sampler": "lifo", "remover": "lifo", "max_times_sampled": 1,
            "rate_limiter": Queue(int(size))}


def queue(name: str, fields: FieldsLike, size: int, *, seed: Optional[int] = None
          ) -> Dict[str, Any]:
    """The table description (docs/PROTOCOL.md) of a FIFO queue of at most `size` items,
    for ``create_table`` requests or the server's config file."""
    return table_description(name, fields, size, seed=seed, **queue_options(size))


def stack(name: str, fields: FieldsLike, size: int, *, seed: Optional[int] = None
          ) -> Dict[str, Any]:
    """The table description of a LIFO stack of at most `size` items."""
    return table_description(name, fields, size, seed=seed, **stack_options(size))
