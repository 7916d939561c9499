"""`Sample`: one sampled batch, as received."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, Optional

import numpy as np

from .nesting import flatten, nest

__all__ = ["Sample"]


@dataclass(frozen=True)
class Sample:
    """A batch of n sampled items.

    Every array views the reply's payload buffer (no copy); the buffer belongs to this
    Sample alone and lives as long as any of its arrays do, so the arrays may be kept or
    modified freely.

    Attributes:
        data: field name -> array of shape ``(n, *field_shape)``, in the table's field order;
            a nested field (leaves ``obs/camera``, ``obs/state``) as a dict (or tuple) of
            such arrays: ``data["obs"]["camera"]`` (replayd.nesting). ``sample["obs/camera"]``
            also finds a leaf by its path.
        flat: leaf path -> array, the same arrays as `data` without the nesting.
        keys: uint64 keys of the items (pass them to update_priorities / delete).
        probabilities: float64 probability each item had of being drawn.
        weights: float64 importance weights ``(N*P)^-beta / max_j (N*P_j)^-beta``
            (1 for non-prioritized tables).
        times_sampled: uint32 times each item has been sampled, this draw included.
        state: the table as the draws saw it, ``{"size", "mass", "min_mass"}`` (see
            docs/PROTOCOL.md, sample); None from servers that do not report it.
        mask: of a sequence sample, (n, T) uint8: 1 where a row is a real step, 0 where
            it is padding (zero-filled); None otherwise.
        versions: uint64 policy version of each item (docs/VERSIONS.md), when the sample
            asked for them (``versions=True``, ``min_version`` or ``max_staleness``);
            None otherwise. ``sample["version"]`` also finds it (unless a field is so
            named).
        min_version: the bound a bounded sample was drawn under, as the server resolved
            it (``max_staleness`` becomes a version); None for an unbounded sample.

    An n-step sample (``sample(..., nstep=k)``) has in `data` the start step's fields, the
    reward field replaced by the discounted return, the bootstrap fields (``next_obs``)
    taken h steps on, and ``discount`` (gamma^h, 0 when terminated) and ``steps`` (h).
    """

    data: Dict[str, np.ndarray[Any, Any]]
    keys: np.ndarray[Any, Any]
    probabilities: np.ndarray[Any, Any]
    weights: np.ndarray[Any, Any]
    times_sampled: np.ndarray[Any, Any]
    state: Optional[Dict[str, Any]] = None
    mask: Optional[np.ndarray[Any, Any]] = None
    versions: Optional[np.ndarray[Any, Any]] = None
    min_version: Optional[int] = None
    flat: Dict[str, np.ndarray[Any, Any]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        """`data` may be given flat (leaf paths) or nested; both views are kept."""
        data = self.data
        flat: Dict[str, Any] = data
        for value in data.values():  # plain loops: this runs for every sample
            if type(value) is not np.ndarray:
                flat = {}
                for name, each in data.items():
                    flatten(name, each, flat)
                break
        object.__setattr__(self, "flat", flat)
        for name in flat:
            if "/" in name:
                object.__setattr__(self, "data", nest(flat))
                break

    def __repr__(self) -> str:
        """Short: the size, each field's dtype and item shape, and the first keys (never
        the data itself)."""
        fields = ", ".join(f"{name}: {array.dtype}{list(array.shape[1:])}"
                           for name, array in self.flat.items())
        keys = " ".join(str(k) for k in self.keys[:4].tolist())
        more = " ..." if len(self.keys) > 4 else ""
        return f"<replayd.Sample n={len(self)} {{{fields}}} keys=[{keys}{more}]>"

    def __len__(self) -> int:
        return int(self.keys.shape[0])

    def __getitem__(self, field: str) -> Any:
        """``sample["obs"]`` is ``sample.data["obs"]``; a leaf path (``"obs/camera"``) finds
        the leaf."""
        found = self.data.get(field)
        if found is None and field == "version" and self.versions is not None and \
                field not in self.flat:
            return self.versions
        return self.flat[field] if found is None else found

    def __iter__(self) -> Iterator[str]:
        return iter(self.data)
