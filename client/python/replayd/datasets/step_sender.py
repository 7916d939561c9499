"""Bulk episode writing for dataset loads: whole chunks of steps of many episodes per
``append_steps`` request (docs/PROTOCOL.md), their ends and final observations in the same
request, several requests in flight on a private connection (the episodes' writer).

A chunk is columnar already (arrays of rows read from a file), so nothing is copied row by
row as EpisodeWriter.append would: this is what lets a load run at a million steps a
second. Memory: the chunks in flight (`max_in_flight`) and nothing else.

One thread uses a StepSender. Errors of a request are raised by the next call; `stored`
counts the episodes the server confirmed ended.
"""
from __future__ import annotations

from collections import deque
from concurrent.futures import Future
from typing import Any, Deque, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from ..client_interface import ClientLike
from ..columns import decode_keys
from ..errors import InvalidArgument
from ..schema import Field
from ..shm.insert_arena import InsertArena, open_insert_arena
from ..wire import padded

__all__ = ["StepSender", "EpisodeEnd"]

#: (episode id, terminated, final observation: next_of field -> value, or None)
EpisodeEnd = Tuple[int, bool, Optional[Mapping[str, Any]]]


def _no_keys(meta: Mapping[str, Any], payload: Any) -> np.ndarray[Any, Any]:
    return np.zeros(0, np.uint64)


