"""The server's ``max_batch_items`` (from its ``hello``) applied to what the client asks for
in one request: the pages of ``read_steps`` readers, and the batches of the writers.

The server refuses a request whose ``n`` exceeds ``max_batch_items`` (``resource_exhausted``,
docs/PROTOCOL.md, Limits). A reader's page is the client's own choice, so it is clamped to
the limit silently; a writer's explicit `batch` is the user's, so one above the limit is
refused when the writer is made, not at its first flush. Pure but for reading the hello
reply the client already holds; thread-safe.
"""
from __future__ import annotations

import numbers
from typing import Optional

from .client_interface import ClientLike
from .errors import InvalidArgument

__all__ = ["max_batch_items", "page_rows", "writer_batch"]


def max_batch_items(client: ClientLike) -> Optional[int]:
    """The most items one request may carry on `client`'s server (None: it states no limit)."""
    limit = client.server.get("limits", {}).get("max_batch_items")
    return int(limit) if limit else None


def page_rows(client: ClientLike, page: int) -> int:
    """The rows to ask for per ``read_steps`` page: `page`, at most the server's
    max_batch_items. Raises InvalidArgument for a page below 1."""
    rows = _whole(page)
    if rows is None or rows < 1:
        raise InvalidArgument(f"page must be an int >= 1 (rows per read_steps request), "
                              f"got {page!r}")
    limit = max_batch_items(client)
    return rows if limit is None else min(rows, limit)


def writer_batch(client: ClientLike, table: str, batch: Optional[int], default: int) -> int:
    """The rows of a writer's batch: `batch` when given, else `default` lowered to the
    server's max_batch_items. Raises InvalidArgument when a given `batch` is below 1 or
    above that limit (every request of the writer would be refused)."""
    if batch is None:
        limit = max_batch_items(client)
        return default if limit is None else max(1, min(default, limit))
    rows = _whole(batch)
    if rows is None or rows < 1:
        raise InvalidArgument(f"batch must be an int >= 1 or None, got {batch!r}")
    limit = max_batch_items(client)
    if limit is not None and rows > limit:
        raise InvalidArgument(
            f"table '{table}': batch={rows} exceeds the server's max_batch_items = {limit} "
            f"(each request of the writer would be refused): pass batch <= {limit}, or "
            f"batch=None for a default within the limit, or raise the server's "
            f"limits.max_batch_items (docs/CONFIG.md)")
    return rows


def _whole(value: object) -> Optional[int]:
    """`value` as an int when it is a whole number (a numpy integer, 64.0; not a bool),
    else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None
