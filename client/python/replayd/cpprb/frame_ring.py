"""cpprb's ring of `size` transitions on top of the rows of a frame buffer's table
(replayd.cpprb.pixel_frames): which rows hold the live transitions and at which ring
positions, and which rows may go.

A frame buffer's table stores rows: per transition one row (its newest frame), and before a
stored episode's first transition ``H`` history rows (H = the largest stack - 1, never
drawn). cpprb's ring holds exactly `size` transitions, so here:

- transition number t (counted from the last clear) sits at ring position ``t % size``; when
  transition t + size is added, transition t dies: its row gets priority 0 (the table is
  prioritized, so it is never drawn again) but stays while it is one of the H rows before
  the oldest live transition (whose stack reads it);
- rows older than those H rows are deleted. Deletes may lag (they are sent in batches): the
  table has room for every row a ring of `size` transitions can need (``capacity``), and if
  deletes lag behind, the rows the table's FIFO evicts first are exactly the ones waiting to
  be deleted (a later delete of their key is stale and ignored);
- the key of every row (from the replies to the writer's requests) maps sampled keys back
  to ring positions.

One object per buffer object, used by the thread and process that created the buffer.
"""
from __future__ import annotations

import collections
from concurrent.futures import Future
from typing import Any, Deque, Dict, List, Tuple

import numpy as np

__all__ = ["FrameRing"]