class StepSender:
    """Sends chunks of steps to one episodic table over a connection of its own."""

    def __init__(self, client: ClientLike, table: str, *, max_in_flight: int = 16) -> None:
        self._table = table
        self._schema = client.schema(table)
        self._fields: Tuple[Field, ...] = self._schema.fields
        self._next_of = [f for f in self._fields if f.next_of]
        self._conn = client.open_connection(shm=True)
        # Over the plane, each append's columns go through a staging arena of the
        # connection (docs/SHM.md, "Batched inserts"); made at the first append.
        self._arena: Optional[InsertArena] = None
        self._arena_refused = False
        self._in_flight: Deque[Tuple[Future[Any], int]] = deque()  # (reply, ends it holds)
        self._max_in_flight = max_in_flight
        self.stored_episodes = 0  # episodes whose end the server confirmed
        self.stored_steps = 0     # steps the server confirmed

    def open_episodes(self, n: int) -> List[int]:
        """n new episode ids of this sender's connection (one round trip)."""
        if n <= 0:
            return []
        reply = self._conn.call({"op": "open_episodes", "table": self._table, "n": int(n)})
        return [int(i) for i in reply["episodes"]]

    def max_rows(self) -> int:
        """The most rows one request may carry: the server's max_batch_items, and what
        fits in its max_frame_bytes (less 64 KiB for the metadata)."""
        limits = self._conn.limits
        row_bytes = sum(f.item_bytes for f in self._fields) + 8  # and the episode id
        frame = int(limits.get("max_frame_bytes", 64 << 20)) - (64 << 10)
        return max(1, min(int(limits.get("max_batch_items", 65536)), frame // row_bytes))

    def max_ends(self) -> int:
        """The most ends one request lists: what fits in the server's max_meta_bytes
        (64 bytes an entry, 8 KiB left for the rest of the metadata)."""
        meta = int(self._conn.limits.get("max_meta_bytes", 65536))
        return max(1, (meta - 8192) // 64)

    def send(self, columns: Mapping[str, np.ndarray[Any, Any]],
             episode_ids: np.ndarray[Any, Any], ends: Sequence[EpisodeEnd],
             versions: Optional[np.ndarray[Any, Any]] = None) -> None:
        """Appends the rows of `columns` (every field, n rows each, in any order) to the
        episodes `episode_ids` (n uint64), then ends `ends`; `versions`: each row's policy
        version (n uint64), or None for none. Returns once the requests are
        sent, waiting only while `max_in_flight` await replies. One request when it fits
        (`max_rows`, `max_ends`); else several, each end in the request that holds its
        episode's last row here (or in the last one), in the order of those rows."""
        n = int(len(episode_ids))
        most_rows, most_ends = self.max_rows(), self.max_ends()
        if n <= most_rows and len(ends) <= most_ends:
            self._send(columns, episode_ids, ends, versions)
            return
        ids = np.asarray(episode_ids)
        # each episode's last row here, from the runs of equal ids (a few per episode)
        run_ends = np.append(np.flatnonzero(ids[1:] != ids[:-1]), n - 1)
        last_row = dict(zip(ids[run_ends].tolist(), run_ends.tolist()))
        ordered = sorted(ends, key=lambda end: last_row.get(int(end[0]), n - 1))
        begin = k = 0
        while begin < n:
            stop = min(begin + most_rows, n)
            piece_ends: List[EpisodeEnd] = []
            while (k < len(ordered) and len(piece_ends) < most_ends
                   and last_row.get(int(ordered[k][0]), n - 1) < stop):
                piece_ends.append(ordered[k])
                k += 1
            if len(piece_ends) == most_ends and k < len(ordered) and \
                    last_row.get(int(ordered[k][0]), n - 1) < stop:
                stop = last_row[int(piece_ends[-1][0])] + 1  # the rest in the next request
            piece = slice(begin, stop)
            self._send({name: array[piece] for name, array in columns.items()},
                       ids[piece], piece_ends, None if versions is None else versions[piece])
            begin = stop
        self._end_alone(ordered[k:])  # ends of episodes with no row in this batch

    def _send(self, columns: Mapping[str, np.ndarray[Any, Any]],
              episode_ids: np.ndarray[Any, Any], ends: Sequence[EpisodeEnd],
              versions: Optional[np.ndarray[Any, Any]] = None) -> None:
        n = int(len(episode_ids))
        metas: List[Dict[str, Any]] = []
        buffers: List[Any] = []
        for field in self._fields:
            try:
                array = columns[field.name]
            except KeyError:
                raise InvalidArgument(f"table '{self._table}': no values for field "
                                      f"'{field.name}'") from None
            array = np.ascontiguousarray(array, dtype=field.dtype)
            if array.shape != (n, *field.shape):
                raise InvalidArgument(f"table '{self._table}': field '{field.name}': rows of "
                                      f"shape {list(array.shape[1:])}, the table's "
                                      f"{list(field.shape)}")
            metas.append({"name": field.name, "dtype": field.dtype.name,
                          "shape": [n, *field.shape]})
            buffers.append(array)
        buffers.append(np.ascontiguousarray(episode_ids, dtype="<u8"))
        if versions is not None:  # after the ids (no priorities), before final columns
            if len(versions) != n:
                raise InvalidArgument(f"table '{self._table}': {len(versions)} versions for "
                                      f"{n} steps")
            buffers.append(np.ascontiguousarray(versions, dtype="<u8"))
        if not self._next_of:  # no final observations to send
            ends = [(e, t, None) for e, t, _ in ends]
        with_final = [end for end in ends if end[2] is not None]
        without = [end for end in ends if end[2] is None]
        meta: Dict[str, Any] = {"op": "append_steps", "table": self._table, "n": n,
                                "priorities": False, "timeout_ms": None, "columns": metas}
        if versions is not None:
            meta["versions"] = True
        # One request's ends carry final observations all or none: the ends with them are
        # listed in the append, the others follow as end_episode requests (pipelined).
        listed = with_final if with_final else without
        if n == 0:
            listed = []
        if listed:
            meta["end"] = [{"episode": int(e), "terminated": bool(t)} for e, t, _ in listed]
            if listed is with_final:
                final_metas, final_buffers = self._final_columns(listed)
                meta["final_columns"] = final_metas
                buffers += final_buffers
        if n:
            staged = listed is not with_final or not listed  # final columns: the socket
            self._submit(meta, buffers, len(listed), staged_rows=n if staged else 0)
        self._end_alone([end for end in ends if not any(end is x for x in listed)])

    def _end_alone(self, ends: Sequence[EpisodeEnd]) -> None:
        """Ends `ends` with an end_episode request each (pipelined)."""
        for episode, terminated, final in ends:
            end_meta: Dict[str, Any] = {"op": "end_episode", "table": self._table,
                                        "episode": int(episode),
                                        "terminated": bool(terminated)}
            end_buffers: List[Any] = []
            if final is not None and self._next_of:
                end_meta["columns"], end_buffers = self._final_columns([(episode, terminated,
                                                                         final)])
            self._submit(end_meta, end_buffers, 1, decode=_no_keys)

    def _final_columns(self, ends: Sequence[EpisodeEnd]
                       ) -> Tuple[List[Dict[str, Any]], List[Any]]:
        metas, arrays = [], []
        for field in self._next_of:
            values = np.empty((len(ends), *field.shape), field.dtype)
            for i, (_, _, final) in enumerate(ends):
                assert final is not None
                values[i] = final[field.name]
            metas.append({"name": field.name, "dtype": field.dtype.name,
                          "shape": [len(ends), *field.shape]})
            arrays.append(values)
        return metas, arrays

    def _submit(self, meta: Dict[str, Any], buffers: List[Any], ends: int,
                decode: Any = decode_keys, staged_rows: int = 0) -> None:
        """Sends one request (`staged_rows`: an append of that many rows whose `buffers`
        may go through the staging arena instead of the socket)."""
        while len(self._in_flight) >= self._max_in_flight:
            self._reap()
        sent = self._staged(meta, buffers, staged_rows) if staged_rows else None
        _, future = sent if sent is not None else self._conn.submit(meta, buffers, decode)
        self._in_flight.append((future, ends))

    def _staged(self, meta: Dict[str, Any], buffers: List[Any], rows: int) -> Any:
        """(request id, future) of the append sent staged, or None (the socket)."""
        nbytes = sum(padded(b.nbytes) for b in buffers)
        arena = self._arena
        if arena is None or not arena.fits_bytes(nbytes):
            if (self._arena_refused or not self._conn.shm_offered
                    or any(f.is_frame for f in self._fields)):
                return None
            if arena is not None:  # too small for this append: a larger one
                arena.retire()
                self._unmap(arena)
            self._arena = arena = open_insert_arena(self._conn, nbytes, None)
            if arena is None:
                self._arena_refused = True
                return None
        return arena.send_columns(meta, buffers, rows)

    def _unmap(self, arena: InsertArena) -> None:
        """Releases `arena` (requests still reading it keep the server's mapping)."""
        try:
            self._conn.call({"op": "unmap_staging", "arena": arena.arena.id})
        finally:
            arena.arena.close()

    def _reap(self) -> None:
        """Waits for the oldest request; raises its error."""
        future, ends = self._in_flight.popleft()
        keys = future.result()
        self.stored_steps += len(keys)
        self.stored_episodes += ends

    def flush(self) -> None:
        """Waits until every request sent is confirmed; raises the first error."""
        while self._in_flight:
            self._reap()

    def close(self) -> None:
        """Closes the connection: the server ends its still-open episodes as truncated."""
        self._conn.close()
        if self._arena is not None:
            self._arena.arena.close()  # the server released it with the connection
