"""cpprb's ``next_of`` and ``stack_compress`` in replayd.cpprb: each frame stored once.

cpprb keeps ``next_<name>`` as the next slot's ``<name>`` and a stack (its last axis) as a
strided view of single frames. Here the buffer's episodic table stores **rows**, one per
transition, each holding the newest frame of a frame field; a sample stacks the rows before
it on the server (a ``stack`` frame field, docs/PIXELS.md) and the client cuts the stack
back into cpprb's values:

- ``name`` in ``stack_compress`` with ``S`` frames on its last axis, not in ``next_of``: a
  row holds ``obs[..., -1]``; the table's stack is ``S``; ``obs`` = the stack, last axis.
- ``name`` in ``next_of`` only: a row holds ``next_obs``; stack 2: ``obs``, ``next_obs``.
- in both: a row holds ``next_obs[..., -1]``; stack ``S + 1``: ``obs`` = frames ``0..S-1``,
  ``next_obs`` = frames ``1..S``.

A transition's row is written with the transition, so a ``sample`` right after ``add``
sees it (cpprb's semantics; no wait for the next step).

The frames before a stored episode's first transition are **history rows**: the table has
``pad_history=False``, so its first ``H`` rows (H = the largest stack - 1) are never drawn,
and the buffer writes there the earlier frames of the first transition's value. A new
stored episode starts at every ``on_episode_end()`` and whenever a transition does not
continue the previous one (``obs`` differs from the last ``next_obs``, or its stack does not
shift by one frame): whatever is added, a sample returns exactly the values given to
``add``. cpprb instead assumes continuity between ``on_episode_end`` calls.

History rows take no ring position: which rows hold the `size` live transitions, and which
may go, is replayd.cpprb.frame_ring's.

Used by replayd.cpprb only.
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from .table import stored_shape

Fields = Sequence[Tuple[str, "np.dtype[Any]", Tuple[int, ...]]]
MAX_STACK = 64  # the server's largest stack (docs/PROTOCOL.md, "Frame fields")
Columns = Dict[str, "np.ndarray[Any, Any]"]
Row = Dict[str, Any]  # one row's values (arrays; replayd.cpprb adds a float)


def is_dense(shape: Tuple[int, ...], strides: Tuple[int, ...], itemsize: int) -> bool:
    """Whether an array of `shape` and `strides` covers one block of memory without gaps,
    in some order of its axes (``ravel("K")`` is then a view)."""
    expected = itemsize
    for stride, n in sorted((stride, n) for stride, n in zip(strides, shape) if n != 1):
        if stride != expected:
            return False
        expected *= n
    return True


class FrameField:
    """One cpprb value stored a frame per row."""

    def __init__(self, name: str, dtype: "np.dtype[Any]", shape: Tuple[int, ...],
                 stacked: bool, has_next: bool) -> None:
        self.name = name
        self.next_name = f"next_{name}"
        self.dtype = dtype
        self.shape = shape  # cpprb's shape (stack on the last axis when stacked)
        self.stacked = stacked
        self.frames = shape[-1] if stacked else 1  # S
        self.has_next = has_next
        self.frame_shape = shape[:-1] if stacked else shape
        self.table_stack = self.frames + (1 if has_next else 0)  # S (+1 for next)
        # Equal values are equal bytes (no NaN, no -0.0): `equal` may compare bytes.
        self.bitwise = dtype.kind in "biu"
        self._dense_layouts: Dict[Tuple[Tuple[int, ...], Tuple[int, ...]], bool] = {}

    def row_frame(self, transition: Mapping[str, Any]) -> "np.ndarray[Any, Any]":
        """The frame this transition's row stores."""
        value: "np.ndarray[Any, Any]" = (transition[self.next_name] if self.has_next
                                          else transition[self.name])
        return value[..., -1] if self.stacked else value

    def history(self, transition: Mapping[str, Any]) -> List["np.ndarray[Any, Any]"]:
        """The frames before the row's, oldest first (table_stack - 1 of them)."""
        value = transition[self.name]
        if not self.stacked:
            return [value]  # has_next: obs is the frame before next_obs
        count = self.frames if self.has_next else self.frames - 1
        return [value[..., i] for i in range(count)]

    def equal(self, a: "np.ndarray[Any, Any]", b: "np.ndarray[Any, Any]") -> bool:
        """Whether two values of this field (of its dtype) are equal element by element.
        Integer and bool values laid out alike in one block of memory compare as their
        bytes in memory order (a copy of each and one memcmp: half the time of numpy's
        element-wise compare for an 84x84x4 stack), other values element-wise."""
        if self.bitwise and a.strides == b.strides and a.shape == b.shape:
            layout = (a.shape, a.strides)
            dense = self._dense_layouts.get(layout)
            if dense is None:
                dense = is_dense(a.shape, a.strides, a.itemsize)
                if len(self._dense_layouts) < 64:  # a few layouts in practice
                    self._dense_layouts[layout] = dense
            if dense:
                return a.ravel("K").tobytes() == b.ravel("K").tobytes()
        return bool(np.array_equal(a, b))

    def shifted(self, later: "np.ndarray[Any, Any]", earlier: "np.ndarray[Any, Any]"
                ) -> bool:
        """Whether ``later[..., :-1] == earlier[..., 1:]``: `later` is the stack `earlier`
        moved on by one frame (element-wise, as `equal`)."""
        if later.flags.c_contiguous and earlier.flags.c_contiguous and \
                later.shape == earlier.shape:
            # Frames interleaved (the stack axis innermost): the flat values one element
            # apart, but for the pairs that straddle two stacks (every S-th). The sliced
            # views' compare would run S - 1 elements at a time, ~10x slower.
            same = later.reshape(-1)[:-1] == earlier.reshape(-1)[1:]
            same[self.frames - 1::self.frames] = True
            return bool(same.all())
        return self.equal(later[..., :-1], earlier[..., 1:])

    def check(self, transition: Mapping[str, Any]) -> None:
        """Raises ValueError when the transition's values are not one stack of frames: with
        both options, next_<name> must be <name> shifted by one frame on the last axis."""
        if self.stacked and self.has_next and not self.shifted(
                transition[self.next_name], transition[self.name]):
            raise ValueError(
                f"add(): with next_of and stack_compress, {self.next_name} must be {self.name} "
                f"shifted by one frame on the last axis ({self.next_name}[..., :-1] == "
                f"{self.name}[..., 1:]); these values are not, and storing them would return "
                f"a {self.next_name} that mixes both")

    def continues(self, transition: Mapping[str, Any], previous: Mapping[str, Any]) -> bool:
        """Whether this transition's value is what the rows so far already hold."""
        value = transition[self.name]
        if self.has_next:
            return self.equal(value, previous[self.next_name])
        return self.shifted(value, previous[self.name])

    def split(self, stacks: "np.ndarray[Any, Any]", out: Columns) -> None:
        """cpprb's values from ``(n, table_stack, *frame_shape)`` stacks, into `out`."""
        if not self.stacked:
            out[self.name] = np.ascontiguousarray(stacks[:, 0])
            out[self.next_name] = np.ascontiguousarray(stacks[:, 1])
            return
        # Stacks on cpprb's last axis as transposed views: a contiguous copy would cost ~20x
        # the sample's own copy (its writes are strided), and frameworks copy anyway.
        # next_<name> gets memory of its own, so the two never alias.
        out[self.name] = np.moveaxis(stacks[:, :self.frames], 1, -1)
        if self.has_next:
            out[self.next_name] = np.moveaxis(stacks[:, 1:].copy(), 1, -1)


