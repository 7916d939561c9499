"""`ClientLike`: the part of `Client` that its helpers use (Writer, EpisodeWriter, Sampler,
the wait notice, the read_steps pages), as a typing.Protocol.

Those helpers annotate their client with it, so they need not import client.py, which
imports them to build them: the modules form no import cycle. A `Client` satisfies it
structurally (mypy checks that where a Client is passed). Holds no state; nothing here
runs at import beyond the class definition.
"""
from __future__ import annotations

from concurrent.futures import Future
from typing import Any, Callable, Dict, Optional, Protocol, Sequence, Tuple

import numpy as np

from .columns import InsertBatch
from .connection import Connection
from .schema import TableSchema
from .shm import PlaneTable, StagingArena

__all__ = ["ClientLike"]


class ClientLike(Protocol):
    """What Writer, EpisodeWriter, Sampler, `wait_notice.log_wait`,
    `episode_replies.iterate_steps` and `batch_limits` call on their client (a
    `replayd.Client`)."""

    @property
    def server(self) -> Dict[str, Any]:
        """The server's ``hello`` reply (its ``limits``, e.g. ``max_batch_items``)."""
        ...

    def schema(self, table: str) -> TableSchema:
        """The fields of `table` (cached by the client)."""
        ...

    def policy_version(self, name: str) -> Optional[int]:
        """The version of published value `name` the client last fetched or published."""
        ...

    def table_info(self, table: str, *, timeout: Any = ...) -> Dict[str, Any]:
        """INFO of one table."""
        ...

    def open_connection(self, *, reader_thread: bool = ..., shm: bool = ...) -> Connection:
        """A new private connection to the same server (the caller closes it)."""
        ...

    def send_insert(self, table: str, batch: InsertBatch, *,
                    timeout: Optional[float] = ...) -> "Future[np.ndarray[Any, Any]]":
        """Sends a prepared batch; the future holds its keys."""
        ...

    def plane_table(self, table: str, *, refresh: bool = ...) -> Optional[PlaneTable]:
        """`table` mapped for sampling over the shared-memory plane, or None."""
        ...

    def _plane_of(self, table: str, region: int) -> PlaneTable:
        """The mapping of `table` whose block is `region` (mapped when needed)."""
        ...

    def shm_enabled(self) -> bool:
        """Whether the client uses the shared-memory plane."""
        ...

    def staging_arena(self, nbytes: int) -> Tuple[Connection, StagingArena]:
        """A new staging arena on the client's connection, and that connection."""
        ...

    def unmap_staging(self, conn: Connection, arena: StagingArena) -> None:
        """Releases a staging arena."""
        ...

    def sample_nbytes(self, table: str, batch_size: int) -> int:
        """Bytes of a sample reply's payload of `batch_size` items."""
        ...

    def _call(self, meta: Dict[str, Any], buffers: Sequence[Any] = ...,
              decode: Optional[Callable[..., Any]] = ...) -> Any:
        """One request on the client's shared connection, waited for; the decoded reply."""
        ...
