"""The episodic table a dataset is loaded into: created from the dataset's spaces when it
does not exist (the dataset's description kept in the table's metadata under
`DATASET_KEY`, for exports), checked against them when it does. And how a load reports
what it stored, also when it stops early."""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from ..client_interface import ClientLike
from ..errors import InvalidArgument, ReplayError
from ..schema import wire_dtype
from .progress import Progress
from .step_sender import StepSender

__all__ = ["DATASET_KEY", "FieldSpec", "ensure_table", "LoadResult", "LoadInterrupted",
           "dataset_description", "Loading"]

#: The key of a table's metadata under which a load keeps the dataset's description.
DATASET_KEY = "replayd.dataset"

#: (name, dtype, shape, next_of)
FieldSpec = Tuple[str, np.dtype[Any], Tuple[int, ...], bool]


@dataclass(frozen=True)
class LoadResult:
    """What a load stored: episodes and steps (final observations not counted), the
    seconds it took and the rate."""
    table: str
    episodes: int
    steps: int
    seconds: float

    @property
    def steps_per_second(self) -> float:
        return self.steps / self.seconds if self.seconds > 0 else 0.0


class LoadInterrupted(ReplayError):
    """A load that failed part way; `episodes` / `steps` were stored (and stay)."""

    def __init__(self, message: str, episodes: int, steps: int) -> None:
        super().__init__(message)
        self.episodes = episodes
        self.steps = steps


def dataset_description(client: ClientLike, table: str) -> Optional[Dict[str, Any]]:
    """The dataset description a load kept in `table`'s metadata, or None."""
    metadata = client.schema(table).metadata
    if isinstance(metadata, Mapping):
        described = metadata.get(DATASET_KEY)
        if isinstance(described, dict):
            return described
    return None


def ensure_table(client: Any, table: str, fields: Sequence[FieldSpec], capacity: int,
                 metadata: Dict[str, Any], table_options: Mapping[str, Any]) -> bool:
    """Creates the episodic `table` with `fields` (reward ``rew``) unless it exists; an
    existing one must have exactly these fields (InvalidArgument naming the first
    difference). Returns whether it was created."""
    if table in client.tables():
        schema = client.schema(table, refresh=True)
        have = [(f.name, f.dtype, f.shape, f.next_of) for f in schema.fields]
        want = [(name, wire_dtype(dtype), tuple(shape), next_of)
                for name, dtype, shape, next_of in fields]
        if have != want:
            diff = next((f"{w} vs {h}" for w, h in zip(want, have) if w != h),
                        f"{len(want)} fields vs {len(have)}")
            raise InvalidArgument(f"table '{table}' exists with other fields than the "
                                  f"dataset's (dataset vs table: {diff}); load into a new "
                                  "table, or drop it first")
        return False
    options = dict(table_options)
    options.setdefault("reward", "rew")
    client.create_table(table, [(name, dtype, shape) for name, dtype, shape, _ in fields],
                        capacity, episodic=True,
                        next_of=[name for name, _, _, next_of in fields if next_of],
                        metadata={DATASET_KEY: metadata}, **options)
    return True


class Loading:
    """One load's sender, counts and progress; `fail` turns an exception into the report
    of what was stored."""

    def __init__(self, client: ClientLike, table: str, total_steps: Optional[int],
                 progress: Optional[bool], max_in_flight: int = 16) -> None:
        self.table = table
        self.sender = StepSender(client, table, max_in_flight=max_in_flight)
        self.progress = Progress(total_steps, enabled=progress)
        self.started = time.monotonic()
        self.sent_steps = 0

    def sent(self, steps: int) -> None:
        self.sent_steps += steps
        self.progress.update(self.sent_steps)

    def finish(self) -> LoadResult:
        try:
            self.sender.flush()
        finally:
            self.sender.close()
        self.progress.close(self.sent_steps)
        return LoadResult(self.table, self.sender.stored_episodes, self.sent_steps,
                          time.monotonic() - self.started)

    def fail(self, exc: BaseException) -> BaseException:
        """Stops the load: waits (briefly) for what was sent, closes the connection (the
        server ends an episode left open as truncated) and says how many episodes are
        stored. Returns the exception to raise: a KeyboardInterrupt as it is (the count
        printed to stderr), anything else as LoadInterrupted."""
        self.progress.close()
        try:
            self.sender.flush()
        except BaseException:
            pass
        self.sender.close()
        episodes, steps = self.sender.stored_episodes, self.sender.stored_steps
        message = (f"load into table '{self.table}' stopped: {episodes} episodes "
                   f"({steps} rows) of the dataset are stored")
        if isinstance(exc, KeyboardInterrupt):
            print(message + " (interrupted)", file=sys.stderr)
            return exc
        return LoadInterrupted(f"{message}; the cause: {exc}", episodes, steps)


def reward_dtype(dtype: np.dtype[Any]) -> np.dtype[Any]:
    """The reward field's dtype for a dataset's rewards: float32 or float64 (what an
    episodic table's reward field may be); other dtypes widen to float64."""
    return dtype if dtype in (np.dtype("float32"), np.dtype("float64")) else np.dtype("float64")


def split_rows(values: List[np.ndarray[Any, Any]]) -> np.ndarray[Any, Any]:
    return np.concatenate(values) if len(values) > 1 else values[0]
