"""cpprb's transition files (``save_transitions`` / ``load_transitions``): an ``.npz``
written by ``np.savez_compressed`` with the keys ``safe``, ``version`` (1), ``data``,
``Nstep`` (whether the data are n-step transitions), ``cache`` and ``next_of``, the dicts
and None pickled as 0-d object arrays. `write` writes either of cpprb's layouts, as cpprb's
save_transitions does, and `read` reads both:

- ``safe=True``: ``data`` holds the transitions (the dict of get_all_transitions()),
  ``cache`` and ``next_of`` are None;
- ``safe=False`` (a buffer with next_of or stack_compress): ``data`` is cpprb's memory, one
  row per ring position without the ``next_<name>`` values of ``next_of`` (``next_of`` lists
  those names): a row's next value is the next row's value, except at the positions in
  ``cache`` (where an episode ended, and the newest position), whose ``cache[i]`` holds
  them. Read as cpprb reads it: rows in position order, an episode ending at each cached
  position, the last row's next values from the cache or else row 0's.

Used by replayd.cpprb only.
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Sequence, Tuple

import numpy as np

FORMAT_VERSION = 1


def write(file: Any, data: Mapping[str, Any], nstep: bool, *, safe: bool = True,
          next_of: Sequence[str] = (), stack_compress: Sequence[str] = ()) -> None:
    """Writes the transitions `data` (name -> array, in ring order, as get_all_transitions
    returns them) to `file`, a path (numpy adds ``.npz``) or a binary file object. As
    cpprb: the safe layout unless `safe` is False and the buffer has `next_of` or
    `stack_compress` values, then the unsafe one (module docstring)."""
    if safe or not (next_of or stack_compress):
        arrays: Dict[str, Any] = {"safe": True, "version": FORMAT_VERSION,
                                  "data": dict(data), "Nstep": bool(nstep), "cache": None,
                                  "next_of": None}
    else:
        memory, cache = _unsafe_layout(data, next_of, stack_compress)
        arrays = {"safe": False, "version": FORMAT_VERSION, "data": memory,
                  "Nstep": bool(nstep), "cache": cache,
                  "next_of": np.array(next_of, ndmin=1) if next_of else None}
    np.savez_compressed(file, **arrays)


def _unsafe_layout(data: Mapping[str, Any], next_of: Sequence[str],
                   stack_compress: Sequence[str]
                   ) -> Tuple[Dict[str, Any], Dict[int, Dict[str, Any]]]:
    """cpprb's memory and cache for the transitions `data`: the rows without the
    ``next_<name>`` values of `next_of`, and for each position whose transition the next
    row does not continue (its next values are not the next row's values, or a stack is
    not the next row's shifted by one frame), and for the last, its next values and
    stacks, where cpprb's load_transitions ends an episode."""
    nexts = {f"next_{name}" for name in next_of}
    memory = {name: np.asarray(values) for name, values in data.items() if name not in nexts}
    rows = min((values.shape[0] for values in memory.values()), default=0)
    cache: Dict[int, Dict[str, Any]] = {}
    for i in range(rows):
        last = i == rows - 1
        if last or not all(np.array_equal(np.asarray(data[f"next_{name}"])[i],
                                          memory[name][i + 1]) for name in next_of) or \
                not all(np.array_equal(memory[name][i][..., 1:], memory[name][i + 1][..., :-1])
                        for name in stack_compress):
            entry = {f"next_{name}": np.array(np.asarray(data[f"next_{name}"])[i])
                     for name in next_of}
            entry.update({name: np.array(memory[name][i]) for name in stack_compress})
            cache[i] = entry
    return memory, cache


def _unwrap(value: Any) -> Any:
    """An npz entry as cpprb reads it: a pickled object (a 0-d object array) as that
    object, any other array as it is."""
    return value[np.newaxis][0]


def read(file: Any, nstep: bool) -> List[Tuple[Dict[str, Any], bool]]:
    """The transitions of `file` for a buffer whose is_Nstep() is `nstep`, as runs to add in
    order: (name -> values, whether an episode ends after them). Raises ValueError (cpprb's
    messages) when the Nstep flags differ or for an unknown version. Unpickles: never read
    an untrusted file."""
    with np.load(file, allow_pickle=True) as npz:
        version = npz["version"]
        if bool(npz["Nstep"]) != nstep:
            raise ValueError("Stored data and Buffer mismatch for Nstep")
        if version != FORMAT_VERSION:
            raise ValueError(f"Unknown Format Version: {version}")
        data: Dict[str, Any] = _unwrap(npz["data"])
        if bool(npz["safe"]):
            return [(data, False)]
        cache: Dict[int, Dict[str, Any]] = _unwrap(npz["cache"]) or {}
        next_of = _unwrap(npz["next_of"]) if "next_of" in npz.files else None
    return _unsafe_runs(data, cache, [] if next_of is None else
                        [str(name) for name in np.array(next_of, ndmin=1)])


def _unsafe_runs(memory: Mapping[str, Any], cache: Mapping[int, Mapping[str, Any]],
                 next_of: List[str]) -> List[Tuple[Dict[str, Any], bool]]:
    """cpprb's safe=False memory as runs of transitions (module docstring)."""
    rows = min((np.shape(values)[0] for values in memory.values()), default=0)
    runs: List[Tuple[Dict[str, Any], bool]] = []

    def span(begin: int, end: int) -> Dict[str, Any]:
        """Rows begin..end-1, each next value from the row after it."""
        out = {name: np.asarray(values)[begin:end] for name, values in memory.items()}
        for name in next_of:
            out[f"next_{name}"] = np.asarray(memory[name])[begin + 1:end + 1]
        return out

    def cached(i: int, nexts: Mapping[str, Any]) -> Dict[str, Any]:
        """Row i, its next values from `nexts`."""
        out = {name: np.asarray(values)[i:i + 1] for name, values in memory.items()}
        out.update({name: np.asarray(value)[np.newaxis] for name, value in nexts.items()})
        return out

    begin = 0
    for i in sorted(int(i) for i in cache):
        if i >= rows:
            continue
        if begin < i:
            runs.append((span(begin, i), False))
        runs.append((cached(i, cache[i]), True))
        begin = i + 1
    if begin < rows:
        if begin < rows - 1:
            runs.append((span(begin, rows - 1), False))
        wrap = {f"next_{name}": np.asarray(memory[name])[0] for name in next_of}
        runs.append((cached(rows - 1, wrap), False))
    return runs