class FrameRing:
    """The live transitions of a frame buffer of `size` with `history` rows per stored
    episode (module docstring)."""

    def __init__(self, size: int, history: int) -> None:
        self.size = size
        self.history = history
        # Rows a ring of `size` transitions can need at once: each live transition's row, and
        # H history rows before every stored episode they start (at most one per transition)
        # and before the oldest one.
        self.capacity = size * (history + 1) + history
        self.reset()

    def reset(self) -> None:
        """Forgets every row and transition (after the table was reset)."""
        # Keys of the rows whose replies came, by row number % (2 * capacity), with the row
        # number they belong to: an entry of an older row means "not known yet", of a newer
        # one "lost" (if such a row still waits for its delete, the table's FIFO evicts it
        # first: the table is full of rows only then).
        self.keys_kept = 2 * self.capacity
        self.row_keys = np.zeros(self.keys_kept, np.uint64)
        self.row_numbers = np.full(self.keys_kept, -1, np.int64)
        self.rows_appended = 0  # rows given to the writer
        self.rows_watched = 0  # rows the writer sent
        self.batches: Deque[Tuple[int, "Future[Any]"]] = collections.deque()  # (first row, keys)
        self.added = 0  # transitions added
        self.transition_rows = [-1] * self.size  # row number per position
        self.position_keys = [0] * self.size  # key per position; 0: unknown
        self.key_positions: Dict[int, int] = {}
        self.unkeyed: List[Tuple[int, int]] = []  # (position, row) whose key is not known yet
        self.dead_rows: List[int] = []  # rows of dead transitions not yet given priority 0
        self.deleted_below = 0  # rows below were deleted (or the delete was sent)
        self.delete_below = 0  # rows below may be deleted

    def __getstate__(self) -> Dict[str, Any]:
        """A copy for another process: the keys known so far, no futures."""
        self._absorb()
        state = dict(self.__dict__)
        state["batches"] = collections.deque()
        return state

    # -- the writer's side ---------------------------------------------------------------

    def new_row(self) -> int:
        """Numbers the next row given to the writer."""
        row = self.rows_appended
        self.rows_appended += 1
        return row

    def watch(self, n: int, future: "Future[Any]") -> None:
        """The writer sent the next `n` rows; `future` holds their keys."""
        self._absorb()
        self.batches.append((self.rows_watched, future))
        self.rows_watched += n

    def _absorb(self) -> None:
        """Notes the keys of the batches whose replies came (in the buffer's thread: a
        future's waiter may wake before its callbacks ran)."""
        while self.batches and self.batches[0][1].done():
            first, future = self.batches.popleft()
            if future.exception() is None:
                keys = np.asarray(future.result(), np.uint64)
                rows = first + np.arange(keys.shape[0])
                at = rows % self.keys_kept
                self.row_keys[at] = keys
                self.row_numbers[at] = rows

    def add_transition(self, row: int) -> int:
        """Puts the transition stored in `row` at the next ring position (returned); the
        transition it replaces dies."""
        added = self.added
        size = self.size
        position = added % size
        rows = self.transition_rows
        old = rows[position]
        if old >= 0:
            self.dead_rows.append(old)
            self.key_positions.pop(self.position_keys[position], None)
            self.position_keys[position] = 0
        rows[position] = row
        self.unkeyed.append((position, row))
        self.added = added = added + 1
        if added > size:  # the oldest live transition's H rows before it stay
            below = rows[added % size] - self.history
            if below > self.delete_below:
                self.delete_below = below
        return position

    # -- what is known and what to send ----------------------------------------------------

    def _key(self, row: int) -> int:
        """The row's key; 0 when not known yet; -1 when lost."""
        at = row % self.keys_kept
        number = int(self.row_numbers[at])
        if number == row:
            return int(self.row_keys[at])
        return 0 if number < row else -1

    def idle(self) -> bool:
        """Nothing to note or send since the last take_requests."""
        return not (self.batches or self.dead_rows or self.unkeyed or
                    self.deleted_below < self.delete_below)

    def settled(self, live_keys: bool = True) -> bool:
        """Whether every dead row's key is known and, with `live_keys`, every live
        transition's."""
        self.note_keys()
        return not (live_keys and self.unkeyed) and all(
            self._key(row) != 0 or row < self.delete_below for row in self.dead_rows)

    def note_keys(self) -> None:
        """Maps the live transitions whose keys arrived to their positions."""
        self._absorb()
        if not self.unkeyed:
            return
        rows = np.fromiter((row for _, row in self.unkeyed), np.int64, len(self.unkeyed))
        at = rows % self.keys_kept
        numbers = self.row_numbers[at]
        keys = self.row_keys[at].tolist()
        known = (numbers == rows).tolist()
        pending = (numbers < rows).tolist()
        transition_rows, position_keys = self.transition_rows, self.position_keys
        key_positions = self.key_positions
        waiting = []
        for i, (position, row) in enumerate(self.unkeyed):
            if transition_rows[position] != row:
                continue  # died before its key came
            if known[i]:
                position_keys[position] = keys[i]
                key_positions[keys[i]] = position
            elif pending[i]:
                waiting.append((position, row))
        self.unkeyed = waiting

    def take_requests(self) -> Tuple["np.ndarray[Any, Any]", "np.ndarray[Any, Any]"]:
        """(keys to give priority 0, keys to delete) whose keys are known; the others stay
        pending."""
        self._absorb()
        dead = np.array(self.dead_rows, np.int64)
        dead = dead[dead >= self.delete_below]  # the others' deletes cover them
        at = dead % self.keys_kept
        numbers = self.row_numbers[at]
        zero = self.row_keys[at[numbers == dead]]
        self.dead_rows = dead[numbers < dead].tolist()  # keys not known yet
        rows = np.arange(self.deleted_below, self.delete_below)
        at = rows % self.keys_kept
        keys = self.row_keys[at]
        known = self.row_numbers[at] >= rows  # known or lost
        waiting_at = np.flatnonzero(~known)
        if waiting_at.shape[0]:  # in order: stop at the first row whose key is not known
            rows, at, keys = rows[:waiting_at[0]], at[:waiting_at[0]], keys[:waiting_at[0]]
        self.deleted_below += int(rows.shape[0])
        return zero, keys[self.row_numbers[at] == rows]

    def positions(self, keys: "np.ndarray[Any, Any]") -> "np.ndarray[Any, Any]":
        """The ring positions of live transitions' `keys`, -1 for a key not known live."""
        found = self.key_positions
        return np.fromiter((found.get(int(key), -1) for key in np.asarray(keys).reshape(-1)),
                           np.int64, count=int(np.asarray(keys).size))
