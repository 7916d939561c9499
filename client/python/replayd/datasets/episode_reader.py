"""An episodic table's ENDED episodes, streamed: ``read_steps`` pages in insertion order,
each episode's rows gathered until its last row (``end`` 1: terminated, 2: truncated)
comes, then handed over whole, in episode id order. Memory: the rows of the episodes still
being gathered (for a table written one episode after another, a few) and one page.

Why a reorder: an ``append_steps`` request stores its final observations after all its
steps, so the episodes of one request end in another order than they began. An ended
episode is held until no episode of a smaller id is still being gathered, or until the
held episodes pass `max_held_bytes` (256 MiB): an episode that stays open (a live
explorer's) then no longer holds the others back, which come in the order they ended.

Episodes still open when the read reaches the table's end are left out, and so are ended
episodes whose first steps were evicted or deleted (their rows do not start at position
0); `skipped` counts both. The server keeps serving meanwhile: steps stored after the read
began come in later pages.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Tuple

import numpy as np

from ..client_interface import ClientLike
from ..episode_replies import END_TERMINATED, iterate_steps
from ..errors import InvalidArgument

__all__ = ["EndedEpisodes", "EndedEpisode"]

_BOOKKEEPING = ("key", "episode", "position", "sequence", "end", "version")


@dataclass
class EndedEpisode:
    """One ended episode: its id, whether it terminated (else truncated), and its rows in
    position order (leaf path -> array; a next_of table's last row is the final
    observation)."""
    id: int
    terminated: bool
    rows: Dict[str, np.ndarray[Any, Any]]

    def __len__(self) -> int:
        return int(len(self.rows["position"]))

    @property
    def nbytes(self) -> int:
        return sum(int(array.nbytes) for array in self.rows.values())


@dataclass
class EndedEpisodes:
    """Iterates the ended episodes of `table` in id order (see above)."""
    client: ClientLike
    table: str
    page: int = 4096
    max_held_bytes: int = 256 << 20
    skipped: int = 0
    _open: Dict[int, List[Dict[str, np.ndarray[Any, Any]]]] = field(default_factory=dict)
    _held: List[Tuple[int, int, EndedEpisode]] = field(default_factory=list)  # a heap
    _held_bytes: int = 0

    def __iter__(self) -> Iterator[EndedEpisode]:
        for columns in iterate_steps(self.client, self.table, self.page):
            if "end" not in columns:
                raise InvalidArgument(f"table '{self.table}': the server's read_steps sends "
                                      "no 'end' column (a server too old to tell how "
                                      "episodes ended); upgrade it to export")
            for episode in self._page(columns):
                heapq.heappush(self._held, (episode.id, len(self._held), episode))
                self._held_bytes += episode.nbytes
            yield from self._release(final=False)
        self.skipped += len(self._open)
        self._open.clear()
        yield from self._release(final=True)

    def _release(self, final: bool) -> Iterator[EndedEpisode]:
        """The held episodes no open episode of a smaller id can precede (all of them at
        the end, and the smallest while too many bytes are held)."""
        first_open = min(self._open) if self._open else None
        while self._held and (final or first_open is None or self._held[0][0] < first_open
                              or self._held_bytes > self.max_held_bytes):
            _, _, episode = heapq.heappop(self._held)
            self._held_bytes -= episode.nbytes
            yield episode

    def _page(self, columns: Dict[str, np.ndarray[Any, Any]]) -> Iterator[EndedEpisode]:
        episodes = columns["episode"]
        cuts = np.flatnonzero(episodes[1:] != episodes[:-1]) + 1
        bounds = np.concatenate([[0], cuts, [len(episodes)]])
        for begin, stop in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
            episode = int(episodes[begin])
            run = {name: np.array(array[begin:stop]) for name, array in columns.items()}
            self._open.setdefault(episode, []).append(run)
            end = int(columns["end"][stop - 1])
            if end:
                runs = self._open.pop(episode)
                rows = runs[0] if len(runs) == 1 else \
                    {name: np.concatenate([run[name] for run in runs]) for name in runs[0]}
                if len(rows["position"]) and int(rows["position"][0]) == 0 and \
                        np.all(np.diff(rows["position"].astype(np.int64)) == 1):
                    yield EndedEpisode(episode, end == END_TERMINATED, rows)
                else:
                    self.skipped += 1


def fields_of(rows: Dict[str, np.ndarray[Any, Any]]) -> Dict[str, np.ndarray[Any, Any]]:
    """The field columns of an episode's rows (bookkeeping columns left out)."""
    return {name: array for name, array in rows.items() if name not in _BOOKKEEPING}
