"""cpprb's transition files (``save_transitions`` / ``load_transitions``): an ``.npz``
written by ``np.savez_compressed`` with the keys ``safe`` (True), ``version`` (1), ``data``
(the dict of get_all_transitions(), pickled as a 0-d object array), ``Nstep`` (whether the
data are n-step transitions) and ``cache`` (None). cpprb reads what `write` writes, and
`read` reads both of cpprb's layouts:

- ``safe=True``: ``data`` holds the transitions;
- ``safe=False`` (a buffer with next_of or stack_compress): ``data`` is cpprb's memory, one
  row per ring position without the ``next_<name>`` values of ``next_of`` (``next_of`` lists
  those names): a row's next value is the next row's value, except at the positions in
  ``cache`` (where an episode ended, and the newest position), whose ``cache[i]`` holds
  them. Read as cpprb reads it: rows in position order, an episode ending at each cached
  position, the last row's next values from the cache or else row 0's.

Used by replayd.cpprb only.
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Tuple

import numpy as np

FORMAT_VERSION = 1


def write(file: Any, data: Mapping[str, Any], nstep: bool) -> None:
    """Writes `data` (name -> array) to `file`, a path (numpy adds ``.npz``) or a binary
    file object."""
    arrays: Dict[str, Any] = {"safe": True, "version": FORMAT_VERSION, "data": dict(data),
                              "Nstep": bool(nstep), "cache": None}
    np.savez_compressed(file, **arrays)


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
        data: Dict[str, Any] = npz["data"].item()
        if bool(npz["safe"]):
            return [(data, False)]
        cache: Dict[int, Dict[str, Any]] = npz["cache"].item() or {}
        next_of = npz["next_of"].item() if "next_of" in npz.files else None
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