class FramePlan:
    """Which of a buffer's values are stored a frame per row, and the table that holds
    them. `fields` are cpprb's values (``next_<name>`` included for next_of)."""

    def __init__(self, fields: Fields, next_of: Sequence[str],
                 stack_compress: Sequence[str]) -> None:
        by_name = {name: (dtype, shape) for name, dtype, shape in fields}
        self.frames: List[FrameField] = []
        for name in dict.fromkeys([*next_of, *stack_compress]):
            if name not in by_name:
                raise KeyError(f"stack_compress names '{name}', which env_dict does not "
                               f"define")  # (next_of's names were checked by env_fields)
            dtype, shape = by_name[name]
            stacked = name in stack_compress and len(shape) >= 1 and shape[-1] > 1
            has_next = name in next_of
            if stacked and shape[-1] + has_next > MAX_STACK:  # stored as ordinary values
                stacked = has_next = False
            if stacked or has_next:
                self.frames.append(FrameField(name, dtype, shape, stacked, has_next))
        self.history_rows = max((f.table_stack - 1 for f in self.frames), default=0)
        replaced = {f.name for f in self.frames} | {f.next_name for f in self.frames
                                                    if f.has_next}
        self.plain = [(name, dtype, shape) for name, dtype, shape in fields
                      if name not in replaced]
        self.plain_names = [name for name, _, _ in self.plain]
        # What `continues` reads of the previous transition.
        self.names = [f.next_name if f.has_next else f.name for f in self.frames]
        self.frame_names = {f.name for f in self.frames}  # stacked fields of the table

    def __bool__(self) -> bool:
        return bool(self.frames)

    def table_fields(self) -> List[Tuple[str, "np.dtype[Any]", Tuple[int, ...]]]:
        return [*self.plain, *((f.name, f.dtype, f.frame_shape) for f in self.frames)]

    def table_stacks(self) -> Dict[str, int]:
        return {f.name: f.table_stack for f in self.frames}

    def check(self, transition: Mapping[str, Any]) -> None:
        """Raises ValueError for a transition these rows cannot hold (FrameField.check)."""
        for f in self.frames:
            f.check(transition)

    def rows(self, transition: Mapping[str, Any], previous: Optional[Mapping[str, Any]]
             ) -> Tuple[List[Row], bool]:
        """The rows to store for one transition (values of cpprb's shapes and dtypes) after
        `previous` (the last transition stored in this stored episode, None at its start),
        and whether they start a new stored episode (history rows first). Precondition:
        `check(transition)` passed."""
        row: Row = {name: transition[name] for name in self.plain_names}
        for f in self.frames:
            row[f.name] = f.row_frame(transition)
        if previous is not None:
            for f in self.frames:
                if not f.continues(transition, previous):
                    break
            else:
                return [row], False
        earlier = [f.history(transition) for f in self.frames]
        history: List[Row] = []
        for i in range(self.history_rows):
            filler: Row = {name: np.zeros(stored_shape(shape), dtype)
                           for name, dtype, shape in self.plain}
            for f, frames in zip(self.frames, earlier):
                j = i - (self.history_rows - len(frames))  # the frames fill the last rows
                filler[f.name] = frames[max(j, 0)]
            history.append(filler)
        return [*history, row], True

    def from_stacks(self, data: Columns) -> Columns:
        """cpprb's values from a sample's (or a read's) stacked frame fields."""
        out = {name: value for name, value in data.items() if name not in self.frame_names}
        for f in self.frames:
            f.split(data[f.name], out)
        return out

    def transitions(self, rows: Columns) -> Columns:
        """cpprb's transitions from stored rows in insertion order (fields and ``episode``,
        ``position``), in the same order: history rows and transitions whose earlier rows
        are gone (evicted) are left out, as the server leaves them out of samples."""
        episode = rows["episode"].astype(np.uint64)
        position = rows["position"].astype(np.uint64)
        n = episode.shape[0]
        ids = (episode << np.uint64(32)) | position  # episode ids stay below 2^32 in practice
        order = np.argsort(ids, kind="stable")
        sorted_ids = ids[order]
        keep = position >= np.uint64(self.history_rows)
        back: List["np.ndarray[Any, Any]"] = []  # row index of position - k, k = 0..H
        for k in range(self.history_rows + 1):
            wanted = ids - np.uint64(k)
            at = np.minimum(np.searchsorted(sorted_ids, wanted), max(n - 1, 0))
            found = (sorted_ids[at] == wanted) if n else np.zeros(0, bool)
            keep &= found
            back.append(order[at])
        out: Columns = {name: rows[name][keep] for name, _, _ in self.plain}
        if "key" in rows:
            out["key"] = rows["key"][keep]
        for f in self.frames:
            span = [back[k][keep] for k in range(f.table_stack - 1, -1, -1)]  # oldest first
            f.split(np.stack([rows[f.name][index] for index in span], axis=1), out)
        return out
